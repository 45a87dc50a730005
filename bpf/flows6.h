/* SPDX-License-Identifier: Apache-2.0 */
/* The flows of lb6.h's IPv6 path (docs/contracts.md "IPv6"): a backend ID resolved in either
 * family's backend map, the Maglev pick, the IPv6 flow hash of a key, and flow sharing as for
 * IPv4 (docs/contracts.md "When a flow is shared": hf_flows_syn6 until the client proves real,
 * then hf_flows6 and an hf_events6 record within the per-CPU event budget; a flow that entered
 * hf_flows6 while the ring was full retries its record on a later packet). */
#ifndef HF_FLOWS6_H
#define HF_FLOWS6_H

#include "lb.h"
#include "consts6.h"
#include "structs6.h"
#include "maps6.h"
#include "hostile6.h"

/* For stack copies of IPv6 keys and values: aligned so their addresses can be read as words. */
#define HF_ALIGNED __attribute__((aligned(8)))

/* Fills *out with backend `bid`'s address: hf_backends (IPv4) when set, else hf_backends6.
 * Returns 0, or -1 when the ID has neither. */
static __always_inline int hf_backend_by_id(__u32 bid, struct flow_value6 *out)
{
	struct backend_value *be = bpf_map_lookup_elem(&hf_backends, &bid);
	if (be && be->addr != 0) {
		__builtin_memset(out->backend_addr, 0, 16);
		__builtin_memcpy(out->backend_addr, &be->addr, 4);
		out->backend_family = HF_AF_INET;
		return 0;
	}
	struct backend_value6 *b6 = bpf_map_lookup_elem(&hf_backends6, &bid);
	if (!b6 || hf_addr6_zero((const __u32 *)b6->addr))
		return -1;
	__builtin_memcpy(out->backend_addr, b6->addr, 16);
	out->backend_family = HF_AF_INET6;
	return 0;
}

/* The Maglev pick of an IPv6 flow: table[hash % M] → backend ID → *out. Returns the backend ID,
 * or 0 with *reason set (the same reasons as hf_maglev_pick). */
static __always_inline __u32 hf_maglev_pick6(struct service_value *svc, __u32 hash,
					     struct flow_value6 *out, __u32 *reason)
{
	if (svc->backend_count == 0 || svc->maglev_size == 0) {
		*reason = HF_R_DROP_NO_BACKENDS;
		return 0;
	}
	__u32 sid = svc->service_id;
	void *table = bpf_map_lookup_elem(&hf_maglev, &sid);
	if (!table) {
		*reason = HF_R_DROP_NO_MAGLEV;
		return 0;
	}
	__u32 slot = hash % svc->maglev_size;
	__u32 *backend_id = bpf_map_lookup_elem(table, &slot);
	if (!backend_id || *backend_id == 0) {
		*reason = HF_R_DROP_MAGLEV_SLOT_ZERO;
		return 0;
	}
	__u32 bid = *backend_id;
	if (hf_backend_by_id(bid, out)) {
		*reason = HF_R_DROP_NO_BACKEND;
		return 0;
	}
	return bid;
}

/* Counts a Maglev pick as a new flow of backend `bid` (slot 0 for IDs beyond the array). */
static __always_inline void hf_count_be_new(__u32 bid)
{
	__u64 *n = bpf_map_lookup_elem(&hf_be_stats, &bid);
	if (!n) {
		__u32 zero = 0;
		n = bpf_map_lookup_elem(&hf_be_stats, &zero);
	}
	if (n)
		*n += 1;
}

/* The flow hash of `fk` for its service; in client-ip mode it first zeroes fk->sport. */
static __always_inline __u32 hf_key_hash6(const struct service_value *svc,
					  const struct lb_config *cfg, struct flow_key6 *fk)
{
	if (svc->flags & HF_SVC_F_CLIENT_IP) {
		fk->sport = 0;
		return hf_flow_hash6_client((const __be32 *)fk->saddr, cfg->seed);
	}
	return hf_flow_hash6_5t((const __be32 *)fk->saddr, (const __be32 *)fk->daddr,
				bpf_ntohs(fk->sport), bpf_ntohs(fk->dport), fk->proto, cfg->seed);
}

/* The hf_flows_syn6 entry of `fk` while its backend ID (flags) still names the backend it holds;
 * NULL otherwise (then the flow is picked again), as hf_held_flow for IPv4. */
