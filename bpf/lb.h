/* SPDX-License-Identifier: Apache-2.0 */
/* The LB program's logic (see lb_xdp.c), shared by the program and its benchmark variants
 * (lb_bench.c): counters, the Maglev pick and the per-frame decision. The rewrites it sends are
 * in encap.h (to a backend) and icmp_too_big.h (back to the client). */
#ifndef HF_LB_H
#define HF_LB_H

#define HF_LB_MAPS
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "consts.h"
#include "structs.h"
#include "maps.h"
#include "parsing.h"
#include "flow_hash.h"
#include "encap.h"
#include "icmp_too_big.h"
#include "hostile.h"
#include "icmp_quote.h"
#include "flow_share.h"

static __always_inline void hf_count(__u32 reason)
{
	__u64 *v = bpf_map_lookup_elem(&hf_reasons, &reason);
	if (v)
		*v += 1;
}

/* CLOCK_MONOTONIC ns at tick resolution, for last_seen and event times. bpf_jiffies64() is
 * inlined by the verifier (no call); the coarse clock helper is called only when this CPU sees a
 * new jiffy, and its reading is reused for the rest of that jiffy. The coarse clock moves at the
 * tick with jiffies, so the value is what bpf_ktime_get_coarse_ns() would return, except in the
 * instant between a tick's jiffies and clock updates (then up to one more tick behind). */
static __always_inline __u64 hf_now(void)
{
	__u32 zero = 0;
	__u64 j = bpf_jiffies64();
	struct hf_clock_cache *c = bpf_map_lookup_elem(&hf_clock, &zero);
	if (!c)
		return bpf_ktime_get_coarse_ns();
	if (c->jiffies != j) {
		c->ns = bpf_ktime_get_coarse_ns();
		c->jiffies = j;
	}
	return c->ns;
}

/* This CPU's counters of a frontend; slot 0 for IDs beyond the array (its size is set at load,
 * so the bound is the lookup's). Returns NULL only if the array has no slot 0. */
static __always_inline struct lb_stats *hf_fe_slot(__u32 service_id)
{
	struct lb_stats *s = bpf_map_lookup_elem(&hf_fe_stats, &service_id);
	if (s)
		return s;
	__u32 zero = 0;
	return bpf_map_lookup_elem(&hf_fe_stats, &zero);
}

static __always_inline int hf_drop_fe(__u32 service_id, __u32 reason)
{
	struct lb_stats *fs = hf_fe_slot(service_id);
	if (fs)
		fs->drops += 1;
	hf_count(reason);
	return XDP_DROP;
}

/* Picks a backend by Maglev; with `new_flow` the pick is counted as a new flow of the backend
 * (hf_be_stats). Returns its address (network order), and its ID in *bid_out unless NULL; or 0
 * with *reason set. */
static __always_inline __be32 hf_maglev_pick(struct service_value *svc, __u32 hash, __u32 *reason,
					     int new_flow, __u32 *bid_out)
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
	if (!backend_id) {
		/* M larger than the table: a control-plane bug, counted like an unset slot */
		*reason = HF_R_DROP_MAGLEV_SLOT_ZERO;
		return 0;
	}
	if (*backend_id == 0) {
		*reason = HF_R_DROP_MAGLEV_SLOT_ZERO;
		return 0;
	}
	__u32 bid = *backend_id;
	struct backend_value *be = bpf_map_lookup_elem(&hf_backends, &bid);
	if (!be || be->addr == 0) {
		*reason = HF_R_DROP_NO_BACKEND;
		return 0;
	}
	if (bid_out)
		*bid_out = bid;
	if (!new_flow)
		return be->addr;
	/* slot 0 for IDs beyond the array (sized at load) */
	__u64 *n = bpf_map_lookup_elem(&hf_be_stats, &bid);
	if (!n) {
		__u32 zero = 0;
		n = bpf_map_lookup_elem(&hf_be_stats, &zero);
	}
	if (n)
		*n += 1;
	return be->addr;
}

/* The key of a parsed L4 frame's flow in hf_flows (pad zeroed: it is hashed as a map key). */
static __always_inline struct flow_key hf_flow_key(const struct hf_pkt *p)
{
	struct flow_key fk = {
		.saddr = p->ip->saddr,
		.daddr = p->ip->daddr,
		.sport = p->sport,
		.dport = p->dport,
		.proto = p->proto,
	};
	return fk;
}

/* The flow hash of `fk` for its service (docs/contracts.md "Flow hash"); in client-ip mode
 * it first zeroes fk->sport, making fk the flow map key of that mode. */
static __always_inline __u32 hf_key_hash(const struct service_value *svc,
					 const struct lb_config *cfg, struct flow_key *fk)
{
	if (svc->flags & HF_SVC_F_CLIENT_IP) {
		fk->sport = 0;
		return hf_flow_hash_client(bpf_ntohl(fk->saddr), cfg->seed);
	}
	return hf_flow_hash_5t(bpf_ntohl(fk->saddr), bpf_ntohl(fk->daddr), bpf_ntohs(fk->sport),
			       bpf_ntohs(fk->dport), fk->proto, cfg->seed);
}

