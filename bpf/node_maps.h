/* SPDX-License-Identifier: Apache-2.0 */
/* Structures and maps of the node side (node_tc.c, docs/backends.md): what a node agent writes
 * for the pods on its node. Mirrored byte for byte by node/bpf/node_structs.ts. Addresses and
 * ports network byte order, as on the wire. */
#ifndef HF_NODE_MAPS_H
#define HF_NODE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "consts.h"
#include "structs.h"

/* hf_node_svc key, 12 bytes: a frontend (LB IP, port, proto) served by a local pod. */
struct node_svc_key {
	__be32 pod;
	__be32 vip;
	__be16 port;
	__u8 proto;
	__u8 pad;
};

/* hf_node_svc6 key, 36 bytes. */
struct node_svc_key6 {
	__u8 pod[16];
	__u8 vip[16];
	__be16 port;
	__u8 proto;
	__u8 pad;
};

/* hf_node_svc / hf_node_svc6 value, 4 bytes: where the pod listens. */
struct node_svc_value {
	__be16 target_port;
	__u16 pad;
};

/* hf_node_flows key, 16 bytes: a flow as the pod's replies carry it. */
struct node_flow_key {
	__be32 pod;
	__be32 client;
	__be16 pod_port;
	__be16 client_port;
	__u8 proto;
	__u8 pad[3];
};

/* hf_node_flows value, 16 bytes: the frontend the client addressed. */
struct node_flow_value {
	__be32 vip;
	__be16 port;
	__u16 pad;
	__u64 last_seen_ns; /* bpf_ktime_get_coarse_ns() of the last client packet, ~1 s steps */
};

/* hf_node_flows6 key, 40 bytes. */
struct node_flow_key6 {
	__u8 pod[16];
	__u8 client[16];
	__be16 pod_port;
	__be16 client_port;
	__u8 proto;
	__u8 pad[3];
};

/* hf_node_flows6 value, 32 bytes. */
struct node_flow_value6 {
	__u8 vip[16];
	__be16 port;
	__u16 pad;
	__u32 pad2;
	__u64 last_seen_ns;
};

/* Settings: encap port, MSS clamp of the pods' SYN/ACKs (struct decap_config of structs.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct decap_config);
} hf_node_cfg SEC(".maps");

/* (pod, LB IP, port, proto) → target port: the frontends each local pod serves. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HF_MAX_NODE_SERVICES);
	__type(key, struct node_svc_key);
	__type(value, struct node_svc_value);
} hf_node_svc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HF_MAX_NODE_SERVICES);
	__type(key, struct node_svc_key6);
	__type(value, struct node_svc_value);
} hf_node_svc6 SEC(".maps");

/* Per-flow reverse translation, made when the client's packet is translated: the pod's replies
 * get back the LB IP and port the client addressed, even when several frontends share the pod's
 * address and target port. LRU: idle flows age out under pressure; the agent removes a pod's. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HF_MAX_NODE_FLOWS);
	__type(key, struct node_flow_key);
	__type(value, struct node_flow_value);
} hf_node_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HF_MAX_NODE_FLOWS);
	__type(key, struct node_flow_key6);
	__type(value, struct node_flow_value6);
} hf_node_flows6 SEC(".maps");

/* hf_node_clock value: this CPU's last coarse clock reading and the jiffies it was taken at. */
struct hf_node_clock_cache {
	__u64 jiffies;
	__u64 ns;
};

/* Per-CPU cache of bpf_ktime_get_coarse_ns() per jiffy (node_tc.c hf_node_now, as hf_lb's
 * hf_clock): the clock helper once per tick per CPU instead of on every client packet. Not
 * pinned: a cache. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hf_node_clock_cache);
} hf_node_clock SEC(".maps");

/* Per-CPU count of outcomes (enum hf_node_reason). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HF_N_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} hf_node_stat SEC(".maps");

#endif
