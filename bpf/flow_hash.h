/* SPDX-License-Identifier: Apache-2.0 */
/* The flow hash of docs/contracts.md (Linux jhash_3words / jhash_1word). Must equal
 * policy-as's implementation bit for bit; tests/bpf/flow_hash_parity_test.ts proves it. */
#ifndef HF_FLOW_HASH_H
#define HF_FLOW_HASH_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>

#define HF_JHASH_INITVAL 0xdeadbeef

static __always_inline __u32 hf_rol32(__u32 x, int k)
{
	return (x << k) | (x >> (32 - k));
}

/* jhash "final" mix; returns c. */
static __always_inline __u32 hf_jhash_final(__u32 a, __u32 b, __u32 c)
{
	c ^= b; c -= hf_rol32(b, 14);
	a ^= c; a -= hf_rol32(c, 11);
	b ^= a; b -= hf_rol32(a, 25);
	c ^= b; c -= hf_rol32(b, 16);
	a ^= c; a -= hf_rol32(c, 4);
	b ^= a; b -= hf_rol32(a, 14);
	c ^= b; c -= hf_rol32(b, 24);
	return c;
}

static __always_inline __u32 hf_jhash_3words(__u32 a, __u32 b, __u32 c, __u32 initval)
{
	__u32 iv = initval + HF_JHASH_INITVAL + (3 << 2);
	return hf_jhash_final(a + iv, b + iv, c + iv);
}

static __always_inline __u32 hf_jhash_1word(__u32 a, __u32 initval)
{
	__u32 iv = initval + HF_JHASH_INITVAL + (1 << 2);
	return hf_jhash_final(a + iv, iv, iv);
}

/* Five-tuple flow hash; all arguments host order. */
static __always_inline __u32 hf_flow_hash_5t(__u32 saddr, __u32 daddr, __u16 sport, __u16 dport,
					     __u8 proto, __u32 seed)
{
	return hf_jhash_3words(saddr, daddr, ((__u32)sport << 16) | dport, seed ^ proto);
}

/* Client-IP flow hash (affinity per client address); host order. */
static __always_inline __u32 hf_flow_hash_client(__u32 saddr, __u32 seed)
{
	return hf_jhash_1word(saddr, seed);
}

/* Linux __jhash_mix (include/linux/jhash.h), used by jhash2 for each full group of 3 words. */
static __always_inline void hf_jhash_mix(__u32 *a, __u32 *b, __u32 *c)
{
	*a -= *c; *a ^= hf_rol32(*c, 4);  *c += *b;
	*b -= *a; *b ^= hf_rol32(*a, 6);  *a += *c;
	*c -= *b; *c ^= hf_rol32(*b, 8);  *b += *a;
	*a -= *c; *a ^= hf_rol32(*c, 16); *c += *b;
	*b -= *a; *b ^= hf_rol32(*a, 19); *a += *c;
	*c -= *b; *c ^= hf_rol32(*b, 4);  *b += *a;
}

/* IPv6 five-tuple flow hash (docs/contracts.md "Flow hash", IPv6): Linux jhash2 over ten words
 * with initval = seed — saddr as 4 words, daddr as 4 words (each word the host-order value of 4
 * address bytes), (sport << 16) | dport, proto. Addresses are taken as they are in the packet
 * (network order), ports and proto host order. */
static __always_inline __u32 hf_flow_hash6_5t(const __be32 *saddr, const __be32 *daddr,
					      __u16 sport, __u16 dport, __u8 proto, __u32 seed)
{
	__u32 a, b, c;
	a = b = c = HF_JHASH_INITVAL + (10 << 2) + seed;
	a += bpf_ntohl(saddr[0]); b += bpf_ntohl(saddr[1]); c += bpf_ntohl(saddr[2]);
	hf_jhash_mix(&a, &b, &c);
	a += bpf_ntohl(saddr[3]); b += bpf_ntohl(daddr[0]); c += bpf_ntohl(daddr[1]);
	hf_jhash_mix(&a, &b, &c);
	a += bpf_ntohl(daddr[2]); b += bpf_ntohl(daddr[3]); c += ((__u32)sport << 16) | dport;
	hf_jhash_mix(&a, &b, &c);
	a += proto;
	return hf_jhash_final(a, b, c);
}

/* IPv6 client-IP flow hash: Linux jhash2 over saddr's 4 words with initval = seed. */
static __always_inline __u32 hf_flow_hash6_client(const __be32 *saddr, __u32 seed)
{
	__u32 a, b, c;
	a = b = c = HF_JHASH_INITVAL + (4 << 2) + seed;
	a += bpf_ntohl(saddr[0]); b += bpf_ntohl(saddr[1]); c += bpf_ntohl(saddr[2]);
	hf_jhash_mix(&a, &b, &c);
	a += bpf_ntohl(saddr[3]);
	return hf_jhash_final(a, b, c);
}

#endif