/* Counts a packet of `len` IP bytes sent for a frontend (and a new flow when is_new). */
static __always_inline void hf_count_fe_tx(__u32 service_id, __u16 len, int is_new)
{
	struct lb_stats *fs = hf_fe_slot(service_id);
	if (fs) {
		fs->packets += 1;
		fs->bytes += len;
		fs->new_flows += is_new;
	}
}

/* hf_share_flow (flow_share.h) with its outcome counted; returns 1 when the flow is in hf_flows
 * (with its event, or flagged HF_FLOW_F_UNSHARED when the ring buffer was full). */
static __always_inline int hf_share(const struct lb_config *cfg, const struct flow_key *fk,
				    __be32 backend, __u32 service_id, __u64 now)
{
	int r = hf_share_flow(cfg, fk, backend, service_id, now);
	if (r >= 0)
		hf_count(r);
	return r == HF_R_FLOW_SHARED || r == HF_R_EVENT_LOST;
}

/* An ICMP frame (p->ip valid). An error whose quote names a frontend's flow is encapsulated to
 * the backend owning that flow — hf_flows, hf_flows_syn, else Maglev on the same key; no flow is
 * made — like the flow's own packets; everything else passes to the kernel (docs/contracts.md
 * "ICMP errors to the owning backend"). Returns the XDP verdict. */
static __always_inline int hf_lb_icmp(struct xdp_md *ctx, struct hf_pkt *p, void *data_end)
{
	struct flow_key fk;
	switch (hf_icmp_quote(p, data_end, &fk)) {
	case HF_QUOTE_FLOW:
		break;
	case HF_QUOTE_BAD:
		hf_count(HF_R_PASS_ICMP_BAD_QUOTE);
		return XDP_PASS;
	case HF_QUOTE_TRUNCATED:
		hf_count(HF_R_PASS_TRUNCATED);
		return XDP_PASS;
	default:
		hf_count(HF_R_PASS_ICMP);
		return XDP_PASS;
	}
	struct service_key sk = {.vip = fk.daddr, .port = fk.dport, .proto = fk.proto};
	struct service_value *svc = bpf_map_lookup_elem(&hf_services, &sk);
	if (!svc) {
		hf_count(HF_R_PASS_ICMP);
		return XDP_PASS;
	}
	__u32 service_id = svc->service_id;
	__u32 zero = 0;
	struct lb_config *cfg = bpf_map_lookup_elem(&hf_config, &zero);
	if (!cfg || cfg->src_addr == 0)
		return hf_drop_fe(service_id, HF_R_DROP_NO_CONFIG);
	int bad = hf_check_hostile(p, cfg->src_addr);
	if (bad >= 0)
		return hf_drop_fe(service_id, bad);
	__u32 hash = hf_key_hash(svc, cfg, &fk);
	__u16 len = bpf_ntohs(p->ip->tot_len);
	/* Never an ICMP error about an ICMP error (RFC 1122 3.2.2): too big is dropped. */
	__u32 mtu_len = len;
	if (bpf_check_mtu(ctx, 0, &mtu_len, HF_ENCAP_OVERHEAD, 0) != BPF_MTU_CHK_RET_SUCCESS)
		return hf_drop_fe(service_id, HF_R_DROP_TOO_BIG);
	__be32 backend;
	struct flow_value *fv = bpf_map_lookup_elem(&hf_flows, &fk);
	if (!fv)
		fv = hf_held_flow(&fk);
	if (fv) {
		backend = fv->backend_addr;
	} else {
		__u32 reason = 0;
		backend = hf_maglev_pick(svc, hash, &reason, 0, NULL);
		if (!backend)
			return hf_drop_fe(service_id, reason);
	}
	if (backend == cfg->src_addr) {
		hf_count(HF_R_PASS_LOCAL_BACKEND); /* this node's own flow: the kernel delivers it */
		return XDP_PASS;
	}
	if (hf_encap(ctx, cfg, backend, hash, len, p->ip->tos))
		return hf_drop_fe(service_id, HF_R_DROP_ENCAP);
	hf_count_fe_tx(service_id, len, 0);
	hf_count(HF_R_TX_ICMP_TO_BACKEND);
	return XDP_TX;
}

