/**
 * Backend key → two independent 32-bit hashes (Maglev's offset and skip sources).
 *
 * `keyHash1 = murmur3_32(utf8(key), 0x686f6c64)` ("hold"), `keyHash2 = murmur3_32(utf8(key),
 * 0x66617374)` ("fast"). Every LB node must hash keys the same way; this is part of the policy
 * ABI's input, not of the module, so a swapped module cannot change it.
 *
 * @module
 */

/** Seed of the offset hash. */
export const KEY_SEED_OFFSET = 0x686f6c64;
/** Seed of the skip hash. */
export const KEY_SEED_SKIP = 0x66617374;

const encoder = new TextEncoder();

/** MurmurHash3 x86 32-bit of `bytes` with `seed`; u32 result. */
export function murmur3_32(bytes: Uint8Array, seed: number): number {
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  let h = seed >>> 0;
  const len = bytes.length;
  const blocks = len & ~3;
  for (let i = 0; i < blocks; i += 4) {
    let k = (bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24)) >>>
      0;
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  const rem = len & 3;
  if (rem > 0) {
    let k = 0;
    if (rem === 3) k ^= bytes[blocks + 2]! << 16;
    if (rem >= 2) k ^= bytes[blocks + 1]! << 8;
    k ^= bytes[blocks]!;
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
  }
  h ^= len;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const scratch = new Uint8Array(1024);
const cache = new Map<string, readonly [number, number]>();
const CACHE_MAX = 1 << 16;

/**
 * The two Maglev key hashes of a backend key: `[offsetHash, skipHash]`. Memoized (up to 65,536
 * keys, then the memo starts over): the controller rebuilds tables from mostly the same keys.
 */
export function backendKeyHashes(key: string): readonly [number, number] {
  const hit = cache.get(key);
  if (hit) return hit;
  let bytes: Uint8Array;
  if (key.length * 3 <= scratch.length) {
    const { written } = encoder.encodeInto(key, scratch);
    bytes = scratch.subarray(0, written);
  } else {
    bytes = encoder.encode(key);
  }
  const hashes = [murmur3_32(bytes, KEY_SEED_OFFSET), murmur3_32(bytes, KEY_SEED_SKIP)] as const;
  if (cache.size >= CACHE_MAX) cache.clear();
  cache.set(key, hashes);
  return hashes;
}
