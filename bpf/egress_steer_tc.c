// SPDX-License-Identifier: Apache-2.0
/* Egress steering on a routed pod network (docs/egress.md "Steering client pods"):
 *  - hf_steer_encap (tc ingress of a client pod's host-side veth, on the client's node): an IPv4
 *    packet from a steered client pod (hf_steer_src: pod address → slot, one slot per floating
 *    address) to one of its EgressNAT's destinations (hf_steer_dst, LPM over slot + address) is
 *    encapsulated in IPv4 + UDP (28 bytes, destination port HF_STEER_PORT) to the NAT pod that
 *    owns the slot's floating address now (hf_steer_owner[slot]); the outer source is the client
 *    pod's own address, so the node routes the result as ordinary pod-to-pod traffic. No owner
 *    known yet: dropped and counted (never leaves unSNATed).
 *  - hf_steer_decap (tc ingress of a NAT pod's pod-network interface): a packet to the pod's own
 *    address (hf_steer_self) and HF_STEER_PORT whose inner packet is a whole IPv4 packet loses
 *    its outer 28 bytes when its inner source is one the pod translates (hf_steer_sources, the
 *    config's sources; anything else is dropped, never forwarded with a private source); the
 *    inner packet — client pod address as source — is forwarded and SNATed by the NAT pod's
 *    rules as if the client had sent it there directly.
 *  - hf_steer_clamp (tc egress of the same veth: packets into the pod): a TCP SYN/ACK from one of
 *    a steered client's destinations has its MSS lowered to HF_STEER_MSS, so the client's
 *    segments still fit the path once encapsulated (its replies come back unencapsulated).
 * Repointing a floating address to a new owner is one write of hf_steer_owner[slot]. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "consts.h"
#include "mss_clamp.h"

char LICENSE[] SEC("license") = "GPL";

#define HF_STEER_PORT 6081
#define HF_STEER_SLOTS 4096
#define HF_STEER_CLIENTS 65536
#define HF_STEER_DESTS 16384
/* 1500-byte path − 28 (outer IPv4 + UDP) − 40 (IPv4 + TCP headers). */
#define HF_STEER_MSS 1432

/* hf_steer_stat reasons (mirrored in node/egress_steer/datapath.ts). */
enum hf_steer_reason {
	HF_S_ENCAP = 0,       /* encapsulated to the owner */
	HF_S_NO_OWNER = 1,    /* steered client and destination, no owner known: dropped */
	HF_S_ADJUST_FAILED = 2,
	HF_S_DECAP = 3,       /* decapsulated on a NAT pod */
	HF_S_BAD_INNER = 4,   /* for us, but the inner packet is not a whole IPv4 packet: dropped */
	HF_S_FRAGMENT = 5,    /* a fragment to the steer port: passed to the stack */
	HF_S_NOT_SOURCE = 6,  /* inner source not among the pod's sources: dropped */
	HF_S_MSS_CLAMPED = 7, /* a SYN/ACK to a steered client had its MSS lowered */
	HF_S_MAX = 8,
};

struct steer_owner {
	__be32 addr; /* owner pod address, 0 = none */
	__u32 epoch; /* low 32 bits of the lease epoch (for dumps) */
};

struct steer_dst_key {
	__u32 prefixlen; /* 32 (slot) + destination prefix length */
	__u32 slot;      /* big-endian, so the LPM compares it first */
	__be32 addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HF_STEER_CLIENTS);
	__type(key, __be32);
	__type(value, __u32);
} hf_steer_src SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HF_STEER_SLOTS);
	__type(key, __u32);
	__type(value, struct steer_owner);
} hf_steer_owner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, HF_STEER_DESTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct steer_dst_key);
	__type(value, __u8);
} hf_steer_dst SEC(".maps");

struct steer_src_key {
	__u32 prefixlen;
	__be32 addr;
};

