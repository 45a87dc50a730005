/* SPDX-License-Identifier: Apache-2.0 */
/* The flow hash of docs/contracts.md (Linux jhash_3words / jhash_1word). Must equal
 * policy-as's implementation bit for bit; tests/bpf/flow_hash_parity_test.ts proves it. */
#ifndef HF_FLOW_HASH_H
#define HF_FLOW_HASH_H

#include <linux/types.h>

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

#endif
