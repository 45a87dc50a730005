/* SPDX-License-Identifier: Apache-2.0 */
/* MSS clamping of a TCP SYN in a tc program (docs/mtu.md): shared by the backend side
 * (decap_tc.c hf_mss_clamp) and the node side (node_tc.c, the pod's SYN/ACK). */
#ifndef HF_MSS_CLAMP_H
#define HF_MSS_CLAMP_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

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

/* hf_clamp_syn outcomes. */
enum hf_mss_result {
	HF_MSS_NONE = 0,    /* no MSS option, or not rewritable */
	HF_MSS_OK = 1,      /* MSS already <= mss_max */
	HF_MSS_CLAMPED = 2, /* MSS lowered to mss_max, TCP checksum fixed */
};

/* Clamps the MSS option of the SYN whose TCP header `tcp` is at offset `l4` to `mss_max`;
 * returns enum hf_mss_result. */
static __always_inline int hf_clamp_syn(struct __sk_buff *skb, __u32 l4, struct tcphdr *tcp,
					__u16 mss_max)
{
	__u32 opt_len = tcp->doff * 4;
	if (opt_len <= sizeof(*tcp))
		return HF_MSS_NONE;
	opt_len -= sizeof(*tcp);
	if (opt_len > HF_TCP_OPT_MAX)
		return HF_MSS_NONE;
	struct hf_opt_walk w = {.skb = skb, .base = l4 + sizeof(*tcp), .opt_len = opt_len};
	bpf_loop(HF_TCP_OPT_MAX, hf_opt_step, &w, 0);
	if (!w.mss_off)
		return HF_MSS_NONE;
	if (bpf_ntohs(w.mss) <= mss_max)
		return HF_MSS_OK;
	__be16 new = bpf_htons(mss_max);
	if (bpf_skb_store_bytes(skb, w.mss_off, &new, sizeof(new), 0))
		return HF_MSS_NONE;
	bpf_l4_csum_replace(skb, l4 + offsetof(struct tcphdr, check), w.mss, new, sizeof(new));
	return HF_MSS_CLAMPED;
}

#endif
