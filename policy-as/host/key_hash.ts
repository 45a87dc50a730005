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
const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

function mixBlock(h: number, k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  h ^= Math.imul(k, C2);
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

function mixTail(h: number, k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  return h ^ Math.imul(k, C2);
}

function finalize(h: number, len: number): number {
  h ^= len;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** MurmurHash3 x86 32-bit of `bytes` with `seed`; u32 result. */
export function murmur3_32(bytes: Uint8Array, seed: number): number {
  let h = seed | 0;
  const len = bytes.length;
  const blocks = len & ~3;
  for (let i = 0; i < blocks; i += 4) {
    h = mixBlock(
      h,
      bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24),
    );
  }
  const rem = len & 3;
  if (rem > 0) {
    let k = bytes[blocks]!;
    if (rem >= 2) k |= bytes[blocks + 1]! << 8;
    if (rem === 3) k |= bytes[blocks + 2]! << 16;
    h = mixTail(h, k);
  }
  return finalize(h, len);
}

/**
 * MurmurHash3 x86 32-bit of a string's UTF-8 bytes. ASCII strings (every address key) are hashed
 * straight from their UTF-16 code units, which equal their UTF-8 bytes: no encoding, no copy.
 */
export function murmur3String(key: string, seed: number): number {
  const len = key.length;
  for (let i = 0; i < len; i++) {
    if (key.charCodeAt(i) > 0x7f) return murmur3_32(encoder.encode(key), seed);
  }
  let h = seed | 0;
  const blocks = len & ~3;
  for (let i = 0; i < blocks; i += 4) {
    h = mixBlock(
      h,
      key.charCodeAt(i) | (key.charCodeAt(i + 1) << 8) | (key.charCodeAt(i + 2) << 16) |
        (key.charCodeAt(i + 3) << 24),
    );
  }
  const rem = len & 3;
  if (rem > 0) {
    let k = key.charCodeAt(blocks);
    if (rem >= 2) k |= key.charCodeAt(blocks + 1) << 8;
    if (rem === 3) k |= key.charCodeAt(blocks + 2) << 16;
    h = mixTail(h, k);
  }
  return finalize(h, len);
}

/**
 * The two Maglev key hashes of a backend key: `[offsetHash, skipHash]`. Not memoized: hashing an
 * ASCII key is cheaper than a map lookup of it, and a memo retained ~550 bytes per service in the
 * control-plane benchmark.
 */
export function backendKeyHashes(key: string): readonly [number, number] {
  return [murmur3String(key, KEY_SEED_OFFSET), murmur3String(key, KEY_SEED_SKIP)];
}
