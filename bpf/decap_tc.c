// SPDX-License-Identifier: Apache-2.0
/* Backend side (tc, in the pod's namespace):
 *  - hf_decap (ingress): strips the outer headers — IPv4 + UDP (28 bytes) or IPv6 + UDP (48) —
 *    of packets sent to the encap port whose inner destination is a local LB IP (hf_local_vips
 *    for an inner IPv4 packet, hf_local_vips6 for an inner IPv6 one; either inner family in either
 *    outer family), so the inner packet — client source address intact — is delivered to the
 *    server bound to the LB IP on lo.
 *  - hf_mss_clamp (egress): lowers the MSS option of SYNs leaving from a local LB IP to
 *    mss_max (IPv4) or mss_max - HF_MSS6_DELTA (IPv6), so clients never send segments that no
 *    longer fit once encapsulated by the LB (docs/mtu.md). The SYN/ACK goes to the client
 *    directly (DSR), so this is the only place on the path that sees it. */
#define HF_DECAP_MAPS
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "consts.h"
#include "consts6.h"
#include "structs.h"
#include "maps.h"
#include "maps6.h"
#include "parsing.h"
#include "mss_clamp.h"

char LICENSE[] SEC("license") = "GPL";

/* bpf_skb_adjust_room flags (Linux 6.3+; this system's uapi headers predate them): the IP
 * version of the header left in front once the outer one is removed, so the kernel sets
 * skb->protocol when the families differ. */
#define HF_ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7)
#define HF_ADJ_ROOM_DECAP_L3_IPV6 (1ULL << 8)

/* Bytes hf_decap reads: Ethernet, outer IPv6 (the longer), UDP, inner IPv6 (the longer). */
#define HF_DECAP_NEED (sizeof(struct ethhdr) + 2 * sizeof(struct ipv6hdr) + sizeof(struct udphdr))

static __always_inline void hf_dcount(__u32 reason)
{
	__u64 *v = bpf_map_lookup_elem(&hf_decap_stat, &reason);
	if (v)
		*v += 1;
}

/* The node's decap settings when skb is an IPv4 or IPv6 frame and the agent has written them;
 * NULL otherwise (the caller passes the frame on untouched). */
static __always_inline struct decap_config *hf_ip_config(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(HF_ETH_P_IP) && skb->protocol != bpf_htons(HF_ETH_P_IPV6))
		return NULL;
	__u32 zero = 0;
	return bpf_map_lookup_elem(&hf_decap_cfg, &zero);
}

/* Delivers the inner packet at `inner` (after `overhead` outer bytes) when it is a clean IPv4 or
 * IPv6 header whose length is `inner_len` (what the outer headers say) and whose destination is a
 * local LB IP: strips the outer headers, sets the EtherType and skb->protocol to the inner
 * family. An inner header not inside the frame passes untouched, as before IPv6. Returns the tc
 * verdict. */
