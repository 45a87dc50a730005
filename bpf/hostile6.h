/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile IPv6 input (docs/contracts.md "IPv6", hostile input): the rules of hostile.h for an
 * IPv6 packet addressed to a frontend, with IPv6's martians and no header checksum. */
#ifndef HF_HOSTILE6_H
#define HF_HOSTILE6_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include "consts6.h"
#include "parsing6.h"

/* True when the 16-byte addresses at `a` and `b` (4-byte aligned) are equal. */
static __always_inline int hf_addr6_eq(const __u32 *a, const __u32 *b)
{
	return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3])) == 0;
}

/* True when the 16-byte address at `a` (4-byte aligned) is all zero. */
static __always_inline int hf_addr6_zero(const __u32 *a)
{
	return (a[0] | a[1] | a[2] | a[3]) == 0;
}

/* True for a source no single host can have: :: (unspecified), ::1 (loopback), ff00::/8
 * (multicast), ::ffff:0:0/96 (IPv4-mapped: never on the wire, RFC 4291 2.5.5.2). */
static __always_inline int hf_martian6_src(const struct in6_addr *s)
{
	const __u32 *w = s->in6_u.u6_addr32;
	if (s->in6_u.u6_addr8[0] == 0xff)
		return 1;
	if (w[0] != 0 || w[1] != 0)
		return 0;
	if (w[2] == 0)
		return w[3] == 0 || w[3] == bpf_htonl(1);
	return w[2] == bpf_htonl(0xffff);
}

/* For a parsed IPv6 frame addressed to a frontend (TCP, UDP or an ICMPv6 error): returns -1 when
 * its Ethernet and IPv6 headers show nothing hostile, else the enum hf_reason to drop it with.
 * `own` is this LB node's IPv6 address (hf_config6; all zero when unset). */
static __always_inline int hf_check_hostile6(const struct hf_pkt6 *p, const __u32 *own)
{
	if (p->eth->h_dest[0] & 1)
		return HF_R_DROP_L2_GROUP_DST;
	if (p->eth->h_source[0] & 1)
		return HF_R_DROP_L2_GROUP_SRC;
	const struct ipv6hdr *ip6 = p->ip6;
	if (ip6->hop_limit == 0)
		return HF_R_DROP_TTL_ZERO;
	const __u32 *s = ip6->saddr.in6_u.u6_addr32;
	if (hf_martian6_src(&ip6->saddr) || hf_addr6_eq(s, ip6->daddr.in6_u.u6_addr32) ||
	    hf_addr6_eq(s, own))
		return HF_R_DROP_MARTIAN;
	return -1;
}

/* The L4 rules for a TCP/UDP packet whose header hf_check_clean6 bounds-checked at `l4`: SYN
 * with FIN or RST, and a zero UDP checksum (RFC 8200 8.1: every IPv6 receiver discards it).
 * Returns -1 or the enum hf_reason to drop it with. */
static __always_inline int hf_check_hostile6_l4(void *l4, __u8 proto, void *data_end)
{
	if (proto == HF_IPPROTO_TCP) {
		const struct tcphdr *tcp = l4;
		if ((void *)(tcp + 1) > data_end)
			return HF_R_DROP_BAD_LENGTH;
		if (tcp->syn && (tcp->fin || tcp->rst))
			return HF_R_DROP_TCP_FLAGS;
		return -1;
	}
	const struct udphdr *udp = l4;
	if ((void *)(udp + 1) > data_end)
		return HF_R_DROP_BAD_LENGTH;
	if (udp->check == 0)
		return HF_R_DROP_BAD_CSUM;
	return -1;
}

#endif
