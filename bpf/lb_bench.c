// SPDX-License-Identifier: Apache-2.0
/* Benchmark variants of hf_lb for BPF_PROG_TEST_RUN's in-kernel repeat loop, which reuses one
 * packet buffer: each variant undoes its own rewrite so every repetition sees the original frame
 * (without this, runs 2..n would take the cheap "not a frontend" exit — FINDINGS). The undo costs
 * are included in what they measure. Not loaded outside bench/datapath.ts. */
#include "lb.h"

char LICENSE[] SEC("license") = "GPL";

/* Moves the frame's head by delta bytes (negative grows it) and writes an Ethernet header at the
 * new head with the old one's addresses swapped, as hf_lb's rewrite and its undo both do.
 * Returns 0, or -1 when the frame is too short or the head cannot move. */
static __always_inline int hf_bench_move_eth(struct xdp_md *ctx, int delta)
{
	unsigned char dst[ETH_ALEN], src[ETH_ALEN];
	if (hf_turn_around(ctx, delta, dst, src))
		return -1;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return -1;
	hf_write_eth(eth, dst, src);
	return 0;
}

/* Strips the 28 bytes hf_lb added and restores the original Ethernet header (hf_lb sent the
 * frame back with the addresses swapped, so swapping again gives the original destination). */
static __always_inline void hf_bench_restore(struct xdp_md *ctx)
{
	hf_bench_move_eth(ctx, HF_ENCAP_OVERHEAD);
}

/* The new-flow path, undone so that the next repetition is a new flow again: hf_lb, restore,
 * then either delete the flow it created (hf_flows, or hf_flows_syn for a SYN: the same key next
 * time) or, with next_key, bump the
 * frame's source port (another key next time; the flows stay in the map, and the L4 checksum goes
 * stale, which hf_lb does not read). Returns hf_lb's verdict. */
static __always_inline int hf_bench_new_flow(struct xdp_md *ctx, int next_key)
{
	int rc = hf_lb_main(ctx);
	if (rc != XDP_TX)
		return rc;
	hf_bench_restore(ctx);
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct hf_pkt p = {};
	if (hf_parse(data, data_end, &p) != HF_PARSE_L4)
		return rc;
	if (next_key) {
		__be16 *ports = p.l4;
		ports[0] = bpf_htons(bpf_ntohs(p.sport) + 1);
	} else {
		struct flow_key fk = hf_flow_key(&p);
		bpf_map_delete_elem(&hf_flows, &fk);
		bpf_map_delete_elem(&hf_flows_syn, &fk); /* a SYN's flow waits there unshared */
	}
	return rc;
}

/* Flow-hit path (the flow must exist) + restore. */
SEC("xdp")
int hf_lb_bench_hit(struct xdp_md *ctx)
{
	int rc = hf_lb_main(ctx);
	if (rc == XDP_TX)
		hf_bench_restore(ctx);
	return rc;
}

/* New-flow path + restore + deleting the flow it created, so the next repetition misses too. */
SEC("xdp")
int hf_lb_bench_miss(struct xdp_md *ctx)
{
	return hf_bench_new_flow(ctx, 0);
}

/* New-flow path + restore, then the frame's source port is bumped so that the next repetition is
 * another new flow. Unlike hf_lb_bench_miss nothing is deleted: the flows stay in the map (the
 * bench removes them between rounds, or fills the map first to measure inserts that evict). */
SEC("xdp")
int hf_lb_bench_miss_next(struct xdp_md *ctx)
{
	return hf_bench_new_flow(ctx, 1);
}

/* The floor, measured by the same method: a no-op. */
SEC("xdp")
int hf_bench_noop(struct xdp_md *ctx)
{
	return XDP_PASS;
}

/* The undo overhead alone, to subtract: grow the head by 28 bytes, write an Ethernet header
 * there as hf_lb would, then hf_bench_restore. */
SEC("xdp")
int hf_bench_undo_only(struct xdp_md *ctx)
{
	if (hf_bench_move_eth(ctx, -HF_ENCAP_OVERHEAD))
		return XDP_ABORTED;
	hf_bench_restore(ctx);
	return XDP_TX;
}

/* ---- IPv6 (lb6.h), measured beside IPv4 by bench/_datapath6.ts. */
#include "lb6.h"

/* Strips what hf_lb's IPv6 path added — 48 bytes after an outer IPv6 header, 28 after an outer
 * IPv4 one — and restores the original Ethernet header, type IPv6. */
static __always_inline void hf_bench6_restore(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return;
	int overhead = eth->h_proto == bpf_htons(HF_ETH_P_IPV6) ? HF_ENCAP6_OVERHEAD
								: HF_ENCAP_OVERHEAD;
	if (hf_bench_move_eth(ctx, overhead))
		return;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return;
	eth->h_proto = bpf_htons(HF_ETH_P_IPV6);
}

/* The IPv6 new-flow path undone, as hf_bench_new_flow: restore, then delete the flow made (the
 * same key next time) or, with next_key, bump the source port (another key next time). */
static __always_inline int hf_bench6_new_flow(struct xdp_md *ctx, int next_key)
{
	int rc = hf_lb_dispatch(ctx);
	if (rc != XDP_TX)
		return rc;
	hf_bench6_restore(ctx);
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct hf_pkt6 p = {};
	if ((void *)data + sizeof(struct ethhdr) > data_end ||
	    hf_parse6(data, data_end, &p) != HF_PARSE6_L4)
		return rc;
	if (next_key) {
		__be16 *ports = p.l4;
		ports[0] = bpf_htons(bpf_ntohs(p.sport) + 1);
	} else {
		struct flow_key6 fk HF_ALIGNED = {.sport = p.sport, .dport = p.dport, .proto = p.proto};
		__builtin_memcpy(fk.saddr, &p.ip6->saddr, 16);
		__builtin_memcpy(fk.daddr, &p.ip6->daddr, 16);
		bpf_map_delete_elem(&hf_flows6, &fk);
		bpf_map_delete_elem(&hf_flows_syn6, &fk); /* a SYN's flow waits there unshared */
	}
	return rc;
}

/* IPv6 flow-hit path (the flow must exist) + restore; through hf_lb's dispatch. */
SEC("xdp")
int hf_lb6_bench_hit(struct xdp_md *ctx)
{
	int rc = hf_lb_dispatch(ctx);
	if (rc == XDP_TX)
		hf_bench6_restore(ctx);
	return rc;
}

/* IPv6 new-flow path + restore + deleting the flow it made. */
SEC("xdp")
int hf_lb6_bench_miss(struct xdp_md *ctx)
{
	return hf_bench6_new_flow(ctx, 0);
}

/* IPv6 new-flow path + restore, then a new source port: another new flow every repetition. */
SEC("xdp")
int hf_lb6_bench_miss_next(struct xdp_md *ctx)
{
	return hf_bench6_new_flow(ctx, 1);
}
