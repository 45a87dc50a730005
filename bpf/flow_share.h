/* SPDX-License-Identifier: Apache-2.0 */
/* When the LB program shares a flow (docs/contracts.md "When a flow is shared"): the flows held
 * unshared in hf_flows_syn, the packets that prove a client real, sharing within the per-CPU
 * event budget, and the event retried for a flow that entered hf_flows while the ring buffer was
 * full. Used by hf_lb_main in lb.h (and the budget by flows6.h). */
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

/* True for a TCP SYN without ACK: a client opening a connection (HF_SVC_F_DRAINING drops it when
 * it finds no flow). p->l4 as for hf_confirms. */
static __always_inline int hf_opens(const struct hf_pkt *p)
{
	if (p->proto != HF_IPPROTO_TCP)
		return 0;
	const struct tcphdr *tcp = p->l4;
	return tcp->syn && !tcp->ack;
}

/* This CPU's event budget when it has a flow left to share this second of the datapath clock
 * (lb_config.event_budget per CPU: flows taken into hf_flows, and events a later packet
 * submits), else NULL. Shared by both families. */
static __always_inline struct hf_event_budget *hf_budget_left(const struct lb_config *cfg,
								__u64 now)
{
	__u32 zero = 0;
	struct hf_event_budget *b = bpf_map_lookup_elem(&hf_budget, &zero);
	if (!b)
		return NULL;
	__u64 second = now / HF_NSEC_PER_SEC;
	if (b->second != second) {
		b->second = second;
		b->spent = 0;
	}
	__u32 limit = cfg->event_budget ? cfg->event_budget : HF_EVENT_BUDGET_DEFAULT;
	return b->spent < limit ? b : NULL;
}

/* True when `ring` has no room for a record of `bytes` (plus its 8-byte header): read without the
 * ring's lock, which bpf_ringbuf_reserve takes even to fail — a flow retrying its event on every
 * packet while no one reads the ring must not contend for it. */
static __always_inline int hf_ring_full(void *ring, __u64 bytes)
{
	return bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) + bytes + 8 >
	       bpf_ringbuf_query(ring, BPF_RB_RING_SIZE);
}

static __always_inline void hf_fill_event(struct flow_event *ev, const struct flow_key *fk,
					  __be32 backend, __u32 service_id, __u64 now)
{
	ev->key = *fk;
	ev->backend_addr = backend;
	ev->service_id = service_id;
	ev->ts_ns = now;
}

/* Shares a confirmed flow within this CPU's budget: puts it in hf_flows and submits its new-flow
 * event. With the ring buffer full the flow goes to hf_flows all the same, flagged
 * HF_FLOW_F_UNSHARED, and a later packet submits the event (hf_reshare_flow). Returns the reason
 * to count: flow_shared, event_lost (in hf_flows, flagged), flow_unshared (budget spent: not in
 * hf_flows, the caller holds the flow in hf_flows_syn and a later packet tries again); -1 when
 * hf_flows refused the entry (held likewise). */
static __always_inline int hf_share_flow(const struct lb_config *cfg, const struct flow_key *fk,
					 __be32 backend, __u32 service_id, __u64 now)
{
	struct hf_event_budget *b = hf_budget_left(cfg, now);
	if (!b)
		return HF_R_FLOW_UNSHARED;
	struct flow_event *ev = bpf_ringbuf_reserve(&hf_events, sizeof(*ev), 0);
	struct flow_value nv = {
		.backend_addr = backend,
		.flags = ev ? 0 : HF_FLOW_F_UNSHARED,
		.last_seen_ns = now,
	};
	if (bpf_map_update_elem(&hf_flows, fk, &nv, BPF_ANY)) {
		if (ev)
			bpf_ringbuf_discard(ev, 0);
		return -1;
	}
	b->spent += 1;
	if (!ev)
		return HF_R_EVENT_LOST;
	hf_fill_event(ev, fk, backend, service_id, now);
	bpf_ringbuf_submit(ev, 0);
	return HF_R_FLOW_SHARED;
}

/* A packet of `fv`, an hf_flows entry flagged HF_FLOW_F_UNSHARED: submits the flow's event when
 * the budget and the ring buffer allow, and clears the flag. Returns 1 when submitted. */
static __always_inline int hf_reshare_flow(const struct lb_config *cfg, const struct flow_key *fk,
					   struct flow_value *fv, __u32 service_id, __u64 now)
{
	struct hf_event_budget *b = hf_budget_left(cfg, now);
	if (!b || hf_ring_full(&hf_events, sizeof(struct flow_event)))
		return 0;
	struct flow_event *ev = bpf_ringbuf_reserve(&hf_events, sizeof(*ev), 0);
	if (!ev)
		return 0;
	hf_fill_event(ev, fk, fv->backend_addr, service_id, now);
	bpf_ringbuf_submit(ev, 0);
	b->spent += 1;
	fv->flags &= ~HF_FLOW_F_UNSHARED;
	return 1;
}

#endif
