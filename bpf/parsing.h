/* SPDX-License-Identifier: Apache-2.0 */
/* Bounds-checked header parsing shared by the XDP and tc programs. Every helper checks each
 * header against data_end before reading it and says what it returns. */
#ifndef HF_PARSING_H
#define HF_PARSING_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include "consts.h"

/* A parsed IPv4 packet with readable L4 ports. Pointers are into the packet. */
struct hf_pkt {
	struct ethhdr *eth;
	struct iphdr *ip;
	void *l4;       /* ip + ihl*4 */
	__u32 ihl_bytes;
	__be16 sport;
	__be16 dport;
	__u8 proto;
};

enum hf_parse {
	HF_PARSE_L4 = 0,        /* IPv4 TCP/UDP with readable ports: *p filled */
	HF_PARSE_NOT_IPV4 = 1,  /* not an IPv4 frame */
	HF_PARSE_TRUNCATED = 2, /* Ethernet, IPv4 or ports not fully inside the frame */
	HF_PARSE_NOT_L4 = 3,    /* IPv4 but not TCP/UDP (p->ip valid) */
	HF_PARSE_ICMP = 4,      /* IPv4 ICMP (p->ip valid) */
};

/* Parses Ethernet + IPv4 and reads the L4 ports at ip + ihl*4 (options tolerated here, judged by
 * hf_check_clean). Returns enum hf_parse. */
static __always_inline int hf_parse(void *data, void *data_end, struct hf_pkt *p)
{
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return HF_PARSE_TRUNCATED;
	if (eth->h_proto != bpf_htons(HF_ETH_P_IP))
		return HF_PARSE_NOT_IPV4;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return HF_PARSE_TRUNCATED;
	if (ip->version != 4)
		return HF_PARSE_NOT_IPV4;
	p->eth = eth;
	p->ip = ip;
	p->proto = ip->protocol;
	if (ip->protocol == HF_IPPROTO_ICMP)
		return HF_PARSE_ICMP;
	if (ip->protocol != HF_IPPROTO_TCP && ip->protocol != HF_IPPROTO_UDP)
		return HF_PARSE_NOT_L4;
	__u32 ihl = ip->ihl * 4;
	if (ihl < sizeof(*ip))
		return HF_PARSE_TRUNCATED;
	p->ihl_bytes = ihl;
	__be16 *ports = (void *)ip + ihl;
	if ((void *)(ports + 2) > data_end)
		return HF_PARSE_TRUNCATED;
	p->l4 = ports;
	p->sport = ports[0];
	p->dport = ports[1];
	return HF_PARSE_L4;
}

/* For a packet addressed to a frontend: returns -1 when it is a clean, unfragmented IPv4
 * TCP/UDP packet without options whose lengths agree with the frame, else the enum hf_reason
 * to drop it with. */
static __always_inline int hf_check_clean(struct hf_pkt *p, void *data_end)
{
	struct iphdr *ip = p->ip;
	if (p->ihl_bytes != sizeof(struct iphdr))
		return HF_R_DROP_IP_OPTIONS;
	if (ip->frag_off & bpf_htons(HF_IP_MF | HF_IP_OFFSET))
		return HF_R_DROP_FRAGMENT;
	__u32 tot_len = bpf_ntohs(ip->tot_len);
	if ((void *)ip + tot_len > data_end)
		return HF_R_DROP_BAD_LENGTH;
	if (p->proto == HF_IPPROTO_TCP) {
		struct tcphdr *tcp = p->l4;
		if ((void *)(tcp + 1) > data_end)
			return HF_R_DROP_BAD_LENGTH;
		__u32 doff = tcp->doff * 4;
		if (doff < sizeof(*tcp) || tot_len < sizeof(struct iphdr) + doff)
			return HF_R_DROP_BAD_LENGTH;
	} else {
		struct udphdr *udp = p->l4;
		if ((void *)(udp + 1) > data_end)
			return HF_R_DROP_BAD_LENGTH;
		/* The header must lie inside the IP packet, not in the frame's trailer. */
		if (tot_len < sizeof(struct iphdr) + sizeof(*udp) ||
		    bpf_ntohs(udp->len) != tot_len - sizeof(struct iphdr))
			return HF_R_DROP_BAD_LENGTH;
	}
	return -1;
}

/* True when the checksum of a 20-byte IPv4 header (check field included) verifies: the one's
 * complement sum of its ten words is 0xffff. The caller has bounds-checked the header. */
static __always_inline int hf_ipv4_csum_ok(const struct iphdr *ip)
{
	const __u16 *w = (const __u16 *)ip;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

/* IPv4 header checksum of a 20-byte header whose check field is 0. */
static __always_inline __u16 hf_ipv4_csum(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

#endif
