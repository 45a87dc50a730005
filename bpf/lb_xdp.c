// SPDX-License-Identifier: Apache-2.0
/* Holdfast LB program (XDP, on LB nodes). For a packet addressed to a frontend: flow map hit →
 * backend; miss → flow hash → Maglev slot → backend; the flow is shared (inserted, new-flow
 * event) once the client proves real, until then kept in hf_flows_syn (docs/contracts.md).
 * Then encapsulate in outer IPv4 + UDP (docs/contracts.md "Encapsulation") and XDP_TX it back
 * out of the interface it came in on (one-armed LB: MACs swapped, the router forwards to the
 * backend). Anything not for a frontend passes untouched. IPv6 frames take lb6.h's path. */
#include "lb.h"
#include "lb6.h"

char LICENSE[] SEC("license") = "GPL";

SEC("xdp")
int hf_lb(struct xdp_md *ctx)
{
	return hf_lb_dispatch(ctx);
}
