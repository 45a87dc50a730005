/**
 * Maglev lookup-table construction behind a narrow interface, so the policy module's WASM
 * builder (policy-as/) can replace the reference implementation here.
 *
 * Reference algorithm (Eisenbud et al., "Maglev", NSDI 2016, with weights):
 * - per backend, `offset = h1(key) % M` and `skip = h2(key) % (M - 1) + 1`, where
 *   `h1 = murmur3_32(key, 0)` and `h2 = murmur3_32(key, 0x9e3779b9)` over the key's UTF-8 bytes;
 *   its preference list is `offset, offset + skip, offset + 2·skip, ... (mod M)`;
 * - rounds over the backends in the given order; each round a backend earns `weight` credit
 *   and claims its next free preferred slot once per `maxWeight` credit;
 * - until all M slots are claimed. Weight-0 backends claim nothing.
 *
 * Every LB node must compute the same table for the same input, so callers pass backends in a
 * canonical order (sorted by key) and an implementation may not depend on anything else.
 * Golden vectors: controller/testdata/maglev_vectors.json.
 *
 * @module
 */

/** One backend as the builder sees it. */
export interface MaglevBackend {
  /** Stable identity, the same on every node (`IP:PORT`). */
  readonly key: string;
  /** Relative weight (integer ≥ 0). */
  readonly weight: number;
}

/** Builds a Maglev table: `M` slots, each an index into `backends` plus one (0 = unset). */
export interface MaglevBuilder {
  build(backends: readonly MaglevBackend[], m: number): Uint32Array;
}

/** Default table size: prime, ≥ 100 × a typical backend count. */
export const DEFAULT_MAGLEV_SIZE = 1021;

const encoder = new TextEncoder();

/** MurmurHash3 (x86, 32-bit) of a string's UTF-8 bytes. */
export function murmur3(key: string, seed: number): number {
  let h = seed >>> 0;
  let bytes: Uint8Array | null = null;
  let len = key.length;
  for (let i = 0; i < key.length; i++) {
    if (key.charCodeAt(i) > 0x7f) {
      bytes = encoder.encode(key);
      len = bytes.length;
      break;
    }
  }
  const at = (i: number) => (bytes === null ? key.charCodeAt(i) : bytes[i]!);
  const c1 = 0xcc9e2d51, c2 = 0x1b873593;
  const nblocks = len >> 2;
  for (let b = 0; b < nblocks; b++) {
    const i = b << 2;
    let k = at(i) | (at(i + 1) << 8) | (at(i + 2) << 16) | (at(i + 3) << 24);
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  const tail = nblocks << 2, rest = len & 3;
  if (rest > 0) {
    let k = 0;
    if (rest === 3) k ^= at(tail + 2) << 16;
    if (rest >= 2) k ^= at(tail + 1) << 8;
    k ^= at(tail);
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

/** Throws unless `m` is a prime in 3..2^24 (the datapath's table size bounds). */
export function checkMaglevSize(m: number): void {
  if (!Number.isInteger(m) || m < 3 || m > 1 << 24) {
    throw new RangeError(`Invalid Maglev table size ${m}: must be an integer in 3..16777216`);
  }
  for (let d = 2; d * d <= m; d++) {
    if (m % d === 0) throw new RangeError(`Invalid Maglev table size ${m}: must be prime (divisible by ${d})`);
  }
}

/** The plain-TypeScript reference builder (the default). */
export const referenceMaglev: MaglevBuilder = {
  build(backends: readonly MaglevBackend[], m: number): Uint32Array {
    const table = new Uint32Array(m);
    const n = backends.length;
    let maxW = 0;
    for (const b of backends) if (b.weight > maxW) maxW = b.weight;
    if (n === 0 || maxW <= 0) return table;
    const pos = new Uint32Array(n), skip = new Uint32Array(n), credit = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const key = backends[i]!.key;
      pos[i] = murmur3(key, 0) % m;
      skip[i] = (murmur3(key, 0x9e3779b9) % (m - 1)) + 1;
    }
    let filled = 0;
    for (;;) {
      for (let i = 0; i < n; i++) {
        const w = backends[i]!.weight;
        if (w <= 0) continue;
        credit[i]! += w;
        while (credit[i]! >= maxW) {
          credit[i]! -= maxW;
          let c = pos[i]!;
          while (table[c] !== 0) {
            c += skip[i]!;
            if (c >= m) c -= m;
          }
          table[c] = i + 1;
          c += skip[i]!;
          pos[i] = c >= m ? c - m : c;
          if (++filled === m) return table;
        }
      }
    }
  },
};