static __always_inline struct flow_value6 *hf_held_flow6(const struct flow_key6 *fk)
{
	struct flow_value6 *fv = bpf_map_lookup_elem(&hf_flows_syn6, fk);
	if (!fv)
		return NULL;
	struct flow_value6 cur HF_ALIGNED = {};
	if (hf_backend_by_id(fv->flags, &cur) || cur.backend_family != fv->backend_family ||
	    !hf_addr6_eq((const __u32 *)cur.backend_addr, (const __u32 *)fv->backend_addr))
		return NULL;
	return fv;
}

/* True when a packet proves its client real, as hf_confirms: TCP ACK without SYN or RST; any
 * UDP packet. */
static __always_inline int hf_confirms6(void *l4, __u8 proto, void *data_end)
{
	if (proto != HF_IPPROTO_TCP)
		return 1;
	const struct tcphdr *tcp = l4;
	if ((void *)(tcp + 1) > data_end)
		return 0;
	return tcp->ack && !tcp->syn && !tcp->rst;
}

/* True for a TCP SYN without ACK, as hf_opens. */
static __always_inline int hf_opens6(void *l4, __u8 proto, void *data_end)
{
	if (proto != HF_IPPROTO_TCP)
		return 0;
	const struct tcphdr *tcp = l4;
	if ((void *)(tcp + 1) > data_end)
		return 0;
	return tcp->syn && !tcp->ack;
}

static __always_inline void hf_fill_event6(struct flow_event6 *ev, const struct flow_key6 *fk,
					   const struct flow_value6 *be, __u32 service_id, __u64 now)
{
	ev->key = *fk;
	__builtin_memcpy(ev->backend_addr, be->backend_addr, 16);
	ev->backend_family = be->backend_family;
	ev->pad[0] = 0;
	ev->pad[1] = 0;
	ev->pad[2] = 0;
	ev->service_id = service_id;
	ev->ts_ns = now;
}

/* Shares a confirmed IPv6 flow, as hf_share_flow: within this CPU's budget (hf_budget, shared
 * with IPv4) puts it in hf_flows6 with its hf_events6 record, or flagged HF_FLOW_F_UNSHARED when
 * the ring buffer is full. Counts the outcome (flow_shared, event_lost, flow_unshared); returns 1
 * when the flow is in hf_flows6, 0 when the caller holds it in hf_flows_syn6 (budget spent). */
static __always_inline int hf_share_flow6(const struct lb_config *cfg, const struct flow_key6 *fk,
					  const struct flow_value6 *be, __u32 service_id, __u64 now)
{
	struct hf_event_budget *b = hf_budget_left(cfg, now);
	if (!b) {
		hf_count(HF_R_FLOW_UNSHARED);
		return 0;
	}
	struct flow_event6 *ev = bpf_ringbuf_reserve(&hf_events6, sizeof(*ev), 0);
	struct flow_value6 nv HF_ALIGNED = *be;
	nv.flags = ev ? 0 : HF_FLOW_F_UNSHARED;
	nv.last_seen_ns = now;
	if (bpf_map_update_elem(&hf_flows6, fk, &nv, BPF_ANY)) {
		if (ev)
			bpf_ringbuf_discard(ev, 0);
		return 0;
	}
	b->spent += 1;
	if (!ev) {
		hf_count(HF_R_EVENT_LOST);
		return 1;
	}
	hf_fill_event6(ev, fk, be, service_id, now);
	bpf_ringbuf_submit(ev, 0);
	hf_count(HF_R_FLOW_SHARED);
	return 1;
}

/* A packet of `fv`, an hf_flows6 entry flagged HF_FLOW_F_UNSHARED, as hf_reshare_flow: submits
 * its hf_events6 record when the budget and the ring allow and clears the flag (flow_shared). */
static __always_inline void hf_reshare_flow6(const struct lb_config *cfg,
					     const struct flow_key6 *fk, struct flow_value6 *fv,
					     __u32 service_id, __u64 now)
{
	struct hf_event_budget *b = hf_budget_left(cfg, now);
	if (!b || hf_ring_full(&hf_events6, sizeof(struct flow_event6)))
		return;
	struct flow_event6 *ev = bpf_ringbuf_reserve(&hf_events6, sizeof(*ev), 0);
	if (!ev)
		return;
	hf_fill_event6(ev, fk, fv, service_id, now);
	bpf_ringbuf_submit(ev, 0);
	b->spent += 1;
	fv->flags &= ~HF_FLOW_F_UNSHARED;
	hf_count(HF_R_FLOW_SHARED);
}

#endif
