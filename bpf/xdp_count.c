// SPDX-License-Identifier: Apache-2.0
/* Counting XDP program for the foundation test: counts every frame and every IPv4 TCP frame,
 * then passes it. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parsing.h"

char LICENSE[] SEC("license") = "GPL";

/* [0] all frames, [1] IPv4 TCP frames, [2] bytes of all frames. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} hf_count SEC(".maps");

static __always_inline void add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&hf_count, &idx);
	if (v)
		__sync_fetch_and_add(v, n);
}

SEC("xdp")
int hf_xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct hf_pkt p = {};
	add(0, 1);
	add(2, data_end - data);
	if (hf_parse(data, data_end, &p) == HF_PARSE_L4 && p.proto == HF_IPPROTO_TCP)
		add(1, 1);
	return XDP_PASS;
}
