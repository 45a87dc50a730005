/* SPDX-License-Identifier: Apache-2.0 */
/* When the LB program shares a flow (docs/contracts.md "When a flow is shared"): the flows held
 * unshared in hf_flows_syn, the packets that prove a client real, and sharing within the per-CPU
 * event budget. Used by hf_lb_main in lb.h. */
#ifndef HF_FLOW_SHARE_H
#define HF_FLOW_SHARE_H

#define HF_LB_MAPS
#include <linux/bpf.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include "consts.h"
#include "structs.h"
#include "maps.h"
#include "parsing.h"

/* The entry of `fk` in hf_flows_syn while its backend is still a backend: held entries keep the
 * backend's ID in flags, and one whose ID no longer maps to that address (the backend left the
 * service, its slot zeroed or reused) is ignored, so its flow is picked again — the agent's purge
 * of a leaving backend's flows walks hf_flows only. NULL when there is no such entry. */
static __always_inline struct flow_value *hf_held_flow(const struct flow_key *fk)
{
	struct flow_value *fv = bpf_map_lookup_elem(&hf_flows_syn, fk);
	if (!fv)
		return NULL;
	__u32 bid = fv->flags;
	struct backend_value *be = bpf_map_lookup_elem(&hf_backends, &bid);
	if (!be || be->addr != fv->backend_addr)
		return NULL;
	return fv;
}

/* True when a packet of a frontend's flow proves the client real (docs/contracts.md "When a flow
 * is shared"): TCP with ACK and neither SYN nor RST — a spoofed source never sees the SYN/ACK it
 * would have to acknowledge, and a RST may be a spoofed victim's answer to that SYN/ACK; any UDP
 * packet (no handshake to wait for: UDP is bounded by the event budget alone). p->l4 holds a TCP
 * header bounds-checked by hf_check_clean. */
static __always_inline int hf_confirms(const struct hf_pkt *p)
{
	if (p->proto != HF_IPPROTO_TCP)
		return 1;
	const struct tcphdr *tcp = p->l4;
	return tcp->ack && !tcp->syn && !tcp->rst;
}

/* Shares a confirmed flow: puts it in hf_flows and submits its new-flow event, within this CPU's
 * budget of lb_config.event_budget events per second. Returns the reason to count: flow_shared;
 * or, held back, flow_unshared (budget spent) or event_lost (ring buffer full); -1 when hf_flows
 * refused the entry. A flow held back is kept by the caller in hf_flows_syn, forwarded all the
 * same, and a later packet tries again. */
static __always_inline int hf_share_flow(const struct lb_config *cfg, const struct flow_key *fk,
					 __be32 backend, __u32 service_id, __u64 now)
{
	__u32 zero = 0;
	struct hf_event_budget *b = bpf_map_lookup_elem(&hf_budget, &zero);
	if (!b)
		return -1;
	__u64 second = now / HF_NSEC_PER_SEC;
	if (b->second != second) {
		b->second = second;
		b->spent = 0;
	}
	__u32 limit = cfg->event_budget ? cfg->event_budget : HF_EVENT_BUDGET_DEFAULT;
	if (b->spent >= limit)
		return HF_R_FLOW_UNSHARED;
	struct flow_event *ev = bpf_ringbuf_reserve(&hf_events, sizeof(*ev), 0);
	if (!ev)
		return HF_R_EVENT_LOST;
	struct flow_value nv = {.backend_addr = backend, .flags = 0, .last_seen_ns = now};
	if (bpf_map_update_elem(&hf_flows, fk, &nv, BPF_ANY)) {
		bpf_ringbuf_discard(ev, 0);
		return -1;
	}
	ev->key = *fk;
	ev->backend_addr = backend;
	ev->service_id = service_id;
	ev->ts_ns = now;
	bpf_ringbuf_submit(ev, 0);
	b->spent += 1;
	return HF_R_FLOW_SHARED;
}

#endif
