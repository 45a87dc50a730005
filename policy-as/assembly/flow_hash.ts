// Flow hash of the policy module (re-exported by index.ts); docs/contracts.md.
// Linux jhash_3words / jhash_1word, exactly as docs/contracts.md.

const JHASH_INITVAL: u32 = 0xdeadbeef;

@inline
function jhash_final(a: u32, b: u32, c: u32): u32 {
  c ^= b; c -= rotl<u32>(b, 14);
  a ^= c; a -= rotl<u32>(c, 11);
  b ^= a; b -= rotl<u32>(a, 25);
  c ^= b; c -= rotl<u32>(b, 16);
  a ^= c; a -= rotl<u32>(c, 4);
  b ^= a; b -= rotl<u32>(a, 14);
  c ^= b; c -= rotl<u32>(b, 24);
  return c;
}

export function flow_hash_5tuple(saddr: u32, daddr: u32, sport: u32, dport: u32, proto: u32, seed: u32): u32 {
  const iv: u32 = (seed ^ proto) + JHASH_INITVAL + (3 << 2);
  return jhash_final(saddr + iv, daddr + iv, (((sport & 0xffff) << 16) | (dport & 0xffff)) + iv);
}

export function flow_hash_client_ip(saddr: u32, seed: u32): u32 {
  const iv: u32 = seed + JHASH_INITVAL + (1 << 2);
  return jhash_final(saddr + iv, iv, iv);
}

// IPv6 (docs/contracts.md "Flow hash", IPv6): Linux jhash2 over u32 words with initval = seed.
// An address is 4 words, each the big-endian value of 4 of its bytes.

// jhash2's state between mixes.
let ja: u32 = 0;
let jb: u32 = 0;
let jc: u32 = 0;

// Linux __jhash_mix(a, b, c) after adding the next three words.
@inline
function jhash_mix(k0: u32, k1: u32, k2: u32): void {
  let a = ja + k0, b = jb + k1, c = jc + k2;
  a -= c; a ^= rotl<u32>(c, 4);  c += b;
  b -= a; b ^= rotl<u32>(a, 6);  a += c;
  c -= b; c ^= rotl<u32>(b, 8);  b += a;
  a -= c; a ^= rotl<u32>(c, 16); c += b;
  b -= a; b ^= rotl<u32>(a, 19); a += c;
  c -= b; c ^= rotl<u32>(b, 4);  b += a;
  ja = a; jb = b; jc = c;
}

// jhash2([s0..s3, d0..d3, (sport << 16) | dport, proto], 10, seed)
export function flow_hash6_5tuple(
  s0: u32, s1: u32, s2: u32, s3: u32, d0: u32, d1: u32, d2: u32, d3: u32,
  sport: u32, dport: u32, proto: u32, seed: u32,
): u32 {
  ja = jb = jc = JHASH_INITVAL + (10 << 2) + seed;
  jhash_mix(s0, s1, s2);
  jhash_mix(s3, d0, d1);
  jhash_mix(d2, d3, ((sport & 0xffff) << 16) | (dport & 0xffff));
  return jhash_final(ja + proto, jb, jc);
}

// jhash2([s0..s3], 4, seed)
export function flow_hash6_client_ip(s0: u32, s1: u32, s2: u32, s3: u32, seed: u32): u32 {
  ja = jb = jc = JHASH_INITVAL + (4 << 2) + seed;
  jhash_mix(s0, s1, s2);
  return jhash_final(ja + s3, jb, jc);
}
