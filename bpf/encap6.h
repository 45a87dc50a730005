/* SPDX-License-Identifier: Apache-2.0 */
/* What the LB sends for an IPv6 packet (docs/contracts.md "IPv6"): encapsulation in outer IPv6 +
 * UDP to an IPv6 backend (to an IPv4 backend it is encap.h's hf_encap, unchanged), and the ICMPv6
 * Packet Too Big reply to a client whose packet would not fit once encapsulated. */
#ifndef HF_ENCAP6_H
#define HF_ENCAP6_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "consts6.h"
#include "structs6.h"
#include "encap.h"

/* Writes a reply-direction Ethernet header (to `dst` from `src`, EtherType IPv6) and an IPv6
 * header: traffic class `tc`, flow label `label` (20 bits), hop limit HF_OUTER_TTL. The caller
 * has bounds-checked both headers. */
static __always_inline void hf_write_eth_ip6(struct ethhdr *eth, struct ipv6hdr *ip6,
					     const unsigned char *dst, const unsigned char *src,
					     __u8 nexthdr, __u8 tc, __u32 label, __u16 payload_len,
					     const void *saddr, const void *daddr)
{
	hf_write_eth(eth, dst, src);
	eth->h_proto = bpf_htons(HF_ETH_P_IPV6);
	ip6->version = 6;
	ip6->priority = tc >> 4;
	ip6->flow_lbl[0] = ((tc & 0x0f) << 4) | ((label >> 16) & 0x0f);
	ip6->flow_lbl[1] = (label >> 8) & 0xff;
	ip6->flow_lbl[2] = label & 0xff;
	ip6->payload_len = bpf_htons(payload_len);
	ip6->nexthdr = nexthdr;
	ip6->hop_limit = HF_OUTER_TTL;
	__builtin_memcpy(&ip6->saddr, saddr, 16);
	__builtin_memcpy(&ip6->daddr, daddr, 16);
}

/* The traffic class of an IPv6 header (8 bits across the version/flow-label boundary). */
static __always_inline __u8 hf_ip6_tclass(const struct ipv6hdr *ip6)
{
	return (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
}

/* Prepends Ethernet (MACs swapped, for XDP_TX) + IPv6 + UDP in front of the packet of
 * `inner_len` bytes (IPv6 or IPv4), to `backend` from `src` (16 bytes each): traffic class `tc`,
 * flow label = the flow hash's low 20 bits (RFC 6438: ECMP entropy), UDP source port as for IPv4
 * and checksum 0 (RFC 6935/6936 tunnel exception: hf_decap strips the outer headers before any
 * UDP stack sees them). Returns 0, or -1 when the frame could not be rewritten (drop it). */
static __always_inline int hf_encap6(struct xdp_md *ctx, const struct lb_config *cfg,
				     const void *src, const void *backend, __u32 hash,
				     __u16 inner_len, __u8 tc)
{
	unsigned char dst[ETH_ALEN], smac[ETH_ALEN];
	if (hf_turn_around(ctx, -HF_ENCAP6_OVERHEAD, dst, smac))
		return -1;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip6 + 1);
	if ((void *)(udp + 1) > data_end)
		return -1;
	__u16 udp_len = inner_len + sizeof(struct udphdr);
	hf_write_eth_ip6(eth, ip6, dst, smac, HF_IPPROTO_UDP, tc, hash & 0xfffff, udp_len, src,
			 backend);
	udp->source = bpf_htons(hf_encap_sport(hash));
	udp->dest = bpf_htons(cfg->encap_port_host);
	udp->len = bpf_htons(udp_len);
	udp->check = 0;
	return 0;
}

/* Size of the Packet Too Big message: ICMPv6 header (8) + the quoted IPv6 header + 8 bytes. */
#define HF_ICMP6_TOO_BIG_LEN (8 + HF_ICMP6_QUOTE)

/* Turns an oversize IPv6 frame (clean, checked by the caller) into an ICMPv6 Packet Too Big
 * (RFC 4443 3.2) to its source carrying `mtu`, from the address it was sent to (the VIP: the one
 * address of this conversation the client knows; Katran does the same), to be sent back with
 * XDP_TX: the frame is cut to IPv6 header + 8 bytes and 48 bytes of IPv6 + ICMPv6 header are
 * prepended. Returns 0, or -1 when the frame could not be rewritten (then drop it). */
static __always_inline int hf_icmp6_too_big(struct xdp_md *ctx, __u32 mtu)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)eth + sizeof(*eth) + HF_ICMP6_QUOTE > data_end)
		return -1;
	struct ipv6hdr *orig = (void *)(eth + 1);
	struct in6_addr client, vip;
	__builtin_memcpy(&client, &orig->saddr, 16);
	__builtin_memcpy(&vip, &orig->daddr, 16);
	unsigned char dst[ETH_ALEN], src[ETH_ALEN];
	__builtin_memcpy(dst, eth->h_source, ETH_ALEN);
	__builtin_memcpy(src, eth->h_dest, ETH_ALEN);

	int len = data_end - data;
	if (bpf_xdp_adjust_tail(ctx, (int)(sizeof(*eth) + HF_ICMP6_QUOTE) - len))
		return -1;
	if (bpf_xdp_adjust_head(ctx, -(int)(sizeof(struct ipv6hdr) + 8)))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	__u8 *icmp = (void *)(ip6 + 1);
	if ((void *)(icmp + HF_ICMP6_TOO_BIG_LEN) > data_end)
		return -1;

	hf_write_eth_ip6(eth, ip6, dst, src, HF_IPPROTO_ICMPV6, 0, 0, HF_ICMP6_TOO_BIG_LEN, &vip,
			 &client);
	icmp[0] = HF_ICMP6_PKT_TOO_BIG;
	icmp[1] = 0;
	icmp[2] = 0; /* checksum, below */
	icmp[3] = 0;
	icmp[4] = mtu >> 24;
	icmp[5] = (mtu >> 16) & 0xff;
	icmp[6] = (mtu >> 8) & 0xff;
	icmp[7] = mtu & 0xff;
	/* Checksum over the pseudo-header (source, destination, upper-layer length, next header:
	 * RFC 8200 8.1) and the message; all words summed in network order. */
	__u32 sum = bpf_htons(HF_ICMP6_TOO_BIG_LEN) + bpf_htons(HF_IPPROTO_ICMPV6);
	const __u16 *a = (const __u16 *)&ip6->saddr;
#pragma unroll
	for (int i = 0; i < 16; i++)
		sum += a[i];
	const __u16 *w = (const __u16 *)icmp;
#pragma unroll
	for (int i = 0; i < HF_ICMP6_TOO_BIG_LEN / 2; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	((__u16 *)icmp)[1] = ~sum;
	return 0;
}

#endif
