/* SPDX-License-Identifier: Apache-2.0 */
/* IPv6 structures shared between the BPF programs and user space (docs/contracts.md "IPv6"),
 * beside — not widening — the IPv4 ones of structs.h, whose layouts stay as they are. Mirrored
 * byte for byte by node/bpf/structs6.ts. Addresses are 16 bytes in network order as on the wire;
 * ports network order; flags, IDs and times host order. */
#ifndef HF_STRUCTS6_H
#define HF_STRUCTS6_H

#include <linux/types.h>
#include "structs.h"

/* hf_flows6 key, 40 bytes. client-ip mode: sport = 0. */
struct flow_key6 {
	__u8 saddr[16];
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

/* hf_flows6 value, 32 bytes. A v6 client's backend may be IPv4 (family HF_AF_INET, the address
 * in the first 4 bytes, the rest zero) or IPv6 (HF_AF_INET6). */
struct flow_value6 {
	__u8 backend_addr[16];
	__u8 backend_family; /* HF_AF_INET or HF_AF_INET6 */
	__u8 pad[3];
	__u32 flags;         /* HF_FLOW_F_* */
	__u64 last_seen_ns;  /* as flow_value.last_seen_ns */
};

/* hf_events6 record, 72 bytes: an IPv6 flow the LB program created. */
struct flow_event6 {
	struct flow_key6 key;
	__u8 backend_addr[16];
	__u8 backend_family;
	__u8 pad[3];
	__u32 service_id;
	__u64 ts_ns;
};

/* hf_services6 key, 20 bytes; the value is struct service_value (structs.h). */
struct service_key6 {
	__u8 vip[16];
	__be16 port;
	__u8 proto;
	__u8 pad;
};

/* hf_backends6 value, 20 bytes (key: backend ID, the same ID space as hf_backends). */
struct backend_value6 {
	__u8 addr[16]; /* all zero: no IPv6 backend with this ID */
	__be16 port;   /* informational, as backend_value.port */
	__u16 pad;
};

/* hf_config6[0], 16 bytes: this LB node's IPv6 address, the outer source of encapsulation to
 * IPv6 backends; all zero = not configured (flows to IPv6 backends are dropped). Seed and encap
 * port are hf_config's. */
struct lb_config6 {
	__u8 src_addr[16];
};

/* hf_local_vips6 key (decap object), 16 bytes: an IPv6 LB IP on the pod's lo. */
struct vip6_key {
	__u8 addr[16];
};

#endif
