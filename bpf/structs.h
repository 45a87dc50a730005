/* SPDX-License-Identifier: Apache-2.0 */
/* Structures shared between the BPF programs and user space — the only such header. The layout
 * is mirrored byte for byte by node/bpf/structs.ts; flow_key/flow_value/flow_event are fixed by
 * docs/contracts.md. Addresses and ports are network byte order unless named *_host. IPv4 only
 * for now; IPv6 gets its own key structs and maps rather than widening these. */
#ifndef HF_STRUCTS_H
#define HF_STRUCTS_H

#include <linux/types.h>

/* hf_flows key, 16 bytes. client-ip mode: sport = 0. */
struct flow_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

/* hf_flows value, 16 bytes. The backend address (not an ID) keeps entries valid on every node. */
struct flow_value {
	__be32 backend_addr;
	__u32 flags;         /* HF_FLOW_F_*; hf_flows_syn: the backend's ID */
	__u64 last_seen_ns;  /* bpf_ktime_get_coarse_ns() of the last packet (CLOCK_MONOTONIC) */
};

/* hf_events record, 32 bytes: a flow the LB program created. */
struct flow_event {
	struct flow_key key;
	__be32 backend_addr;
	__u32 service_id;
	__u64 ts_ns;
};

/* hf_services key, 8 bytes: the frontend as packets address it. */
struct service_key {
	__be32 vip;
	__be16 port;
	__u8 proto;
	__u8 pad;
};

/* hf_services value, 16 bytes. */
struct service_value {
	__u32 service_id;    /* key of the service's Maglev table, 1..2^24 */
	__u32 backend_count; /* 0: new flows are dropped */
	__u32 flags;         /* HF_SVC_F_* */
	__u32 maglev_size;   /* M: slot = flow_hash % M */
};

/* hf_backends value, 8 bytes (key: backend ID, u32). */
struct backend_value {
	__be32 addr;
	__be16 port; /* informational: DSR keeps the frontend port, packets are not rewritten */
	__u16 pad;
};

/* hf_config[0], 16 bytes: per LB node settings written by the agent. */
struct lb_config {
	__be32 src_addr;     /* outer source: this LB node's address; 0 = not configured, drop */
	__u16 encap_port_host;
	__u16 pad;
	__u32 seed;          /* flow hash seed, same on every LB node */
	__u32 event_budget;  /* flows shared per second per CPU; 0 = HF_EVENT_BUDGET_DEFAULT */
};

/* hf_decap_cfg[0], 8 bytes: backend side settings. */
struct decap_config {
	__u16 encap_port_host;
	__u16 mss_max_host;  /* clamp MSS of SYNs leaving from a local LB IP to this; 0 = off */
	__u32 pad;
};

/* Per-CPU counters per frontend (hf_fe_stats, key service ID) and per backend (hf_be_stats, key
 * backend address). */
struct lb_stats {
	__u64 packets;
	__u64 bytes;
	__u64 new_flows;
	__u64 drops;
};

#endif
