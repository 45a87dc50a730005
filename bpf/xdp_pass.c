// SPDX-License-Identifier: Apache-2.0
/* Trivial native XDP program. On a veth, XDP_TX from one end is delivered only if the peer end
 * runs a native XDP program (docs/FINDINGS: XDP on veth); the router-side peers of LB nodes get
 * this one. Also the no-op floor of bench/datapath.ts. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("xdp")
int hf_xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
