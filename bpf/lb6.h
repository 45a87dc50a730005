/* SPDX-License-Identifier: Apache-2.0 */
/* The LB program's IPv6 path (docs/contracts.md "IPv6"), reached from hf_lb_dispatch for frames
 * whose EtherType is IPv6: the same decision as lb.h's hf_lb_main over the IPv6 maps (maps6.h),
 * with encapsulation over the backend's family — outer IPv4 + UDP to an IPv4 backend (encap.h),
 * outer IPv6 + UDP to an IPv6 backend (encap6.h). Counters (hf_reasons, hf_fe_stats,
 * hf_be_stats), Maglev tables and backend IDs are shared with IPv4. */
#ifndef HF_LB6_H
#define HF_LB6_H

#include "lb.h"
#include "consts6.h"
#include "structs6.h"
#include "maps6.h"
#include "parsing6.h"
#include "hostile6.h"
#include "icmp6_quote.h"
#include "encap6.h"
#include "flows6.h"

/* The outer source for a backend of `family`, or NULL when this node has none configured (the
 * packet is then dropped as drop_no_config). */
static __always_inline const void *hf_outer_src(const struct lb_config *cfg,
						const struct lb_config6 *cfg6, __u8 family)
{
	if (family == HF_AF_INET)
		return cfg->src_addr ? &cfg->src_addr : NULL;
	return hf_addr6_zero((const __u32 *)cfg6->src_addr) ? NULL : cfg6->src_addr;
}

/* Encapsulates the frame to `be` over its family from `src` (hf_outer_src). Returns 0 or -1. */
static __always_inline int hf_encap_to(struct xdp_md *ctx, const struct lb_config *cfg,
				       const void *src, const struct flow_value6 *be, __u32 hash,
				       __u16 len, __u8 tc)
{
	if (be->backend_family == HF_AF_INET) {
		__be32 addr;
		__builtin_memcpy(&addr, be->backend_addr, 4);
		return hf_encap(ctx, (struct lb_config *)cfg, addr, hash, len, tc);
	}
	return hf_encap6(ctx, cfg, src, be->backend_addr, hash, len, tc);
}

/* Encapsulation overhead to a backend of `family`. */
static __always_inline __s32 hf_overhead(__u8 family)
{
	return family == HF_AF_INET ? HF_ENCAP_OVERHEAD : HF_ENCAP6_OVERHEAD;
}

/* The settings both IPv6 paths need; NULL when the agent has not written hf_config yet. */
static __always_inline struct lb_config *hf_config_v6(struct lb_config6 **cfg6)
{
	__u32 zero = 0;
	struct lb_config *cfg = bpf_map_lookup_elem(&hf_config, &zero);
	*cfg6 = bpf_map_lookup_elem(&hf_config6, &zero);
	if (!cfg || !*cfg6 || cfg->encap_port_host == 0)
		return NULL;
	return cfg;
}

/* True when `be` is this node itself (an anycast node's own pod: docs/anycast.md "Flow
 * redirection"): its packets go up to the kernel instead of being encapsulated to itself. */
static __always_inline int hf_is_local6(const struct lb_config *cfg, const struct lb_config6 *cfg6,
					const struct flow_value6 *be)
{
	if (be->backend_family == HF_AF_INET)
		return *(const __be32 *)be->backend_addr == cfg->src_addr;
	return hf_addr6_eq((const __u32 *)be->backend_addr, (const __u32 *)cfg6->src_addr);
}

/* An ICMPv6 frame: an error quoting a v6 frontend's flow is encapsulated to the backend owning
 * it (flow map, else Maglev; no flow made), like hf_lb_icmp; the rest passes (ND, echo, ...).
 * Returns the XDP verdict. */