static __always_inline int hf_decap_inner(struct __sk_buff *skb, void *inner, void *data_end,
					  __u32 inner_len, __u32 overhead, int outer_v6)
{
	__u8 *first = inner;
	if ((void *)(first + 1) > data_end)
		return TC_ACT_OK;
	__u64 flags = 0;
	__be16 proto;
	if ((*first >> 4) == 4) {
		struct iphdr *in = inner;
		if ((void *)(in + 1) > data_end)
			return TC_ACT_OK;
		if (in->ihl < 5 || bpf_ntohs(in->tot_len) != inner_len) {
			hf_dcount(HF_D_BAD_INNER);
			return TC_ACT_SHOT;
		}
		__be32 vip = in->daddr;
		if (!bpf_map_lookup_elem(&hf_local_vips, &vip)) {
			hf_dcount(HF_D_NOT_LOCAL);
			return TC_ACT_OK;
		}
		proto = bpf_htons(HF_ETH_P_IP);
		if (outer_v6)
			flags = HF_ADJ_ROOM_DECAP_L3_IPV4;
	} else if ((*first >> 4) == 6) {
		struct ipv6hdr *in6 = inner;
		if ((void *)(in6 + 1) > data_end)
			return TC_ACT_OK;
		if (sizeof(*in6) + bpf_ntohs(in6->payload_len) != inner_len) {
			hf_dcount(HF_D_BAD_INNER);
			return TC_ACT_SHOT;
		}
		struct vip6_key vip6;
		__builtin_memcpy(vip6.addr, &in6->daddr, 16);
		if (!bpf_map_lookup_elem(&hf_local_vips6, &vip6)) {
			hf_dcount(HF_D_NOT_LOCAL);
			return TC_ACT_OK;
		}
		proto = bpf_htons(HF_ETH_P_IPV6);
		if (!outer_v6)
			flags = HF_ADJ_ROOM_DECAP_L3_IPV6;
	} else {
		hf_dcount(HF_D_BAD_INNER);
		return TC_ACT_SHOT;
	}
	if (bpf_skb_adjust_room(skb, -(__s32)overhead, BPF_ADJ_ROOM_MAC, flags)) {
		hf_dcount(HF_D_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	if (flags && bpf_skb_store_bytes(skb, offsetof(struct ethhdr, h_proto), &proto,
					 sizeof(proto), 0)) {
		hf_dcount(HF_D_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_dcount(HF_D_DECAP);
	return TC_ACT_OK;
}

SEC("tc")
int hf_decap(struct __sk_buff *skb)
{
	struct decap_config *cfg = hf_ip_config(skb);
	if (!cfg || cfg->encap_port_host == 0)
		return TC_ACT_OK;
	if (skb->data_end - skb->data < HF_DECAP_NEED)
		bpf_skb_pull_data(skb, skb->len < HF_DECAP_NEED ? skb->len : HF_DECAP_NEED);

	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return TC_ACT_OK;
	if (eth->h_proto == bpf_htons(HF_ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		struct udphdr *udp = (void *)(ip + 1);
		if ((void *)(udp + 1) > data_end)
			return TC_ACT_OK;
		if (ip->version != 4 || ip->ihl != 5 || ip->protocol != HF_IPPROTO_UDP ||
		    (ip->frag_off & bpf_htons(HF_IP_MF | HF_IP_OFFSET)))
			return TC_ACT_OK;
		if (udp->dest != bpf_htons(cfg->encap_port_host))
			return TC_ACT_OK;
		__u32 tot = bpf_ntohs(ip->tot_len);
		if (tot < HF_ENCAP_OVERHEAD) {
			hf_dcount(HF_D_BAD_INNER);
			return TC_ACT_SHOT;
		}
		return hf_decap_inner(skb, udp + 1, data_end, tot - HF_ENCAP_OVERHEAD,
				      HF_ENCAP_OVERHEAD, 0);
	}
	if (eth->h_proto == bpf_htons(HF_ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		struct udphdr *udp = (void *)(ip6 + 1);
		if ((void *)(udp + 1) > data_end)
			return TC_ACT_OK;
		if (ip6->version != 6 || ip6->nexthdr != HF_IPPROTO_UDP)
			return TC_ACT_OK;
		if (udp->dest != bpf_htons(cfg->encap_port_host))
			return TC_ACT_OK;
		__u32 plen = bpf_ntohs(ip6->payload_len);
		if (plen < sizeof(*udp)) {
			hf_dcount(HF_D_BAD_INNER);
			return TC_ACT_SHOT;
		}
		return hf_decap_inner(skb, udp + 1, data_end, plen - sizeof(*udp),
				      HF_ENCAP6_OVERHEAD, 1);
	}
	return TC_ACT_OK;
}

/* Clamps the SYN at `l4` to `mss_max`, counts the outcome; returns the tc verdict (always OK). */
static __always_inline int hf_decap_clamp(struct __sk_buff *skb, __u32 l4, struct tcphdr *tcp,
					  __u16 mss_max)
{
	int r = hf_clamp_syn(skb, l4, tcp, mss_max);
	if (r == HF_MSS_OK)
		hf_dcount(HF_D_MSS_OK);
	else if (r == HF_MSS_CLAMPED)
		hf_dcount(HF_D_MSS_CLAMPED);
	return TC_ACT_OK;
}

SEC("tc")
int hf_mss_clamp(struct __sk_buff *skb)
{
	struct decap_config *cfg = hf_ip_config(skb);
	if (!cfg || cfg->mss_max_host == 0)
		return TC_ACT_OK;
	__u32 l3 = sizeof(struct ethhdr);
	struct tcphdr tcp;
	if (skb->protocol == bpf_htons(HF_ETH_P_IP)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, l3, &ip, sizeof(ip)))
			return TC_ACT_OK;
		if (ip.version != 4 || ip.protocol != HF_IPPROTO_TCP ||
		    (ip.frag_off & bpf_htons(HF_IP_OFFSET)))
			return TC_ACT_OK;
		__u32 l4 = l3 + ip.ihl * 4;
		if (bpf_skb_load_bytes(skb, l4, &tcp, sizeof(tcp)) || !tcp.syn)
			return TC_ACT_OK;
		__be32 vip = ip.saddr;
		if (!bpf_map_lookup_elem(&hf_local_vips, &vip))
			return TC_ACT_OK;
		return hf_decap_clamp(skb, l4, &tcp, cfg->mss_max_host);
	}
	/* IPv6: a SYN directly after the fixed header (no extension headers) from a local LB IP. */
	struct ipv6hdr ip6;
	if (bpf_skb_load_bytes(skb, l3, &ip6, sizeof(ip6)))
		return TC_ACT_OK;
	if (ip6.version != 6 || ip6.nexthdr != HF_IPPROTO_TCP)
		return TC_ACT_OK;
	__u32 l4 = l3 + sizeof(ip6);
	if (bpf_skb_load_bytes(skb, l4, &tcp, sizeof(tcp)) || !tcp.syn)
		return TC_ACT_OK;
	struct vip6_key vip6;
	__builtin_memcpy(vip6.addr, &ip6.saddr, 16);
	if (!bpf_map_lookup_elem(&hf_local_vips6, &vip6))
		return TC_ACT_OK;
	if (cfg->mss_max_host <= HF_MSS6_DELTA)
		return TC_ACT_OK;
	return hf_decap_clamp(skb, l4, &tcp, cfg->mss_max_host - HF_MSS6_DELTA);
}
