/* SPDX-License-Identifier: Apache-2.0 */
/* IPv6 maps of the datapath (docs/contracts.md "IPv6"), beside maps.h's. Included after maps.h
 * with the same HF_LB_MAPS / HF_DECAP_MAPS switches. Service IDs and backend IDs are shared with
 * IPv4: hf_maglev, hf_fe_stats, hf_be_stats and hf_reasons serve both families. */
#ifndef HF_MAPS6_H
#define HF_MAPS6_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "consts6.h"
#include "structs6.h"
#include "maps.h"

#ifdef HF_LB_MAPS
/* IPv6 frontends: (VIP6, port, proto) → the same struct service_value as hf_services. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HF_MAX_SERVICES);
	__type(key, struct service_key6);
	__type(value, struct service_value);
} hf_services6 SEC(".maps");

/* Backend ID → IPv6 address. An ID names one backend: its address is in hf_backends (IPv4) or
 * here (IPv6); the IPv4 entry is read first. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HF_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct backend_value6);
} hf_backends6 SEC(".maps");

/* IPv6 connection tracking: flow key → backend (either family) + last seen. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HF_MAX_FLOWS);
	__type(key, struct flow_key6);
	__type(value, struct flow_value6);
} hf_flows6 SEC(".maps");

/* IPv6 flows not shared yet (docs/contracts.md "When a flow is shared"), as hf_flows_syn for
 * IPv4: flags hold the backend ID the flow was picked with. Not pinned. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HF_MAX_SYN_FLOWS);
	__type(key, struct flow_key6);
	__type(value, struct flow_value6);
} hf_flows_syn6 SEC(".maps");

/* This node's IPv6 source address for encapsulation to IPv6 backends. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lb_config6);
} hf_config6 SEC(".maps");

/* New IPv6 flow events (struct flow_event6). A ring of its own: hf_events keeps carrying only
 * 32-byte struct flow_event records, so readers of it need no change. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, HF_RINGBUF_BYTES);
} hf_events6 SEC(".maps");
#endif

#ifdef HF_DECAP_MAPS
/* IPv6 LB IPs present on this namespace's lo (key: 16 address bytes). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HF_MAX_LOCAL_VIPS);
	__type(key, struct vip6_key);
	__type(value, __u32);
} hf_local_vips6 SEC(".maps");
#endif

#endif
