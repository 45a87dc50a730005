/* SPDX-License-Identifier: Apache-2.0 */
/* The LB program's logic (see lb_xdp.c), shared by the program and its benchmark variants
 * (lb_bench.c). */
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

/* This CPU's counters of a frontend (slot 0 for IDs beyond the array). */
static __always_inline struct lb_stats *hf_fe_slot(__u32 service_id)
{
	__u32 idx = service_id < HF_MAX_SERVICES ? service_id : 0;
	return bpf_map_lookup_elem(&hf_fe_stats, &idx);
}

static __always_inline int hf_drop_fe(__u32 service_id, __u32 reason)
{
	struct lb_stats *fs = hf_fe_slot(service_id);
	if (fs)
		fs->drops += 1;
	hf_count(reason);
	return XDP_DROP;
}

/* Picks a backend for a new flow. Returns its address (network order) or 0 with *reason set. */
static __always_inline __be32 hf_maglev_pick(struct service_value *svc, __u32 hash, __u32 *reason)
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
	__u32 idx = bid < HF_MAX_BACKENDS ? bid : 0;
	__u64 *n = bpf_map_lookup_elem(&hf_be_stats, &idx);
	if (n)
		*n += 1;
	return be->addr;
}

/* Writes a reply-direction Ethernet header (to `dst` from `src`) and an option-less outer IPv4
 * header with its checksum, as the LB sends them: TTL HF_OUTER_TTL, ID 0, source = this node. */
static __always_inline void hf_write_eth_ip(struct ethhdr *eth, struct iphdr *ip,
					    const unsigned char *dst, const unsigned char *src,
					    __u8 proto, __u8 tos, __u16 tot_len, __u16 frag_off,
					    __be32 saddr, __be32 daddr)
{
	__builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, src, ETH_ALEN);
	eth->h_proto = bpf_htons(HF_ETH_P_IP);

	ip->version = 4;
	ip->ihl = 5;
	ip->tos = tos;
	ip->tot_len = bpf_htons(tot_len);
	ip->id = 0;
	ip->frag_off = bpf_htons(frag_off);
	ip->ttl = HF_OUTER_TTL;
	ip->protocol = proto;
	ip->check = 0;
	ip->saddr = saddr;
	ip->daddr = daddr;
	ip->check = hf_ipv4_csum(ip);
}

/* Prepends Ethernet (MACs swapped, for XDP_TX) + IPv4 + UDP in front of the IPv4 packet.
 * Returns 0 on success, -1 when the headroom could not be grown. */
static __always_inline int hf_encap(struct xdp_md *ctx, struct lb_config *cfg, __be32 backend,
				    __u32 hash, __u16 inner_len, __u8 tos)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *old_eth = data;
	if ((void *)(old_eth + 1) > data_end)
		return -1;
	unsigned char dst[ETH_ALEN], src[ETH_ALEN];
	__builtin_memcpy(dst, old_eth->h_source, ETH_ALEN);
	__builtin_memcpy(src, old_eth->h_dest, ETH_ALEN);

	if (bpf_xdp_adjust_head(ctx, -HF_ENCAP_OVERHEAD))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return -1;

	hf_write_eth_ip(eth, ip, dst, src, HF_IPPROTO_UDP, tos, inner_len + HF_ENCAP_OVERHEAD,
			HF_IP_DF, cfg->src_addr, backend);

	udp->source = bpf_htons(HF_SPORT_BASE | (hash & HF_SPORT_MASK));
	udp->dest = bpf_htons(cfg->encap_port_host);
	udp->len = bpf_htons(inner_len + sizeof(struct udphdr));
	udp->check = 0;
	return 0;
}

/* Turns an oversize frame (clean IPv4, no options, checked by the caller) into an ICMP
 * "fragmentation needed" reply to its source carrying next-hop MTU = mtu - 28, to be sent back
 * with XDP_TX (RFC 1191): the frame is cut to IP header + 8 bytes and 28 bytes of outer IPv4 +
 * ICMP are prepended. Returns 0, or -1 when the frame could not be rewritten (then drop it). */