/* The LB decision and rewrite for one frame; returns the XDP verdict. */
static __always_inline int hf_lb_main(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct hf_pkt p = {};

	switch (hf_parse(data, data_end, &p)) {
	case HF_PARSE_L4:
		break;
	case HF_PARSE_NOT_IPV4:
		hf_count(HF_R_PASS_NOT_IPV4);
		return XDP_PASS;
	case HF_PARSE_ICMP:
		return hf_lb_icmp(ctx, &p, data_end);
	case HF_PARSE_NOT_L4:
		hf_count(HF_R_PASS_NOT_L4);
		return XDP_PASS;
	default:
		hf_count(HF_R_PASS_TRUNCATED);
		return XDP_PASS;
	}

	struct service_key sk = {
		.vip = p.ip->daddr,
		.port = p.dport,
		.proto = p.proto,
	};
	struct service_value *svc = bpf_map_lookup_elem(&hf_services, &sk);
	if (!svc) {
		hf_count(HF_R_PASS_NOT_FRONTEND);
		return XDP_PASS;
	}
	__u32 service_id = svc->service_id;

	int bad = hf_check_clean(&p, data_end);
	if (bad >= 0)
		return hf_drop_fe(service_id, bad);

	__u32 zero = 0;
	struct lb_config *cfg = bpf_map_lookup_elem(&hf_config, &zero);
	if (!cfg || cfg->src_addr == 0)
		return hf_drop_fe(service_id, HF_R_DROP_NO_CONFIG);

	bad = hf_check_hostile(&p, cfg->src_addr);
	if (bad >= 0)
		return hf_drop_fe(service_id, bad);

	__u16 inner_len = bpf_ntohs(p.ip->tot_len);
	__u8 tos = p.ip->tos;
	struct flow_key fk = hf_flow_key(&p);
	__u32 hash = hf_key_hash(svc, cfg, &fk);

	/* An encapsulated packet must fit the egress MTU (XDP_TX: the ingress device), whatever its
	 * size: the IP total length is checked (not the frame, whose Ethernet trailer is no part of
	 * the packet) against the device's MTU, however small. */
	{
		__u32 mtu_len = inner_len;
		if (bpf_check_mtu(ctx, 0, &mtu_len, HF_ENCAP_OVERHEAD, 0) != BPF_MTU_CHK_RET_SUCCESS) {
			/* DF set: tell the client the path MTU (PMTUD). Otherwise we cannot fragment. */
			if ((p.ip->frag_off & bpf_htons(HF_IP_DF)) &&
			    hf_icmp_too_big(ctx, cfg, mtu_len) == 0) {
				struct lb_stats *fs = hf_fe_slot(service_id);
				if (fs)
					fs->drops += 1;
				hf_count(HF_R_TX_ICMP_TOO_BIG);
				return XDP_TX;
			}
			return hf_drop_fe(service_id, HF_R_DROP_TOO_BIG);
		}
	}

	/* CLOCK_MONOTONIC at tick resolution (docs/contracts.md, hf_now): bpf_ktime_get_ns() on
	 * every packet cost ~25 ns here. The entry is written only when the time moved forward, so
	 * a busy flow dirties its cache line at most once per tick instead of on every packet, and
	 * last_seen never goes back (a peer flow installed with the agent's finer clock keeps it). */
	__u64 now = hf_now();
	__be32 backend;
	int is_new = 0;
	__u32 tx = HF_R_TX_HIT;
	struct flow_value *fv = bpf_map_lookup_elem(&hf_flows, &fk);
	if (fv) {
		backend = fv->backend_addr;
		if (fv->last_seen_ns < now)
			fv->last_seen_ns = now;
		/* Entered hf_flows while the ring buffer was full: this packet retries its event. */
		if (fv->flags & HF_FLOW_F_UNSHARED) {
			if (hf_reshare_flow(cfg, &fk, fv, service_id, now))
				hf_count(HF_R_FLOW_SHARED);
		}
	} else {
		/* Not shared yet: a flow goes to hf_flows (and Redis) only on a packet that proves the
		 * client real, until then it lives in hf_flows_syn (docs/contracts.md "When a flow is
		 * shared"). */
		int confirms = hf_confirms(&p);
		fv = hf_held_flow(&fk);
		if (fv) {
			backend = fv->backend_addr;
			if (confirms && hf_share(cfg, &fk, backend, service_id, now)) {
				bpf_map_delete_elem(&hf_flows_syn, &fk);
				tx = HF_R_TX_CONFIRMED;
			} else {
				if (fv->last_seen_ns < now)
					fv->last_seen_ns = now;
				tx = HF_R_TX_UNCONFIRMED;
			}
		} else {
			if ((svc->flags & HF_SVC_F_DRAINING) && hf_opens(&p))
				return hf_drop_fe(service_id, HF_R_DROP_NO_BACKENDS);
			__u32 reason = 0, bid = 0;
			backend = hf_maglev_pick(svc, hash, &reason, 1, &bid);
			if (!backend)
				return hf_drop_fe(service_id, reason);
			if (!confirms || !hf_share(cfg, &fk, backend, service_id, now)) {
				struct flow_value nv = {.backend_addr = backend, .flags = bid, .last_seen_ns = now};
				bpf_map_update_elem(&hf_flows_syn, &fk, &nv, BPF_ANY);
			}
			is_new = 1;
			tx = HF_R_TX_NEW;
		}
	}

	/* This node is the flow's backend (an anycast node, docs/anycast.md "Flow redirection"): the
	 * flow is learned and shared as any other, and the packet goes up to the local pod. */
	if (backend == cfg->src_addr) {
		hf_count_fe_tx(service_id, inner_len, is_new);
		hf_count(HF_R_PASS_LOCAL_BACKEND);
		return XDP_PASS;
	}
	if (hf_encap(ctx, cfg, backend, hash, inner_len, tos))
		return hf_drop_fe(service_id, HF_R_DROP_ENCAP);

	hf_count_fe_tx(service_id, inner_len, is_new);
	hf_count(tx);
	return XDP_TX;
}

#endif
