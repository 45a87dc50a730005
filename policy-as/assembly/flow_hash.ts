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
