/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile input (docs/contracts.md "Hostile input"): what a packet addressed to a frontend must
 * not be before the LB forwards it and makes a flow for it. Each rule names the enum hf_reason it
 * is dropped with; the table in docs/contracts.md gives the reason for each. */
#ifndef HF_HOSTILE_H
#define HF_HOSTILE_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include "consts.h"
#include "parsing.h"

/* True for a source no single host can have: 0.0.0.0/8 ("this network"), 127.0.0.0/8
 * (loopback), 224.0.0.0/4 (multicast) and 240.0.0.0/4 (reserved, incl. 255.255.255.255). */
static __always_inline int hf_martian_src(__be32 saddr)
{
	__u8 first = bpf_ntohl(saddr) >> 24;
	return first == 0 || first == 127 || first >= 224;
}

/* For a parsed frame addressed to a frontend whose IPv4 header is a clean 20 bytes
 * (hf_check_clean, or the ICMP path's own check): returns -1 when nothing hostile was found, else
 * the enum hf_reason to drop it with. `own` is this LB node's address (hf_config src_addr). TCP
 * flags are read only when p->proto is TCP and p->l4 holds a bounds-checked TCP header. */
static __always_inline int hf_check_hostile(const struct hf_pkt *p, __be32 own)
{
	/* Bit 0 of the first octet: the group (multicast/broadcast) bit of a MAC address. */
	if (p->eth->h_dest[0] & 1)
		return HF_R_DROP_L2_GROUP_DST;
	if (p->eth->h_source[0] & 1)
		return HF_R_DROP_L2_GROUP_SRC;
	const struct iphdr *ip = p->ip;
	if (!hf_ipv4_csum_ok(ip))
		return HF_R_DROP_BAD_CSUM;
	if (ip->ttl == 0)
		return HF_R_DROP_TTL_ZERO;
	if (hf_martian_src(ip->saddr) || ip->saddr == ip->daddr || ip->saddr == own)
		return HF_R_DROP_MARTIAN;
	if (p->proto == HF_IPPROTO_TCP) {
		const struct tcphdr *tcp = p->l4;
		if (tcp->syn && (tcp->fin || tcp->rst))
			return HF_R_DROP_TCP_FLAGS;
	}
	return -1;
}

#endif