static __always_inline int hf_icmp_too_big(struct xdp_md *ctx, struct lb_config *cfg, __u32 mtu)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)eth + sizeof(*eth) + HF_ICMP_QUOTE > data_end)
		return -1;
	if (mtu < 68 + HF_ENCAP_OVERHEAD)
		return -1;
	struct iphdr *orig = (void *)(eth + 1);
	__be32 client = orig->saddr;
	unsigned char dst[ETH_ALEN], src[ETH_ALEN];
	__builtin_memcpy(dst, eth->h_source, ETH_ALEN);
	__builtin_memcpy(src, eth->h_dest, ETH_ALEN);

	int len = data_end - data;
	if (bpf_xdp_adjust_tail(ctx, (int)(sizeof(*eth) + HF_ICMP_QUOTE) - len))
		return -1;
	if (bpf_xdp_adjust_head(ctx, -(int)(sizeof(struct iphdr) + 8)))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u8 *icmp = (void *)(ip + 1);
	if ((void *)(icmp + 8 + HF_ICMP_QUOTE) > data_end)
		return -1;

	hf_write_eth_ip(eth, ip, dst, src, HF_IPPROTO_ICMP, 0, sizeof(struct iphdr) + 8 + HF_ICMP_QUOTE,
			0, cfg->src_addr, client);

	__u16 next_hop_mtu = mtu - HF_ENCAP_OVERHEAD;
	icmp[0] = HF_ICMP_DEST_UNREACH;
	icmp[1] = HF_ICMP_FRAG_NEEDED;
	icmp[2] = 0; /* checksum, below */
	icmp[3] = 0;
	icmp[4] = 0; /* unused */
	icmp[5] = 0;
	icmp[6] = next_hop_mtu >> 8;
	icmp[7] = next_hop_mtu & 0xff;
	__u16 *w = (__u16 *)icmp;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < (8 + HF_ICMP_QUOTE) / 2; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	w[1] = ~sum;
	return 0;
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
		hf_count(HF_R_PASS_ICMP);
		return XDP_PASS;
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

	__u16 inner_len = bpf_ntohs(p.ip->tot_len);
	__u8 tos = p.ip->tos;
	struct flow_key fk = {
		.saddr = p.ip->saddr,
		.daddr = p.ip->daddr,
		.sport = p.sport,
		.dport = p.dport,
		.proto = p.proto,
	};
	__u32 hash;
	if (svc->flags & HF_SVC_F_CLIENT_IP) {
		fk.sport = 0;
		hash = hf_flow_hash_client(bpf_ntohl(fk.saddr), cfg->seed);
	} else {
		hash = hf_flow_hash_5t(bpf_ntohl(fk.saddr), bpf_ntohl(fk.daddr), bpf_ntohs(fk.sport),
				       bpf_ntohs(fk.dport), fk.proto, cfg->seed);
	}

	/* An encapsulated frame must fit the egress MTU (XDP_TX: the ingress device). */
	/* Frames that fit IPv4's minimum MTU (576) once encapsulated skip the helper call. */
	if ((void *)(long)ctx->data_end - (void *)(long)ctx->data + HF_ENCAP_OVERHEAD >
	    HF_MIN_IPV4_MTU + sizeof(struct ethhdr)) {
		__u32 mtu_len = 0;
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
	struct flow_value *fv = bpf_map_lookup_elem(&hf_flows, &fk);
	if (fv) {
		backend = fv->backend_addr;
		if (fv->last_seen_ns < now)
			fv->last_seen_ns = now;
	} else {
		__u32 reason = 0;
		backend = hf_maglev_pick(svc, hash, &reason);
		if (!backend)
			return hf_drop_fe(service_id, reason);
		struct flow_value nv = {.backend_addr = backend, .flags = 0, .last_seen_ns = now};
		bpf_map_update_elem(&hf_flows, &fk, &nv, BPF_ANY);
		struct flow_event *ev = bpf_ringbuf_reserve(&hf_events, sizeof(*ev), 0);
		if (ev) {
			ev->key = fk;
			ev->backend_addr = backend;
			ev->service_id = service_id;
			ev->ts_ns = now;
			bpf_ringbuf_submit(ev, 0);
		} else {
			hf_count(HF_R_EVENT_LOST);
		}
		is_new = 1;
	}

	if (hf_encap(ctx, cfg, backend, hash, inner_len, tos))
		return hf_drop_fe(service_id, HF_R_DROP_ENCAP);

	struct lb_stats *fs = hf_fe_slot(service_id);
	if (fs) {
		fs->packets += 1;
		fs->bytes += inner_len;
		fs->new_flows += is_new;
	}
	hf_count(is_new ? HF_R_TX_NEW : HF_R_TX_HIT);
	return XDP_TX;
}

#endif
