/* SPDX-License-Identifier: Apache-2.0 */
/* ICMP errors about a frontend's flow (docs/contracts.md "ICMP errors to the owning backend"):
 * a router on the DSR return path that cannot forward a backend's reply (VIP → client) sends its
 * error to the VIP, quoting the reply's IPv4 header and first 8 bytes. The quote, read backwards,
 * names the forward flow (client → VIP) and so the backend that sent the reply. */
#ifndef HF_ICMP_QUOTE_H
#define HF_ICMP_QUOTE_H

#include <linux/types.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include "consts.h"
#include "structs.h"
#include "parsing.h"

enum hf_quote {
	HF_QUOTE_FLOW = 0,      /* an error quoting TCP/UDP sent from the ICMP's destination: *fk set */
	HF_QUOTE_NOT_ERROR = 1, /* not an error the LB routes (echo, ...), or not about this VIP */
	HF_QUOTE_BAD = 2,       /* an error whose quote is cut short or malformed */
	HF_QUOTE_TRUNCATED = 3, /* the ICMP header itself is not inside the frame */
};

/* Size of an ICMP header (type, code, checksum, 4 bytes of rest). */
#define HF_ICMP_HDR 8

/* Reads the ICMP message of a parsed ICMP frame (p->ip valid). For a destination-unreachable or
 * time-exceeded error whose outer header is 20 bytes and unfragmented, whose quote (20-byte IPv4
 * header + ports, inside both the frame and the outer total length) is an unfragmented TCP/UDP
 * packet sent from the address the error is sent to, fills *fk with the forward flow the quote
 * answers: client (the quote's destination) → VIP (its source), ports swapped, pad zeroed.
 * Returns enum hf_quote. */
static __always_inline int hf_icmp_quote(const struct hf_pkt *p, void *data_end,
					 struct flow_key *fk)
{
	const struct iphdr *ip = p->ip;
	if (ip->ihl != 5 || (ip->frag_off & bpf_htons(HF_IP_MF | HF_IP_OFFSET)))
		return HF_QUOTE_NOT_ERROR;
	const __u8 *icmp = (const void *)(ip + 1);
	if ((const void *)(icmp + HF_ICMP_HDR) > data_end)
		return HF_QUOTE_TRUNCATED;
	if (icmp[0] != HF_ICMP_DEST_UNREACH && icmp[0] != HF_ICMP_TIME_EXCEEDED)
		return HF_QUOTE_NOT_ERROR;
	const struct iphdr *in = (const void *)(icmp + HF_ICMP_HDR);
	const __be16 *ports = (const void *)(in + 1);
	if ((const void *)(ports + 2) > data_end)
		return HF_QUOTE_BAD;
	__u32 tot_len = bpf_ntohs(ip->tot_len);
	if (tot_len < sizeof(*ip) + HF_ICMP_HDR + HF_ICMP_QUOTE || (void *)ip + tot_len > data_end)
		return HF_QUOTE_BAD;
	if (in->version != 4 || in->ihl != 5 || (in->frag_off & bpf_htons(HF_IP_OFFSET)))
		return HF_QUOTE_BAD;
	if (in->protocol != HF_IPPROTO_TCP && in->protocol != HF_IPPROTO_UDP)
		return HF_QUOTE_NOT_ERROR;
	if (in->saddr != ip->daddr)
		return HF_QUOTE_NOT_ERROR;
	fk->saddr = in->daddr;
	fk->daddr = in->saddr;
	fk->sport = ports[1];
	fk->dport = ports[0];
	fk->proto = in->protocol;
	fk->pad[0] = 0;
	fk->pad[1] = 0;
	fk->pad[2] = 0;
	return HF_QUOTE_FLOW;
}

#endif
