// SPDX-License-Identifier: Apache-2.0
/* Holdfast LB program (XDP, on LB nodes). For a packet addressed to a frontend: flow map hit →
 * backend; miss → flow hash → Maglev slot → backend, insert the flow, emit a new-flow event.
 * Then encapsulate in outer IPv4 + UDP (docs/contracts.md "Encapsulation") and XDP_TX it back
 * out of the interface it came in on (one-armed LB: MACs swapped, the router forwards to the
 * backend). Anything not for a frontend passes untouched. */
#include "lb.h"

char LICENSE[] SEC("license") = "GPL";

SEC("xdp")
int hf_lb(struct xdp_md *ctx)
{
	return hf_lb_main(ctx);
}

/* Test-only probe: the flow hash exactly as hf_lb computes it, for parity with policy-as.
 * Input (from the first byte of the frame, all network order): saddr, daddr, sport, dport,
 * proto, 3 pad, seed. Output: the same 20 bytes followed by the five-tuple hash and the
 * client-IP hash, network order, written in place (the input frame must be ≥ 28 bytes). */
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
