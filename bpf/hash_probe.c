// SPDX-License-Identifier: Apache-2.0
/* Test-only probe: the flow hash exactly as hf_lb computes it (the same flow_hash.h), for parity
 * with policy-as (tests/bpf/flow_hash_parity_test.ts). Its own object, so the LB object that
 * every LB node loads carries no test program. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "flow_hash.h"

char LICENSE[] SEC("license") = "GPL";

/* Input (from the first byte of the frame, all network order): saddr, daddr, sport, dport,
 * proto, 3 pad, seed. Output: the same 20 bytes followed by the five-tuple hash and the
 * client-IP hash, network order, written in place (the input frame must be ≥ 28 bytes).
 * Returns XDP_PASS, or XDP_ABORTED when the frame is shorter. */
SEC("xdp")
int hf_hash_probe(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 *w = data;
	if ((void *)(w + 7) > data_end)
		return XDP_ABORTED;
	__u32 saddr = bpf_ntohl(w[0]);
	__u32 daddr = bpf_ntohl(w[1]);
	__u16 sport = bpf_ntohs(((__u16 *)data)[4]);
	__u16 dport = bpf_ntohs(((__u16 *)data)[5]);
	__u8 proto = ((__u8 *)data)[12];
	__u32 seed = bpf_ntohl(w[4]);
	w[5] = bpf_htonl(hf_flow_hash_5t(saddr, daddr, sport, dport, proto, seed));
	w[6] = bpf_htonl(hf_flow_hash_client(saddr, seed));
	return XDP_PASS;
}

/* The IPv6 flow hash (flow_hash.h), as hf_lb's IPv6 path computes it. Input from the first byte
 * of the frame: a struct flow_key6 (saddr[16], daddr[16], sport, dport, proto, 3 pad; network
 * order) then the seed (network order) at 40. Output: the five-tuple hash at 44 and the client-IP
 * hash at 48, network order. Returns XDP_PASS, or XDP_ABORTED when the frame is under 52 bytes. */
SEC("xdp")
int hf_hash6_probe(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 *w = data;
	if ((void *)(w + 13) > data_end)
		return XDP_ABORTED;
	__u16 sport = bpf_ntohs(((__u16 *)data)[16]);
	__u16 dport = bpf_ntohs(((__u16 *)data)[17]);
	__u8 proto = ((__u8 *)data)[36];
	__u32 seed = bpf_ntohl(w[10]);
	w[11] = bpf_htonl(hf_flow_hash6_5t(w, w + 4, sport, dport, proto, seed));
	w[12] = bpf_htonl(hf_flow_hash6_client(w, seed));
	return XDP_PASS;
}
