// SPDX-License-Identifier: Apache-2.0
/* Packet generator for bench/datapath_pps.ts: run by BPF_PROG_TEST_RUN with
 * BPF_F_TEST_XDP_LIVE_FRAMES on a prebuilt Ethernet+IPv4+UDP frame (no IP options, UDP checksum
 * 0). Live-frames pages are recycled without resetting their contents, and whoever handled a frame
 * downstream (the router rewrites MACs and TTL in place, hf_lb encapsulates in place) leaves its
 * edits there; so each run first copies the 42 header bytes from hf_gen_tmpl, then writes the UDP
 * source port base + (per-CPU sequence % flows), so the frames spread over `flows` five-tuples,
 * and returns XDP_TX: the kernel transmits the frame out of the interface given as
 * ingress_ifindex (on a veth: to the peer, which needs a native XDP program). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

/* [0] first source port, [1] number of flows (0: leave the port as built). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} hf_gen_cfg SEC(".maps");

#define HF_GEN_HDR (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))

struct hf_gen_tmpl {
	__u8 bytes[HF_GEN_HDR];
};

/* [0] the Ethernet+IPv4+UDP header every generated frame starts with. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hf_gen_tmpl);
} hf_gen_tmpl SEC(".maps");

/* [0] frames generated on this CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hf_gen_seq SEC(".maps");

SEC("xdp")
int hf_xdp_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct udphdr *udp = data + sizeof(struct ethhdr) + sizeof(struct iphdr);
	__u32 k0 = 0, k1 = 1;
	__u32 *base, *flows;
	struct hf_gen_tmpl *tmpl;
	__u64 *seq;

	if (data + HF_GEN_HDR > data_end)
		return XDP_DROP;
	seq = bpf_map_lookup_elem(&hf_gen_seq, &k0);
	base = bpf_map_lookup_elem(&hf_gen_cfg, &k0);
	flows = bpf_map_lookup_elem(&hf_gen_cfg, &k1);
	tmpl = bpf_map_lookup_elem(&hf_gen_tmpl, &k0);
	if (!seq || !base || !flows || !tmpl)
		return XDP_DROP;
	__builtin_memcpy(data, tmpl->bytes, HF_GEN_HDR);
	if (*flows)
		udp->source = bpf_htons((__u16)(*base + (__u32)(*seq % *flows)));
	*seq += 1;
	return XDP_TX;
}
