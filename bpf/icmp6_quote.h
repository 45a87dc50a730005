/* SPDX-License-Identifier: Apache-2.0 */
/* ICMPv6 errors about an IPv6 frontend's flow (docs/contracts.md "IPv6"): the v6 form of
 * icmp_quote.h. A router on a backend's DSR return path sends destination unreachable (1), packet
 * too big (2) or time exceeded (3) to the VIP, quoting the reply's IPv6 header and what follows. */
#ifndef HF_ICMP6_QUOTE_H
#define HF_ICMP6_QUOTE_H

#include <linux/types.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include "consts6.h"
#include "structs6.h"
#include "parsing6.h"
#include "hostile6.h"
#include "icmp_quote.h"

/* Reads the ICMPv6 message of a parsed ICMPv6 frame. For an error of type 1, 2 or 3 whose quote
 * (a 40-byte IPv6 header directly followed by TCP/UDP ports, inside both the frame and the outer
 * payload length) was sent from the address the error is sent to, fills *fk with the forward
 * flow: client (the quote's destination) → VIP (its source), ports swapped, pad zeroed. Returns
 * enum hf_quote (icmp_quote.h). */
static __always_inline int hf_icmp6_quote(const struct hf_pkt6 *p, void *data_end,
					  struct flow_key6 *fk)
{
	const struct ipv6hdr *ip6 = p->ip6;
	const __u8 *icmp = (const void *)(ip6 + 1);
	if ((const void *)(icmp + HF_ICMP_HDR) > data_end)
		return HF_QUOTE_TRUNCATED;
	if (icmp[0] != HF_ICMP6_DEST_UNREACH && icmp[0] != HF_ICMP6_PKT_TOO_BIG &&
	    icmp[0] != HF_ICMP6_TIME_EXCEEDED)
		return HF_QUOTE_NOT_ERROR;
	const struct ipv6hdr *in = (const void *)(icmp + HF_ICMP_HDR);
	const __be16 *ports = (const void *)(in + 1);
	if ((const void *)(ports + 2) > data_end)
		return HF_QUOTE_BAD;
	__u32 plen = bpf_ntohs(ip6->payload_len);
	if (plen < HF_ICMP_HDR + HF_ICMP6_QUOTE || (const void *)(ip6 + 1) + plen > data_end)
		return HF_QUOTE_BAD;
	if (in->version != 6)
		return HF_QUOTE_BAD;
	if (in->nexthdr != HF_IPPROTO_TCP && in->nexthdr != HF_IPPROTO_UDP)
		return HF_QUOTE_NOT_ERROR;
	if (!hf_addr6_eq(in->saddr.in6_u.u6_addr32, ip6->daddr.in6_u.u6_addr32))
		return HF_QUOTE_NOT_ERROR;
	__builtin_memcpy(fk->saddr, &in->daddr, 16);
	__builtin_memcpy(fk->daddr, &in->saddr, 16);
	fk->sport = ports[1];
	fk->dport = ports[0];
	fk->proto = in->nexthdr;
	fk->pad[0] = 0;
	fk->pad[1] = 0;
	fk->pad[2] = 0;
	return HF_QUOTE_FLOW;
}

#endif
