/* SPDX-License-Identifier: Apache-2.0 */
/* Node side (included by node_tc.c): checksum fixes after an address and port were rewritten in
 * place, IPv6 address comparison, and pulling headers into the linear area. Uses node_tc.c's
 * offsets (HF_L2, HF_L4_4, HF_L4_6). */
#ifndef HF_NODE_CSUM_H
#define HF_NODE_CSUM_H

#include <bpf/bpf_core_read.h>

/* skb->ip_summed values (include/linux/skbuff.h). */
#define HF_CSUM_NONE 0
#define HF_CSUM_UNNECESSARY 1
#define HF_CSUM_COMPLETE 2
#define HF_CSUM_PARTIAL 3

#ifdef HF_NODE_NO_KFUNC
/* node_tc_compat.o, for kernels before 6.3 (no bpf_cast_to_kern_ctx): ip_summed unknown, read as
 * COMPLETE, so every checksum goes through the helpers. */
#define hf_ip_summed(ctx) ((__u32)HF_CSUM_COMPLETE)
#else
/* The kernel's own sk_buff (kfunc, Linux 6.3+; inlined by the verifier, no call), for one field
 * __sk_buff does not show: ip_summed, relocated (CO-RE) against the running kernel's BTF. */
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
struct sk_buff___hf {
	__u8 ip_summed : 2;
} __attribute__((preserve_access_index));


static __always_inline __u32 hf_ip_summed(struct __sk_buff *ctx)
{
	struct sk_buff___hf *skb = bpf_cast_to_kern_ctx(ctx);
	return BPF_CORE_READ_BITFIELD(skb, ip_summed);
}
#endif /* HF_NODE_NO_KFUNC */

/* A ones' complement sum folded to 16 bits. */
static __always_inline __u16 hf_fold16(__u64 s)
{
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

/* The L4 checksum at off fixed in place for an address change (pseudo: the ones' complement sum of
 * new − old, pseudo-header) and a port change (l4: new − old, in the L4 header), as
 * bpf_l4_csum_replace would, without its two calls: a complete checksum (ip_summed NONE or
 * UNNECESSARY) gets both, a partial one (PARTIAL: the field holds the pseudo-header's sum, the
 * rest is summed when the packet leaves) only the pseudo-header's. UDP's "no checksum" 0 stays
 * 0 and a result of 0 is written 0xffff (BPF_F_MARK_MANGLED_0). Returns -1 for COMPLETE (the
 * helpers keep skb->csum right) or a field outside the linear data: the caller uses the helpers. */
static __always_inline int hf_csum_inline(struct __sk_buff *skb, __u32 off, __u64 pseudo, __u64 l4,
					  __u8 proto)
{
	__u32 summed = hf_ip_summed(skb);
	if (summed == HF_CSUM_COMPLETE || off > HF_L4_6 + 16)
		return -1;
	__u16 *p = (void *)(long)skb->data + off;
	if ((void *)(p + 1) > (void *)(long)skb->data_end)
		return -1;
	__u16 c = *p;
	if (proto == HF_IPPROTO_UDP && c == 0)
		return 0;
	if (summed == HF_CSUM_PARTIAL)
		c = hf_fold16((__u64)c + pseudo);
	else
		c = ~hf_fold16((__u64)(__u16)~c + pseudo + l4);
	if (proto == HF_IPPROTO_UDP && c == 0)
		c = 0xffff;
	*p = c;
	return 0;
}

/* The ones' complement sum of to − from over 16 bytes, 32 bits unfolded (as bpf_csum_diff). */
static __always_inline __u32 hf_diff16(const __u8 *from, const __u8 *to)
{
	const __u32 *f = (const void *)from, *t = (const void *)to;
	__u64 s = 0;
	for (int i = 0; i < 4; i++)
		s += (__u64)t[i] + (__u32)~f[i];
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	return s;
}

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
 * pseudo-header) and a TCP/UDP port (pfrom → pto) in place: in place by hf_csum_inline (the
 * address is part of the pseudo-header, the port is not: a partial checksum — a local reply's GSO
 * packet — takes only the address), else through the helpers (CHECKSUM_COMPLETE, whose skb->csum
 * they keep right). Returns 0, or -1 when a helper failed. */
static __always_inline int hf_csum4(struct __sk_buff *skb, __be32 from, __be32 to, __be16 pfrom,
				    __be16 pto, __u8 proto)
{
	__u32 csum = hf_csum_off(HF_L4_4, proto);
	if (!hf_csum_inline(skb, csum, (__u64)(__u32)~from + to, (__u64)(__u16)~pfrom + pto, proto))
		return 0;
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
	return bpf_l4_csum_replace(skb, csum_off, 0, hf_diff16(from, to), flags) ? -1 : 0;
}

/* As hf_csum4 for a 16-byte IPv6 address (no IP header checksum); from and to on the stack. */
static __always_inline int hf_csum6(struct __sk_buff *skb, __u8 *from, __u8 *to, __be16 pfrom,
				    __be16 pto, __u8 proto)
{
	__u32 csum = hf_csum_off(HF_L4_6, proto);
	if (!hf_csum_inline(skb, csum, hf_diff16(from, to), (__u64)(__u16)~pfrom + pto, proto))
		return 0;
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