static __always_inline int hf_lb6_icmp(struct xdp_md *ctx, struct hf_pkt6 *p, void *data_end)
{
	struct flow_key6 fk HF_ALIGNED;
	switch (hf_icmp6_quote(p, data_end, &fk)) {
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
	struct service_key6 sk HF_ALIGNED = {.port = fk.dport, .proto = fk.proto};
	__builtin_memcpy(sk.vip, fk.daddr, 16);
	struct service_value *svc = bpf_map_lookup_elem(&hf_services6, &sk);
	if (!svc) {
		hf_count(HF_R_PASS_ICMP);
		return XDP_PASS;
	}
	__u32 service_id = svc->service_id;
	struct lb_config6 *cfg6;
	struct lb_config *cfg = hf_config_v6(&cfg6);
	if (!cfg)
		return hf_drop_fe(service_id, HF_R_DROP_NO_CONFIG);
	int bad = hf_check_hostile6(p, (const __u32 *)cfg6->src_addr);
	if (bad >= 0)
		return hf_drop_fe(service_id, bad);
	__u32 hash = hf_key_hash6(svc, cfg, &fk);
	__u16 len = sizeof(struct ipv6hdr) + bpf_ntohs(p->ip6->payload_len);
	__u8 tc = hf_ip6_tclass(p->ip6);
	struct flow_value6 be HF_ALIGNED = {};
	struct flow_value6 *fv = bpf_map_lookup_elem(&hf_flows6, &fk);
	if (!fv)
		fv = hf_held_flow6(&fk);
	if (fv) {
		be = *fv;
	} else {
		__u32 reason = 0;
		if (!hf_maglev_pick6(svc, hash, &be, &reason))
			return hf_drop_fe(service_id, reason);
	}
	if (hf_is_local6(cfg, cfg6, &be)) {
		hf_count(HF_R_PASS_LOCAL_BACKEND); /* this node's own flow: the kernel delivers it */
		return XDP_PASS;
	}
	const void *src = hf_outer_src(cfg, cfg6, be.backend_family);
	if (!src)
		return hf_drop_fe(service_id, HF_R_DROP_NO_CONFIG);
	/* Never an ICMP error about an ICMP error (RFC 4443 2.4 e): too big is dropped. */
	__u32 mtu_len = len;
	if (bpf_check_mtu(ctx, 0, &mtu_len, hf_overhead(be.backend_family), 0) !=
	    BPF_MTU_CHK_RET_SUCCESS)
		return hf_drop_fe(service_id, HF_R_DROP_TOO_BIG);
	if (hf_encap_to(ctx, cfg, src, &be, hash, len, tc))
		return hf_drop_fe(service_id, HF_R_DROP_ENCAP);
	hf_count_fe_tx(service_id, len, 0);
	hf_count(HF_R_TX_ICMP_TO_BACKEND);
	return XDP_TX;
}

/* The LB decision and rewrite for one IPv6 frame; returns the XDP verdict. */
static __always_inline int hf_lb6_main(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct hf_pkt6 p = {};

	switch (hf_parse6(data, data_end, &p)) {
	case HF_PARSE6_L4:
		break;
	case HF_PARSE6_ICMP:
		return hf_lb6_icmp(ctx, &p, data_end);
	case HF_PARSE6_EXT:
		hf_count(HF_R_PASS_IPV6_EXT);
		return XDP_PASS;
	case HF_PARSE6_NOT_L4:
		hf_count(HF_R_PASS_NOT_L4);
		return XDP_PASS;
	case HF_PARSE6_NOT_IPV6:
		hf_count(HF_R_PASS_NOT_IPV4);
		return XDP_PASS;
	default:
		hf_count(HF_R_PASS_TRUNCATED);
		return XDP_PASS;
	}

	struct service_key6 sk HF_ALIGNED = {.port = p.dport, .proto = p.proto};
	__builtin_memcpy(sk.vip, &p.ip6->daddr, 16);
	struct service_value *svc = bpf_map_lookup_elem(&hf_services6, &sk);
	if (!svc) {
		hf_count(HF_R_PASS_NOT_FRONTEND);
		return XDP_PASS;
	}
	__u32 service_id = svc->service_id;

	int bad = hf_check_clean6(&p, data_end);
	if (bad >= 0)
		return hf_drop_fe(service_id, bad);
	struct lb_config6 *cfg6;
	struct lb_config *cfg = hf_config_v6(&cfg6);
	if (!cfg)
		return hf_drop_fe(service_id, HF_R_DROP_NO_CONFIG);
	bad = hf_check_hostile6(&p, (const __u32 *)cfg6->src_addr);
	if (bad < 0)
		bad = hf_check_hostile6_l4(p.l4, p.proto, data_end);
	if (bad >= 0)
		return hf_drop_fe(service_id, bad);

	__u16 len = sizeof(struct ipv6hdr) + bpf_ntohs(p.ip6->payload_len);
	__u8 tc = hf_ip6_tclass(p.ip6);
	struct flow_key6 fk HF_ALIGNED = {.sport = p.sport, .dport = p.dport, .proto = p.proto};
	__builtin_memcpy(fk.saddr, &p.ip6->saddr, 16);
	__builtin_memcpy(fk.daddr, &p.ip6->daddr, 16);
	__u32 hash = hf_key_hash6(svc, cfg, &fk);

	/* The backend first (hf_flows6, hf_flows_syn6, else Maglev), as its family sets the overhead
	 * the MTU check needs; nothing is recorded before the packet is known to be sent. */
	__u64 now = hf_now();
	struct flow_value6 be HF_ALIGNED = {};
	__u32 bid = 0;
	struct flow_value6 *held = NULL;
	struct flow_value6 *fv = bpf_map_lookup_elem(&hf_flows6, &fk);
	if (fv) {
		be = *fv;
	} else {
		held = hf_held_flow6(&fk);
		if (held) {
			be = *held;
		} else {
			if ((svc->flags & HF_SVC_F_DRAINING) && hf_opens6(p.l4, p.proto, data_end))
				return hf_drop_fe(service_id, HF_R_DROP_NO_BACKENDS);
			__u32 reason = 0;
			bid = hf_maglev_pick6(svc, hash, &be, &reason);
			if (!bid)
				return hf_drop_fe(service_id, reason);
		}
	}
	int local = hf_is_local6(cfg, cfg6, &be);
	const void *src = hf_outer_src(cfg, cfg6, be.backend_family);
	if (!src && !local)
		return hf_drop_fe(service_id, HF_R_DROP_NO_CONFIG);

	/* IPv6 is never fragmented on the path: every packet too big once encapsulated is answered
	 * with Packet Too Big carrying the MTU left for it (docs/mtu.md). */
	if (!local) {
		__s32 overhead = hf_overhead(be.backend_family);
		__u32 mtu_len = len;
		if (bpf_check_mtu(ctx, 0, &mtu_len, overhead, 0) != BPF_MTU_CHK_RET_SUCCESS) {
			if (mtu_len > (__u32)overhead && hf_icmp6_too_big(ctx, mtu_len - overhead) == 0) {
				struct lb_stats *fs = hf_fe_slot(service_id);
				if (fs)
					fs->drops += 1;
				hf_count(HF_R_TX_ICMP_TOO_BIG);
				return XDP_TX;
			}
			return hf_drop_fe(service_id, HF_R_DROP_TOO_BIG);
		}
	}

	/* Shared only once the client proves real (docs/contracts.md "When a flow is shared"), as
	 * for IPv4: until then the flow lives in hf_flows_syn6. */
	int is_new = 0;
	__u32 tx = HF_R_TX_HIT;
	if (fv) {
		if (fv->last_seen_ns < now)
			fv->last_seen_ns = now;
		/* Entered hf_flows6 while the ring buffer was full: this packet retries its record. */
		if (fv->flags & HF_FLOW_F_UNSHARED)
			hf_reshare_flow6(cfg, &fk, fv, service_id, now);
	} else {
		int confirms = hf_confirms6(p.l4, p.proto, data_end);
		if (held) {
			if (confirms && hf_share_flow6(cfg, &fk, &be, service_id, now)) {
				bpf_map_delete_elem(&hf_flows_syn6, &fk);
				tx = HF_R_TX_CONFIRMED;
			} else {
				if (held->last_seen_ns < now)
					held->last_seen_ns = now;
				tx = HF_R_TX_UNCONFIRMED;
			}
		} else {
			hf_count_be_new(bid);
			if (!confirms || !hf_share_flow6(cfg, &fk, &be, service_id, now)) {
				be.flags = bid;
				be.last_seen_ns = now;
				bpf_map_update_elem(&hf_flows_syn6, &fk, &be, BPF_ANY);
			}
			is_new = 1;
			tx = HF_R_TX_NEW;
		}
	}

	if (local) {
		hf_count_fe_tx(service_id, len, is_new);
		hf_count(HF_R_PASS_LOCAL_BACKEND);
		return XDP_PASS;
	}
	if (hf_encap_to(ctx, cfg, src, &be, hash, len, tc))
		return hf_drop_fe(service_id, HF_R_DROP_ENCAP);
	hf_count_fe_tx(service_id, len, is_new);
	hf_count(tx);
	return XDP_TX;
}

/* hf_lb's entry: IPv6 frames to hf_lb6_main, everything else to hf_lb_main (IPv4, unchanged). */
static __always_inline int hf_lb_dispatch(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) <= data_end && eth->h_proto == bpf_htons(HF_ETH_P_IPV6))
		return hf_lb6_main(ctx);
	return hf_lb_main(ctx);
}

#endif