/* The NAT pod's sources (decap side): what its SNAT rules translate. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, HF_STEER_CLIENTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct steer_src_key);
	__type(value, __u8);
} hf_steer_sources SEC(".maps");

/* The NAT pod's own address (decap side), index 0; 0 = decap nothing. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __be32);
} hf_steer_self SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HF_S_MAX);
	__type(key, __u32);
	__type(value, __u64);
} hf_steer_stat SEC(".maps");

static __always_inline void hf_scount(__u32 reason)
{
	__u64 *v = bpf_map_lookup_elem(&hf_steer_stat, &reason);
	if (v)
		*v += 1;
}

static __always_inline __u16 hf_csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

SEC("tc")
int hf_steer_encap(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(HF_ETH_P_IP))
		return TC_ACT_OK;
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->version != 4)
		return TC_ACT_OK;
	__be32 src = ip->saddr;
	__u32 *slot = bpf_map_lookup_elem(&hf_steer_src, &src);
	if (!slot)
		return TC_ACT_OK;
	struct steer_dst_key k = { .prefixlen = 64, .slot = bpf_htonl(*slot), .addr = ip->daddr };
	if (!bpf_map_lookup_elem(&hf_steer_dst, &k))
		return TC_ACT_OK;
	__u32 s = *slot;
	struct steer_owner *o = bpf_map_lookup_elem(&hf_steer_owner, &s);
	if (!o || o->addr == 0) {
		hf_scount(HF_S_NO_OWNER);
		return TC_ACT_SHOT;
	}
	__be32 owner = o->addr;
	__u16 inner_len = bpf_ntohs(ip->tot_len);
	__u8 tos = ip->tos;
	__be16 df = ip->frag_off & bpf_htons(HF_IP_DF);
	__u32 hash = bpf_get_hash_recalc(skb);
	if (bpf_skb_adjust_room(skb, HF_ENCAP_OVERHEAD, BPF_ADJ_ROOM_MAC,
				BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L4_UDP)) {
		hf_scount(HF_S_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	struct {
		struct iphdr ip;
		struct udphdr udp;
	} h = {};
	h.ip.version = 4;
	h.ip.ihl = 5;
	h.ip.tos = tos;
	h.ip.tot_len = bpf_htons(inner_len + HF_ENCAP_OVERHEAD);
	h.ip.frag_off = df;
	h.ip.ttl = HF_OUTER_TTL;
	h.ip.protocol = HF_IPPROTO_UDP;
	h.ip.saddr = src;
	h.ip.daddr = owner;
	__u32 sum = 0;
	__u16 *w = (__u16 *)&h.ip;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	h.ip.check = hf_csum_fold(sum);
	h.udp.source = bpf_htons(HF_SPORT_BASE | (hash & HF_SPORT_MASK));
	h.udp.dest = bpf_htons(HF_STEER_PORT);
	h.udp.len = bpf_htons(inner_len + sizeof(struct udphdr));
	if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr), &h, sizeof(h), 0)) {
		hf_scount(HF_S_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_scount(HF_S_ENCAP);
	return TC_ACT_OK;
}

SEC("tc")
int hf_steer_decap(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(HF_ETH_P_IP))
		return TC_ACT_OK;
	if (bpf_skb_pull_data(skb, sizeof(struct ethhdr) + 2 * sizeof(struct iphdr) +
				       sizeof(struct udphdr)))
		return TC_ACT_OK;
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->version != 4 || ip->ihl != 5 ||
	    ip->protocol != HF_IPPROTO_UDP)
		return TC_ACT_OK;
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end || udp->dest != bpf_htons(HF_STEER_PORT))
		return TC_ACT_OK;
	__u32 zero = 0;
	__be32 *self = bpf_map_lookup_elem(&hf_steer_self, &zero);
	if (!self || *self == 0 || *self != ip->daddr)
		return TC_ACT_OK;
	if (ip->frag_off & bpf_htons(HF_IP_MF | HF_IP_OFFSET)) {
		hf_scount(HF_S_FRAGMENT);
		return TC_ACT_OK;
	}
	struct iphdr *in = (void *)(udp + 1);
	if ((void *)(in + 1) > data_end || in->version != 4 || in->ihl < 5 ||
	    bpf_ntohs(in->tot_len) + HF_ENCAP_OVERHEAD != bpf_ntohs(ip->tot_len)) {
		hf_scount(HF_S_BAD_INNER);
		return TC_ACT_SHOT;
	}
	struct steer_src_key sk = { .prefixlen = 32, .addr = in->saddr };
	if (!bpf_map_lookup_elem(&hf_steer_sources, &sk)) {
		hf_scount(HF_S_NOT_SOURCE);
		return TC_ACT_SHOT;
	}
	if (bpf_skb_adjust_room(skb, -HF_ENCAP_OVERHEAD, BPF_ADJ_ROOM_MAC, 0)) {
		hf_scount(HF_S_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_scount(HF_S_DECAP);
	return TC_ACT_OK;
}

SEC("tc")
int hf_steer_clamp(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(HF_ETH_P_IP))
		return TC_ACT_OK;
	struct iphdr ip;
	if (bpf_skb_load_bytes(skb, sizeof(struct ethhdr), &ip, sizeof(ip)) || ip.version != 4 ||
	    ip.ihl < 5 || ip.protocol != HF_IPPROTO_TCP)
		return TC_ACT_OK;
	__be32 client = ip.daddr;
	__u32 *slot = bpf_map_lookup_elem(&hf_steer_src, &client);
	if (!slot)
		return TC_ACT_OK;
	struct steer_dst_key k = { .prefixlen = 64, .slot = bpf_htonl(*slot), .addr = ip.saddr };
	if (!bpf_map_lookup_elem(&hf_steer_dst, &k))
		return TC_ACT_OK;
	__u32 l4 = sizeof(struct ethhdr) + ip.ihl * 4;
	struct tcphdr tcp;
	if (bpf_skb_load_bytes(skb, l4, &tcp, sizeof(tcp)) || !tcp.syn || !tcp.ack)
		return TC_ACT_OK;
	if (hf_clamp_syn(skb, l4, &tcp, HF_STEER_MSS) == HF_MSS_CLAMPED)
		hf_scount(HF_S_MSS_CLAMPED);
	return TC_ACT_OK;
}
