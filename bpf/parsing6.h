/* SPDX-License-Identifier: Apache-2.0 */
/* Bounds-checked IPv6 header parsing for the LB program (docs/contracts.md "IPv6"). Only a fixed
 * 40-byte header directly followed by TCP, UDP or ICMPv6 is parsed; a packet with any extension
 * header is reported as such and never walked. */
#ifndef HF_PARSING6_H
#define HF_PARSING6_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include "consts6.h"

/* A parsed IPv6 packet; l4 and the ports are set for TCP/UDP only. Pointers are into the packet. */
struct hf_pkt6 {
	struct ethhdr *eth;
	struct ipv6hdr *ip6;
	void *l4;      /* ip6 + 40 */
	__be16 sport;
	__be16 dport;
	__u8 proto;    /* ip6->nexthdr */
};

enum hf_parse6 {
	HF_PARSE6_L4 = 0,        /* TCP/UDP with readable ports: *p filled */
	HF_PARSE6_TRUNCATED = 1, /* IPv6 header or ports not inside the frame */
	HF_PARSE6_NOT_IPV6 = 2,  /* EtherType IPv6 but version is not 6 */
	HF_PARSE6_ICMP = 3,      /* ICMPv6 (p->eth, p->ip6 valid) */
	HF_PARSE6_EXT = 4,       /* an extension header follows the fixed header (p->ip6 valid) */
	HF_PARSE6_NOT_L4 = 5,    /* any other next header (p->ip6 valid) */
};

/* True for the next-header values that are IPv6 extension headers. */
static __always_inline int hf_ipv6_ext(__u8 nexthdr)
{
	switch (nexthdr) {
	case HF_IPV6_HOPOPTS:
	case HF_IPV6_ROUTING:
	case HF_IPV6_FRAGMENT:
	case HF_IPV6_ESP:
	case HF_IPV6_AH:
	case HF_IPV6_DSTOPTS:
	case HF_IPV6_MOBILITY:
	case HF_IPV6_HIP:
	case HF_IPV6_SHIM6:
	case HF_IPV6_EXP1:
	case HF_IPV6_EXP2:
		return 1;
	}
	return 0;
}

/* Parses an Ethernet frame whose EtherType is IPv6 (the caller checked it). Returns enum
 * hf_parse6. */
static __always_inline int hf_parse6(void *data, void *data_end, struct hf_pkt6 *p)
{
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > data_end)
		return HF_PARSE6_TRUNCATED;
	if (ip6->version != 6)
		return HF_PARSE6_NOT_IPV6;
	p->eth = eth;
	p->ip6 = ip6;
	p->proto = ip6->nexthdr;
	if (p->proto == HF_IPPROTO_ICMPV6)
		return HF_PARSE6_ICMP;
	if (p->proto != HF_IPPROTO_TCP && p->proto != HF_IPPROTO_UDP)
		return hf_ipv6_ext(p->proto) ? HF_PARSE6_EXT : HF_PARSE6_NOT_L4;
	__be16 *ports = (void *)(ip6 + 1);
	if ((void *)(ports + 2) > data_end)
		return HF_PARSE6_TRUNCATED;
	p->l4 = ports;
	p->sport = ports[0];
	p->dport = ports[1];
	return HF_PARSE6_L4;
}

/* For a TCP/UDP packet addressed to a frontend: returns -1 when its payload length agrees with
 * the frame and its L4 header (TCP data offset; UDP length = payload length, at least 8), else the
 * enum hf_reason to drop it with. Jumbograms (payload length 0) need a hop-by-hop header and so
 * never get here. */
static __always_inline int hf_check_clean6(struct hf_pkt6 *p, void *data_end)
{
	__u32 plen = bpf_ntohs(p->ip6->payload_len);
	if ((void *)(p->ip6 + 1) + plen > data_end)
		return HF_R_DROP_BAD_LENGTH;
	if (p->proto == HF_IPPROTO_TCP) {
		struct tcphdr *tcp = p->l4;
		if ((void *)(tcp + 1) > data_end)
			return HF_R_DROP_BAD_LENGTH;
		__u32 doff = tcp->doff * 4;
		if (doff < sizeof(*tcp) || plen < doff)
			return HF_R_DROP_BAD_LENGTH;
	} else {
		struct udphdr *udp = p->l4;
		if ((void *)(udp + 1) > data_end)
			return HF_R_DROP_BAD_LENGTH;
		if (plen < sizeof(*udp) || bpf_ntohs(udp->len) != plen)
			return HF_R_DROP_BAD_LENGTH;
	}
	return -1;
}

#endif
