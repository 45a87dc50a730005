// SPDX-License-Identifier: Apache-2.0
/* Spoofed SYN generator for bench/synflood.ts: run by BPF_PROG_TEST_RUN with
 * BPF_F_TEST_XDP_LIVE_FRAMES on a prebuilt Ethernet+IPv4+TCP SYN frame (no options, checksums
 * correct for the template). Each run copies the 54 header bytes from hf_syn_tmpl (live-frames
 * pages keep what the router and the LB wrote into them), then draws a random source address
 * (base | random & mask, hf_syn_cfg) and source port, fixes both checksums incrementally
 * (RFC 1624), and returns XDP_TX: the frame leaves by the interface given as ingress_ifindex. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

/* [0] source address base, [1] mask of the random part (both network order). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} hf_syn_cfg SEC(".maps");

#define HF_SYN_HDR (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct tcphdr))

struct hf_syn_tmpl {
	__u8 bytes[HF_SYN_HDR];
};

/* [0] the Ethernet+IPv4+TCP header every SYN starts from. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hf_syn_tmpl);
} hf_syn_tmpl SEC(".maps");

/* One's complement sum folded to 16 bits. */
static __always_inline __u16 hf_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

/* RFC 1624 eqn. 3: the checksum `check` after 16-bit words old[0..1] became new[0..1] and the
 * word old_port became new_port (all as stored in the packet). */
static __always_inline __u16 hf_csum_replace(__u16 check, __be32 old_addr, __be32 new_addr,
					     __be16 old_port, __be16 new_port)
{
	__u32 sum = (__u16)~check;
	sum += (__u16)~(old_addr & 0xffff) + (__u16)~(old_addr >> 16);
	sum += (new_addr & 0xffff) + (new_addr >> 16);
	sum += (__u16)~old_port + new_port;
	return ~hf_fold(sum);
}

SEC("xdp")
int hf_xdp_synflood(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	struct tcphdr *tcp = (void *)(ip + 1);
	__u32 k0 = 0, k1 = 1;

	if (data + HF_SYN_HDR > data_end)
		return XDP_DROP;
	__u32 *base = bpf_map_lookup_elem(&hf_syn_cfg, &k0);
	__u32 *mask = bpf_map_lookup_elem(&hf_syn_cfg, &k1);
	struct hf_syn_tmpl *tmpl = bpf_map_lookup_elem(&hf_syn_tmpl, &k0);
	if (!base || !mask || !tmpl)
		return XDP_DROP;
	__builtin_memcpy(data, tmpl->bytes, HF_SYN_HDR);
	__u32 r = bpf_get_prandom_u32();
	__be32 old_addr = ip->saddr;
	__be32 new_addr = *base | (r & *mask);
	__be16 old_port = tcp->source;
	__be16 new_port = bpf_htons(1024 + (bpf_get_prandom_u32() % 64512));
	ip->saddr = new_addr;
	ip->check = hf_csum_replace(ip->check, old_addr, new_addr, 0, 0);
	tcp->source = new_port;
	tcp->check = hf_csum_replace(tcp->check, old_addr, new_addr, old_port, new_port);
	return XDP_TX;
}
