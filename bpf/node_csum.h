/* SPDX-License-Identifier: Apache-2.0 */
/* Node side (included by node_tc.c): checksum fixes after an address and port were rewritten in
 * place, IPv6 address comparison, and pulling headers into the linear area. Uses node_tc.c's
 * offsets (HF_L2, HF_L4_4, HF_L4_6). */
#ifndef HF_NODE_CSUM_H
#define HF_NODE_CSUM_H

/* Offset of the L4 checksum of a TCP or UDP header at l4, and the csum flags that go with it. */
static __always_inline __u32 hf_csum_off(__u32 l4, __u8 proto)
{
	return l4 + (proto == HF_IPPROTO_TCP ? offsetof(struct tcphdr, check)
					     : offsetof(struct udphdr, check));
}

static __always_inline __u64 hf_csum_flags(__u8 proto)
{
	return proto == HF_IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
}

/* Fixes the L4 checksum after the caller rewrote an IPv4 address (from → to, in the
 * pseudo-header) and a TCP/UDP port (pfrom → pto) in place. The L4 checksum goes through the
 * helpers, which handle a partial checksum (a local reply's GSO packet): the address is part of
 * the pseudo-header, the port is not. Returns 0, or -1 when a helper failed. */
static __always_inline int hf_csum4(struct __sk_buff *skb, __be32 from, __be32 to, __be16 pfrom,
				    __be16 pto, __u8 proto)
{
	__u32 csum = hf_csum_off(HF_L4_4, proto);
	__u64 f = hf_csum_flags(proto);
	if (bpf_l4_csum_replace(skb, csum, from, to, BPF_F_PSEUDO_HDR | f | sizeof(to)))
		return -1;
	if (pfrom != pto && bpf_l4_csum_replace(skb, csum, pfrom, pto, f | sizeof(pto)))
		return -1;
	return 0;
}

/* Updates the IPv4 header checksum in place for an address changed from → to (RFC 1624: the
 * header checksum is always complete, so no helper is needed). Returns -1 when the header is
 * not inside the packet (the caller checked it; the verifier wants it again). */
static __always_inline int hf_ip_csum4(struct __sk_buff *skb, __be32 from, __be32 to)
{
	struct iphdr *ip = (void *)(long)skb->data + HF_L2;
	if ((void *)(ip + 1) > (void *)(long)skb->data_end)
		return -1;
	__u32 sum = (__u16)~ip->check;
	sum += (__u16)~(from & 0xffff) + (__u16)~(from >> 16) + (to & 0xffff) + (to >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = ~sum;
	return 0;
}

/* Adds the difference between two 16-byte addresses to the checksum at csum_off. The difference
 * (a 32-bit ones' complement sum of to − from, what bpf_csum_diff returns) is summed here: one
 * helper call less, 40–50 ns of ~390 per IPv6 packet (bench/RESULTS.md "Node side"). */
static __always_inline int hf_csum_diff16(struct __sk_buff *skb, __u32 csum_off, __u8 *from,
					  __u8 *to, __u64 flags)
{
	const __u32 *f = (const void *)from, *t = (const void *)to;
	__u64 s = 0;
	for (int i = 0; i < 4; i++)
		s += (__u64)t[i] + (__u32)~f[i];
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	return bpf_l4_csum_replace(skb, csum_off, 0, (__u32)s, flags) ? -1 : 0;
}

/* As hf_csum4 for a 16-byte IPv6 address (no IP header checksum); from and to on the stack. */
static __always_inline int hf_csum6(struct __sk_buff *skb, __u8 *from, __u8 *to, __be16 pfrom,
				    __be16 pto, __u8 proto)
{
	__u32 csum = hf_csum_off(HF_L4_6, proto);
	__u64 f = hf_csum_flags(proto);
	if (hf_csum_diff16(skb, csum, from, to, BPF_F_PSEUDO_HDR | f))
		return -1;
	if (pfrom != pto && bpf_l4_csum_replace(skb, csum, pfrom, pto, f | sizeof(pto)))
		return -1;
	return 0;
}

/* Makes the first `need` bytes (or the whole packet) directly readable. */
static __always_inline void hf_pull(struct __sk_buff *skb, __u32 need)
{
	if (skb->data_end - skb->data < need)
		bpf_skb_pull_data(skb, skb->len < need ? skb->len : need);
}

/* True when two 16-byte addresses are equal. */
static __always_inline int hf_addr6_eq(const void *a, const void *b)
{
	const __u32 *x = a, *y = b;
	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

#endif
