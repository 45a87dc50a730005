// SPDX-License-Identifier: Apache-2.0
/* Test-only: a program whose pinned maps change layout between two builds, for the migration
 * tests (tests/bpf/map_migrate_test.ts). bpf/build.ts builds it twice: migrate_probe.o (v1) and,
 * with -DHF_PROBE_V2, migrate_probe_v2.o, where hf_probe_hash's value gains a field,
 * hf_probe_lru doubles its max_entries and hf_probe_pcpu's value widens; hf_probe_same is the
 * same in both (reused, never copied). Per frame: counts by IPv4 source address, passes it. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct probe_value {
	__u64 packets;
#ifdef HF_PROBE_V2
	__u64 bytes; /* added in v2: zero in entries carried over from v1 */
#endif
};

#ifdef HF_PROBE_V2
#define HF_PROBE_LRU 4096
typedef __u64 probe_pcpu_t;
#else
#define HF_PROBE_LRU 1024
typedef __u32 probe_pcpu_t;
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct probe_value);
} hf_probe_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HF_PROBE_LRU);
	__type(key, __u32);
	__type(value, __u64);
} hf_probe_lru SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, probe_pcpu_t);
} hf_probe_pcpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} hf_probe_same SEC(".maps");

SEC("xdp")
int hf_migrate_probe(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0, src;
	if (data + 30 > data_end)
		return XDP_PASS;
	src = *(__u32 *)(data + 26); /* IPv4 source of an Ethernet frame */
	struct probe_value *v = bpf_map_lookup_elem(&hf_probe_hash, &src);
	if (v) {
		__sync_fetch_and_add(&v->packets, 1);
#ifdef HF_PROBE_V2
		__sync_fetch_and_add(&v->bytes, data_end - data);
#endif
	} else {
		struct probe_value nv = { .packets = 1 };
#ifdef HF_PROBE_V2
		nv.bytes = data_end - data;
#endif
		bpf_map_update_elem(&hf_probe_hash, &src, &nv, BPF_NOEXIST);
	}
	__u64 *n = bpf_map_lookup_elem(&hf_probe_lru, &src);
	if (n) {
		__sync_fetch_and_add(n, 1);
	} else {
		__u64 one = 1;
		bpf_map_update_elem(&hf_probe_lru, &src, &one, BPF_NOEXIST);
	}
	probe_pcpu_t *c = bpf_map_lookup_elem(&hf_probe_pcpu, &zero);
	if (c)
		*c += 1;
	__u64 *s = bpf_map_lookup_elem(&hf_probe_same, &zero);
	if (s)
		__sync_fetch_and_add(s, 1);
	return XDP_PASS;
}
