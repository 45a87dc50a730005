/* SPDX-License-Identifier: Apache-2.0 */
/* ICMP "fragmentation needed" (RFC 792, RFC 1191) from the LB: a DF packet that would not fit
 * the MTU once encapsulated is answered to its client with the MTU it can use (docs/mtu.md). */
#ifndef HF_ICMP_TOO_BIG_H
#define HF_ICMP_TOO_BIG_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include "consts.h"
#include "structs.h"
#include "encap.h"

/* Size of the ICMP message: 8 bytes of ICMP header, then the quoted IPv4 header + 8 bytes. */
#define HF_ICMP_TOO_BIG_LEN (8 + HF_ICMP_QUOTE)

/* Writes the ICMP header of a "fragmentation needed" message carrying `next_hop_mtu`, and its
 * checksum over the header and the quote that follows it. Returns nothing: the caller has
 * bounds-checked HF_ICMP_TOO_BIG_LEN bytes at `icmp`. */
static __always_inline void hf_write_icmp_frag_needed(__u8 *icmp, __u16 next_hop_mtu)
{
	icmp[0] = HF_ICMP_DEST_UNREACH;
	icmp[1] = HF_ICMP_FRAG_NEEDED;
	icmp[2] = 0; /* checksum, below */
	icmp[3] = 0;
	icmp[4] = 0; /* unused */
	icmp[5] = 0;
	icmp[6] = next_hop_mtu >> 8;
	icmp[7] = next_hop_mtu & 0xff;
	__u16 *w = (__u16 *)icmp;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < HF_ICMP_TOO_BIG_LEN / 2; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	w[1] = ~sum;
}

/* Turns an oversize frame (clean IPv4, no options, checked by the caller) into an ICMP
 * "fragmentation needed" reply to its source carrying next-hop MTU = mtu - 28, to be sent back
 * with XDP_TX: the frame is cut to IP header + 8 bytes and 28 bytes of outer IPv4 + ICMP are
 * prepended. Returns 0, or -1 when the frame could not be rewritten (then drop it). */
static __always_inline int hf_icmp_too_big(struct xdp_md *ctx, struct lb_config *cfg, __u32 mtu)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)eth + sizeof(*eth) + HF_ICMP_QUOTE > data_end)
		return -1;
	if (mtu < 68 + HF_ENCAP_OVERHEAD)
		return -1;
	struct iphdr *orig = (void *)(eth + 1);
	__be32 client = orig->saddr;
	unsigned char dst[ETH_ALEN], src[ETH_ALEN];
	__builtin_memcpy(dst, eth->h_source, ETH_ALEN);
	__builtin_memcpy(src, eth->h_dest, ETH_ALEN);

	int len = data_end - data;
	if (bpf_xdp_adjust_tail(ctx, (int)(sizeof(*eth) + HF_ICMP_QUOTE) - len))
		return -1;
	if (bpf_xdp_adjust_head(ctx, -(int)(sizeof(struct iphdr) + 8)))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u8 *icmp = (void *)(ip + 1);
	if ((void *)(icmp + HF_ICMP_TOO_BIG_LEN) > data_end)
		return -1;

	hf_write_eth_ip(eth, ip, dst, src, HF_IPPROTO_ICMP, 0,
			sizeof(struct iphdr) + HF_ICMP_TOO_BIG_LEN, 0, cfg->src_addr, client);
	hf_write_icmp_frag_needed(icmp, mtu - HF_ENCAP_OVERHEAD);
	return 0;
}

#endif
