/* SPDX-License-Identifier: Apache-2.0 */
/* Constants of the Holdfast datapath. Numbers that user space also needs are mirrored in
 * node/bpf/consts.ts (flow flags in node/bpf/flow.ts); tests/bpf/consts_mirror_test.ts fails when
 * they drift, or when a new HF_MAX_* here has no mirror. */
#ifndef HF_CONSTS_H
#define HF_CONSTS_H

#define HF_ETH_P_IP 0x0800
#define HF_IPPROTO_ICMP 1
#define HF_IPPROTO_TCP 6
#define HF_IPPROTO_UDP 17

#define HF_IP_MF 0x2000
#define HF_IP_OFFSET 0x1fff
#define HF_IP_DF 0x4000

/* ICMP destination unreachable / fragmentation needed (RFC 792, RFC 1191) */
#define HF_ICMP_DEST_UNREACH 3
#define HF_ICMP_FRAG_NEEDED 4
/* ICMP time exceeded (RFC 792): like destination unreachable, an error quoting the packet. */
#define HF_ICMP_TIME_EXCEEDED 11
/* An ICMP error quotes the IPv4 header (20, no options here) and 8 bytes of L4. */
#define HF_ICMP_QUOTE (20 + 8)

/* Outer headers added by encapsulation: IPv4 (20, no options) + UDP (8). */
#define HF_ENCAP_OVERHEAD 28
#define HF_ENCAP_PORT_DEFAULT 6080
#define HF_OUTER_TTL 64
/* Outer UDP source port: HF_SPORT_BASE | (flow_hash & HF_SPORT_MASK), 49152..65535. */
#define HF_SPORT_BASE 0xc000
#define HF_SPORT_MASK 0x3fff

/* service_value.flags */
#define HF_SVC_F_CLIENT_IP (1u << 0) /* flow key is the client address, not the 5-tuple */
/* Takes no new TCP connection: a SYN that finds no flow (stored or held) is dropped, counted as
 * HF_R_DROP_NO_BACKENDS; the client's retransmission lands where routers send it by then. Set
 * while an anycast node withdraws an address its pod still serves (docs/anycast.md "Drains"). */
#define HF_SVC_F_DRAINING (1u << 1)

/* flow_value.flags */
#define HF_FLOW_F_PEER (1u << 0) /* learned from a peer, installed by the agent */
/* In hf_flows without its new-flow event (the ring buffer was full): a later packet of the flow
 * submits it within the event budget and clears the bit (flow_share.h hf_reshare_flow). */
#define HF_FLOW_F_UNSHARED (1u << 1)

/* Flow sharing (docs/contracts.md "When a flow is shared"): confirmed flows taken into hf_flows
 * plus new-flow events retried (hence Redis writes) per second per CPU when
 * lb_config.event_budget is 0. */
#define HF_EVENT_BUDGET_DEFAULT 20000
#define HF_NSEC_PER_SEC 1000000000ull

/* Default map sizes. Services, backends and flows are set at load time instead when the agent
 * asks (--max-services, --max-backends, --max-flows: bpf_map__set_max_entries), so code must not
 * bound lookups by these: service IDs must be < the size of hf_maglev and backend IDs < the size
 * of hf_backends (the controller allocates them densely from 1; arrays indexed by them keep
 * lookups inlined). Maglev: the inner array template only; real tables may have any size
 * (BPF_F_INNER_MAP). */
#define HF_MAX_SERVICES 4096
#define HF_MAX_BACKENDS 65536
#define HF_MAX_FLOWS 262144
/* hf_flows_syn: flows not yet shared (a SYN's, or waiting for the event budget); an LRU apart
 * from hf_flows so a SYN flood evicts only other unconfirmed flows, never established ones. */
#define HF_MAX_SYN_FLOWS 65536
#define HF_MAGLEV_TEMPLATE_SIZE 65537
#define HF_RINGBUF_BYTES (8 << 20)
#define HF_MAX_LOCAL_VIPS 1024
/* Node side (node_tc.c): (pod, LB IP, port, proto) → target port entries per family, and the
 * per-flow reverse translations (LRU) per family. */
#define HF_MAX_NODE_SERVICES 16384
#define HF_MAX_NODE_FLOWS 131072

/* Per-CPU reason counters (hf_reasons index). Every packet the LB program sees bumps exactly one
 * of them; the names are mirrored in node/bpf/consts.ts REASONS. */
