/* SPDX-License-Identifier: Apache-2.0 */
/* Encapsulation (docs/contracts.md "Encapsulation"): the outer Ethernet + IPv4 + UDP headers the
 * LB puts in front of a client's IPv4 packet before sending it back out with XDP_TX. */
#ifndef HF_ENCAP_H
#define HF_ENCAP_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "consts.h"
#include "structs.h"
#include "parsing.h"

/* Reads the frame's Ethernet addresses swapped — `dst` = its source, `src` = its destination, so
 * the rewritten frame goes back where it came from (XDP_TX) — then moves its head by `delta`
 * bytes (negative grows it). Returns 0, or -1 when the frame is shorter than an Ethernet header
 * or the head cannot move; on success the caller re-derives and bounds-checks its pointers. */
static __always_inline int hf_turn_around(struct xdp_md *ctx, int delta, unsigned char *dst,
					  unsigned char *src)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(dst, eth->h_source, ETH_ALEN);
	__builtin_memcpy(src, eth->h_dest, ETH_ALEN);
	return bpf_xdp_adjust_head(ctx, delta) ? -1 : 0;
}

/* Writes an IPv4 Ethernet header to `dst` from `src`; the caller has bounds-checked it. */
static __always_inline void hf_write_eth(struct ethhdr *eth, const unsigned char *dst,
					 const unsigned char *src)
{
	__builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, src, ETH_ALEN);
	eth->h_proto = bpf_htons(HF_ETH_P_IP);
}

/* Writes a reply-direction Ethernet header (to `dst` from `src`) and an option-less outer IPv4
 * header with its checksum, as the LB sends them: TTL HF_OUTER_TTL, ID 0, source = this node.
 * Shared by encapsulation and the ICMP too-big reply (icmp_too_big.h). Returns nothing: the
 * caller has bounds-checked both headers. */
static __always_inline void hf_write_eth_ip(struct ethhdr *eth, struct iphdr *ip,
					    const unsigned char *dst, const unsigned char *src,
					    __u8 proto, __u8 tos, __u16 tot_len, __u16 frag_off,
					    __be32 saddr, __be32 daddr)
{
	hf_write_eth(eth, dst, src);

	ip->version = 4;
	ip->ihl = 5;
	ip->tos = tos;
	ip->tot_len = bpf_htons(tot_len);
	ip->id = 0;
	ip->frag_off = bpf_htons(frag_off);
	ip->ttl = HF_OUTER_TTL;
	ip->protocol = proto;
	ip->check = 0;
	ip->saddr = saddr;
	ip->daddr = daddr;
	ip->check = hf_ipv4_csum(ip);
}

/* The outer UDP source port of a flow: HF_SPORT_BASE | (hash & HF_SPORT_MASK), host order, so
 * the router's ECMP and the backend's RSS spread flows (49152..65535). */
static __always_inline __u16 hf_encap_sport(__u32 hash)
{
	return HF_SPORT_BASE | (hash & HF_SPORT_MASK);
}

/* Prepends Ethernet (MACs swapped, for XDP_TX) + IPv4 + UDP in front of the IPv4 packet of
 * `inner_len` bytes, to `backend` from cfg->src_addr. Returns 0 on success, -1 when the frame is
 * too short or the headroom could not be grown (drop the frame: it may be half rewritten). */
static __always_inline int hf_encap(struct xdp_md *ctx, struct lb_config *cfg, __be32 backend,
				    __u32 hash, __u16 inner_len, __u8 tos)
{
	unsigned char dst[ETH_ALEN], src[ETH_ALEN];
	if (hf_turn_around(ctx, -HF_ENCAP_OVERHEAD, dst, src))
		return -1;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return -1;

	hf_write_eth_ip(eth, ip, dst, src, HF_IPPROTO_UDP, tos, inner_len + HF_ENCAP_OVERHEAD,
			HF_IP_DF, cfg->src_addr, backend);

	udp->source = bpf_htons(hf_encap_sport(hash));
	udp->dest = bpf_htons(cfg->encap_port_host);
	udp->len = bpf_htons(inner_len + sizeof(struct udphdr));
	udp->check = 0;
	return 0;
}

#endif
