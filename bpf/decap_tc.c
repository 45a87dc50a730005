// SPDX-License-Identifier: Apache-2.0
/* Backend side (tc, in the pod's namespace):
 *  - hf_decap (ingress): strips the 28 outer bytes (IPv4 + UDP) of packets sent to the encap port
 *    whose inner destination is a local LB IP (hf_local_vips), so the inner packet — client
 *    source address intact — is delivered to the server bound to the LB IP on lo.
 *  - hf_mss_clamp (egress): lowers the MSS option of SYNs leaving from a local LB IP to
 *    mss_max, so clients never send segments that no longer fit once encapsulated by the LB
 *    (docs/mtu.md). The SYN/ACK goes to the client directly (DSR), so this is the only place on
 *    the path that sees it. */
#define HF_DECAP_MAPS
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "consts.h"
#include "structs.h"
#include "maps.h"
#include "parsing.h"

char LICENSE[] SEC("license") = "GPL";

#define HF_DECAP_NEED (sizeof(struct ethhdr) + 2 * sizeof(struct iphdr) + sizeof(struct udphdr))

static __always_inline void hf_dcount(__u32 reason)
{
	__u64 *v = bpf_map_lookup_elem(&hf_decap_stat, &reason);
	if (v)
		*v += 1;
}

/* The node's decap settings when skb is an IPv4 frame and the agent has written them; NULL
 * otherwise (the caller passes the frame on untouched). */
static __always_inline struct decap_config *hf_ipv4_config(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(HF_ETH_P_IP))
		return NULL;
	__u32 zero = 0;
	return bpf_map_lookup_elem(&hf_decap_cfg, &zero);
}

SEC("tc")
int hf_decap(struct __sk_buff *skb)
{
	struct decap_config *cfg = hf_ipv4_config(skb);
	if (!cfg || cfg->encap_port_host == 0)
		return TC_ACT_OK;
	if (skb->data_end - skb->data < HF_DECAP_NEED && skb->len >= HF_DECAP_NEED)
		bpf_skb_pull_data(skb, HF_DECAP_NEED);

	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	struct iphdr *inner = (void *)(udp + 1);
	if ((void *)(inner + 1) > data_end)
		return TC_ACT_OK;
	if (eth->h_proto != bpf_htons(HF_ETH_P_IP) || ip->version != 4 || ip->ihl != 5 ||
	    ip->protocol != HF_IPPROTO_UDP || (ip->frag_off & bpf_htons(HF_IP_MF | HF_IP_OFFSET)))
		return TC_ACT_OK;
	if (udp->dest != bpf_htons(cfg->encap_port_host))
		return TC_ACT_OK;
	if (inner->version != 4 || inner->ihl < 5 ||
	    bpf_ntohs(inner->tot_len) + HF_ENCAP_OVERHEAD != bpf_ntohs(ip->tot_len)) {
		hf_dcount(HF_D_BAD_INNER);
		return TC_ACT_SHOT;
	}
	__be32 vip = inner->daddr;
	if (!bpf_map_lookup_elem(&hf_local_vips, &vip)) {
		hf_dcount(HF_D_NOT_LOCAL);
		return TC_ACT_OK;
	}
	if (bpf_skb_adjust_room(skb, -HF_ENCAP_OVERHEAD, BPF_ADJ_ROOM_MAC, 0)) {
		hf_dcount(HF_D_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_dcount(HF_D_DECAP);
	return TC_ACT_OK;
}

#define HF_TCPOPT_EOL 0
#define HF_TCPOPT_NOP 1
#define HF_TCPOPT_MSS 2
#define HF_TCP_OPT_MAX 40

/* State of the TCP option walk, one option per bpf_loop step (a plain loop makes the verifier
 * track every offset separately and exceed its budget). */
struct hf_opt_walk {
	struct __sk_buff *skb;
	__u32 base;    /* offset of the first option byte */
	__u32 opt_len; /* option bytes */
	__u32 i;       /* offset of the current option within the options */
	__u32 mss_off; /* out: packet offset of the MSS value, 0 = none */
	__be16 mss;    /* out: the MSS value as found */
};

/* One step: reads the option at w->i; returns 1 to stop (end, malformed, or MSS found). */
static long hf_opt_step(__u64 index, void *ctx)
{
	struct hf_opt_walk *w = ctx;
	if (w->i >= w->opt_len)
		return 1;
	__u8 kl[2] = {};
	if (bpf_skb_load_bytes(w->skb, w->base + w->i, kl, 2))
		return 1;
	if (kl[0] == HF_TCPOPT_EOL)
		return 1;
	if (kl[0] == HF_TCPOPT_NOP) {
		w->i += 1;
		return 0;
	}
	if (kl[1] < 2)
		return 1;
	if (kl[0] == HF_TCPOPT_MSS && kl[1] == 4 && w->i + 4 <= w->opt_len) {
		if (bpf_skb_load_bytes(w->skb, w->base + w->i + 2, &w->mss, sizeof(w->mss)))
			return 1;
		w->mss_off = w->base + w->i + 2;
		return 1;
	}
	w->i += kl[1];
	return 0;
}

SEC("tc")
int hf_mss_clamp(struct __sk_buff *skb)
{
	struct decap_config *cfg = hf_ipv4_config(skb);
	if (!cfg || cfg->mss_max_host == 0)
		return TC_ACT_OK;
	__u32 l3 = sizeof(struct ethhdr);
	struct iphdr ip;
	if (bpf_skb_load_bytes(skb, l3, &ip, sizeof(ip)))
		return TC_ACT_OK;
	if (ip.version != 4 || ip.protocol != HF_IPPROTO_TCP ||
	    (ip.frag_off & bpf_htons(HF_IP_OFFSET)))
		return TC_ACT_OK;
	__u32 l4 = l3 + ip.ihl * 4;
	struct tcphdr tcp;
	if (bpf_skb_load_bytes(skb, l4, &tcp, sizeof(tcp)))
		return TC_ACT_OK;
	if (!tcp.syn)
		return TC_ACT_OK;
	__be32 vip = ip.saddr;
	if (!bpf_map_lookup_elem(&hf_local_vips, &vip))
		return TC_ACT_OK;
	__u32 opt_len = tcp.doff * 4;
	if (opt_len <= sizeof(tcp))
		return TC_ACT_OK;
	opt_len -= sizeof(tcp);
	if (opt_len > HF_TCP_OPT_MAX)
		return TC_ACT_OK;
	struct hf_opt_walk w = {.skb = skb, .base = l4 + sizeof(tcp), .opt_len = opt_len};
	bpf_loop(HF_TCP_OPT_MAX, hf_opt_step, &w, 0);
	if (!w.mss_off)
		return TC_ACT_OK;
	if (bpf_ntohs(w.mss) <= cfg->mss_max_host) {
		hf_dcount(HF_D_MSS_OK);
		return TC_ACT_OK;
	}
	__be16 new = bpf_htons(cfg->mss_max_host);
	if (bpf_skb_store_bytes(skb, w.mss_off, &new, sizeof(new), 0))
		return TC_ACT_OK;
	bpf_l4_csum_replace(skb, l4 + offsetof(struct tcphdr, check), w.mss, new, sizeof(new));
	hf_dcount(HF_D_MSS_CLAMPED);
	return TC_ACT_OK;
}