enum hf_reason {
	HF_R_PASS_NOT_IPV4 = 0,     /* neither IPv4 nor IPv6 (ARP, ...): passed untouched */
	HF_R_PASS_TRUNCATED = 1,    /* Ethernet/IPv4/ports unreadable: passed, the kernel drops it */
	HF_R_PASS_NOT_L4 = 2,       /* IPv4 but neither TCP nor UDP (ICMP, ...): passed */
	HF_R_PASS_NOT_FRONTEND = 3, /* no service for (daddr, dport, proto): passed untouched */
	HF_R_DROP_IP_OPTIONS = 4,   /* to a frontend with IP options */
	HF_R_DROP_FRAGMENT = 5,     /* to a frontend, fragmented */
	HF_R_DROP_BAD_LENGTH = 6,   /* to a frontend, IP/TCP/UDP lengths inconsistent */
	HF_R_DROP_NO_BACKENDS = 7,  /* new flow, service has backend count 0 */
	HF_R_DROP_NO_MAGLEV = 8,    /* new flow, no Maglev table for the service */
	HF_R_DROP_MAGLEV_SLOT_ZERO = 9,    /* new flow, Maglev slot unset (0) */
	HF_R_DROP_NO_BACKEND = 10,  /* new flow, slot names a backend ID not in hf_backends */
	HF_R_DROP_NO_CONFIG = 11,   /* hf_config has no source address yet */
	HF_R_DROP_ENCAP = 12,       /* bpf_xdp_adjust_head failed */
	HF_R_DROP_TOO_BIG = 13,     /* packet + 28 bytes exceeds the MTU (see docs/mtu.md) */
	HF_R_TX_HIT = 14,           /* encapsulated, flow map hit */
	HF_R_TX_NEW = 15,           /* encapsulated, new flow (Maglev) */
	HF_R_EVENT_LOST = 16,       /* ring buffer full: flow in hf_flows without its event (flagged) */
	HF_R_PASS_ICMP = 17,        /* ICMP not about a frontend's flow (echo, ...): passed */
	HF_R_TX_ICMP_TOO_BIG = 18,  /* oversize DF packet answered with ICMP frag-needed (docs/mtu.md) */
	/* Hostile input to a frontend (docs/contracts.md "Hostile input"): dropped, no flow made. */
	HF_R_DROP_MARTIAN = 19,     /* source 0/8, 127/8, 224/4, 240/4, the VIP or this LB node */
	HF_R_DROP_TTL_ZERO = 20,    /* TTL 0: no host or router may send it */
	HF_R_DROP_BAD_CSUM = 21,    /* IPv4 header checksum does not verify */
	HF_R_DROP_TCP_FLAGS = 22,   /* TCP SYN together with FIN or RST */
	HF_R_DROP_L2_GROUP_DST = 23, /* sent to a broadcast/multicast MAC (RFC 1122 3.3.6) */
	HF_R_DROP_L2_GROUP_SRC = 24, /* broadcast/multicast source MAC: no station has one */
	/* ICMP errors to a frontend (docs/contracts.md "ICMP errors"). */
	HF_R_TX_ICMP_TO_BACKEND = 25, /* ICMP error encapsulated to the backend owning its flow */
	HF_R_PASS_ICMP_BAD_QUOTE = 26, /* ICMP error whose quoted packet is cut or malformed */
	/* Flow sharing (docs/contracts.md "When a flow is shared"). tx_new counts every first packet
	 * (Maglev pick) whether or not its flow is shared at once. */
	HF_R_TX_UNCONFIRMED = 27,   /* encapsulated, flow in hf_flows_syn and still not shared */
	HF_R_TX_CONFIRMED = 28,     /* encapsulated, the packet confirmed a flow of hf_flows_syn: shared */
	/* Besides the packet's own reason (like event_lost): */
	HF_R_FLOW_SHARED = 29,      /* a flow's new-flow event submitted (on entering hf_flows or later) */
	HF_R_FLOW_UNSHARED = 30,    /* confirmed flow held in hf_flows_syn: this CPU's budget is spent */
	/* IPv6 (docs/contracts.md "IPv6"); every other reason applies to IPv6 as to IPv4. */
	HF_R_PASS_IPV6_EXT = 31,    /* IPv6 with an extension header (incl. fragments): passed */
	/* The flow's backend is this node (hf_config src_addr): an anycast node delivers to its own
	 * pod instead of encapsulating to itself (docs/anycast.md "Flow redirection"). */
	HF_R_PASS_LOCAL_BACKEND = 32,
	HF_R_COUNT = 33,
};

/* Per-CPU reason counters of the decap/MSS object (hf_decap_stat index). */
enum hf_decap_reason {
	HF_D_DECAP = 0,          /* outer headers stripped, inner packet delivered */
	HF_D_NOT_LOCAL = 1,      /* encap port, but inner destination is not a local LB IP: passed */
	HF_D_BAD_INNER = 2,      /* encap port, inner header not a clean IPv4 header: dropped */
	HF_D_ADJUST_FAILED = 3,  /* bpf_skb_adjust_room failed: dropped */
	HF_D_MSS_CLAMPED = 4,    /* SYN from a local LB IP had its MSS lowered */
	HF_D_MSS_OK = 5,         /* SYN from a local LB IP, MSS already small enough */
	HF_D_COUNT = 6,
};

/* Per-CPU reason counters of the node object (hf_node_stat index, node_tc.c); mirrored in
 * node/bpf/consts.ts NODE_REASONS. */
enum hf_node_reason {
	HF_N_NAT_IN = 0,        /* decapsulated, LB IP:port → pod IP:target port, delivered */
	HF_N_NAT_OUT = 1,       /* a pod's reply: pod IP:target port → LB IP:port (DSR) */
	HF_N_NOT_LOCAL = 2,     /* encap port, but no frontend of this pod matches: passed */
	HF_N_BAD_INNER = 3,     /* encap port to a pod, inner packet malformed or cut: dropped */
	HF_N_ADJUST_FAILED = 4, /* bpf_skb_adjust_room or a rewrite failed: dropped */
	HF_N_MSS_CLAMPED = 5,   /* a pod's SYN/ACK had its MSS lowered */
	HF_N_MSS_OK = 6,        /* a pod's SYN/ACK, MSS already small enough */
	HF_N_ICMP_IN = 7,       /* ICMP error about a pod's reply: translated and delivered */
	HF_N_ICMP_OUT = 8,      /* a pod's ICMP error about a client's packet: translated back */
	HF_N_COUNT = 9,
};

#endif
