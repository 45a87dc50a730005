/* SPDX-License-Identifier: Apache-2.0 */
/* BPF maps of the datapath. A program defines HF_LB_MAPS and/or HF_DECAP_MAPS before including
 * this file so each object only creates the maps it uses. Names are what user space finds and
 * pins (node/bpf/datapath.ts); keep them within 15 characters. */
#ifndef HF_MAPS_H
#define HF_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "consts.h"
#include "structs.h"

#ifdef HF_LB_MAPS
/* Frontends: (VIP, port, proto) → service ID, backend count, flow-key mode, Maglev size. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HF_MAX_SERVICES);
	__type(key, struct service_key);
	__type(value, struct service_value);
} hf_services SEC(".maps");

/* Backend ID (as stored in Maglev slots) → address packets are encapsulated to; address 0 = no
 * such backend. An array (IDs are dense, allocated by the controller): an inlined lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HF_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct backend_value);
} hf_backends SEC(".maps");

/* Template of a Maglev table: u32 array of backend IDs; BPF_F_INNER_MAP lets sizes differ,
 * BPF_F_MMAPABLE lets the agent fill a new table by mmap (node/bpf/map_mmap.ts). The kernel takes
 * an inner map only with the template's exact flags; a hf_maglev pinned before the flag keeps its
 * old template, and the agent then makes tables without it (node/bpf/_maglev_tables.ts). */
struct hf_maglev_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	__uint(max_entries, HF_MAGLEV_TEMPLATE_SIZE);
	__type(key, __u32);
	__type(value, __u32);
};

/* Service ID → its Maglev table (an inner array of M backend IDs, 0 = unset slot). An array of
 * maps indexed by the dense service ID; an empty index has no table. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, HF_MAX_SERVICES);
	__type(key, __u32);
	__array(values, struct hf_maglev_inner);
} hf_maglev SEC(".maps");

/* Connection tracking: flow key → backend address + last-seen time (LRU evicts idle flows). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HF_MAX_FLOWS);
	__type(key, struct flow_key);
	__type(value, struct flow_value);
} hf_flows SEC(".maps");

/* Flows not shared yet (docs/contracts.md "When a flow is shared"): a TCP flow until the
 * client's first ACK without SYN/RST, or a confirmed flow while this CPU's event budget is spent.
 * Key and value as hf_flows, flags = the backend's ID (flow_share.h hf_held_flow: an entry whose
 * backend left is ignored); a separate LRU, so unconfirmed flows (a spoofed SYN flood) only ever
 * evict each other. Not pinned: an entry lost is picked again by Maglev. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HF_MAX_SYN_FLOWS);
	__type(key, struct flow_key);
	__type(value, struct flow_value);
} hf_flows_syn SEC(".maps");

/* Node settings written by the agent: outer source address, encap port, hash seed, budget. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lb_config);
} hf_config SEC(".maps");

/* Per-CPU packets/bytes/new flows/drops per frontend, indexed by service ID (IDs are dense;
 * an ID beyond the array is counted in slot 0). An array, not a hash: ~30 ns less per packet. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HF_MAX_SERVICES);
	__type(key, __u32);
	__type(value, struct lb_stats);
} hf_fe_stats SEC(".maps");

/* Per-CPU new flows per backend, indexed by backend ID (slot 0: IDs beyond the array). Per-backend
 * packets are counted where they arrive (hf_decap_stat): the flow-hit path knows only the
 * backend's address, and a per-packet hash lookup by address would cost ~30 ns. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HF_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, __u64);
} hf_be_stats SEC(".maps");

/* Per-CPU count of what happened to each packet (enum hf_reason), incl. drop reasons. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HF_R_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} hf_reasons SEC(".maps");

/* hf_clock value: this CPU's last coarse clock reading and the jiffies it was taken at. */
struct hf_clock_cache {
	__u64 jiffies;
	__u64 ns;
};

/* Per-CPU cache of bpf_ktime_get_coarse_ns() per jiffy (lb.h hf_now): the LB program reads the
 * clock helper once per tick per CPU instead of on every packet. Not pinned: a cache. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hf_clock_cache);
} hf_clock SEC(".maps");

/* hf_budget value: this CPU's new-flow events in the current second. */
struct hf_event_budget {
	__u64 second; /* hf_now() / HF_NSEC_PER_SEC the count is for */
	__u64 spent;
};

/* Per-CPU flow-sharing budget (flow_share.h hf_budget_left): at most lb_config.event_budget flows
 * taken into hf_flows, plus events retried for flagged ones, per second per CPU. Not pinned: a
 * restart only refills it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hf_event_budget);
} hf_budget SEC(".maps");

/* New-flow events (struct flow_event) for the agent, which writes them to Redis. Full: flows
 * still enter hf_flows, flagged HF_FLOW_F_UNSHARED until a later packet sends their event. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, HF_RINGBUF_BYTES);
} hf_events SEC(".maps");
#endif

#ifdef HF_DECAP_MAPS
/* Backend side settings: encap port, MSS clamp value. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct decap_config);
} hf_decap_cfg SEC(".maps");

/* LB IPs present on this namespace's lo: decap only to these, clamp MSS only from these. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HF_MAX_LOCAL_VIPS);
	__type(key, __be32);
	__type(value, __u32);
} hf_local_vips SEC(".maps");

/* Per-CPU count of decap/MSS outcomes (enum hf_decap_reason). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HF_D_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} hf_decap_stat SEC(".maps");
#endif

#endif
