/**
 * Maglev lookup-table construction behind a narrow interface, so the policy module's WASM
 * builder (`policy-as/host/wasm_maglev_builder.ts`) can replace the reference here.
 *
 * Reference algorithm — the same tables as the policy module (checked against its golden
 * vectors, `policy-as/vectors/maglev.json`):
 * - key hashes `h1 = murmur3_32(utf8(key), 0x686f6c64)`, `h2 = murmur3_32(utf8(key), 0x66617374)`;
 *   `offset = h1 % M`, `skip = h2 % (M - 1) + 1`; preference list `offset + j·skip (mod M)`;
 * - backends with weight > 0, sorted by (h1, h2), so input order does not matter;
 * - equal weights: round robin, each backend taking its next free preferred slot per turn;
 *   otherwise in round r a backend of weight w has had floor(r·w / maxWeight) turns;
 * - until all M slots are taken. M is a prime in 251..131071.
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
  /**
   * `out`, if given (length `m`), may be filled and returned instead of a new array — typed
   * arrays of this size are allocated outside the JS heap and cost microseconds each. A builder
   * may ignore it.
   */
  build(backends: readonly MaglevBackend[], m: number, out?: Uint32Array): Uint32Array;
}

/** Default table size: prime, ≥ 100 × a typical backend count. */
export const DEFAULT_MAGLEV_SIZE = 1021;
/** Smallest and largest table sizes the datapath and the policy module accept. */
export const MAGLEV_M_MIN = 251;
export const MAGLEV_M_MAX = 131071;
// Key hashes and their seeds are the policy module's input contract: one implementation.
import { KEY_SEED_OFFSET, KEY_SEED_SKIP, murmur3String } from "../policy-as/host/key_hash.ts";
export { KEY_SEED_OFFSET, KEY_SEED_SKIP };
/** MurmurHash3 (x86, 32-bit) of a string's UTF-8 bytes (`policy-as/host/key_hash.ts`). */
export const murmur3: (key: string, seed: number) => number = murmur3String;

/** Throws unless `m` is a prime in 251..131071. */
export function checkMaglevSize(m: number): void {
  if (!Number.isInteger(m) || m < MAGLEV_M_MIN || m > MAGLEV_M_MAX) {
    throw new RangeError(
      `Invalid Maglev table size ${m}: must be a prime in ${MAGLEV_M_MIN}..${MAGLEV_M_MAX}`,
    );
  }
  for (let d = 2; d * d <= m; d++) {
    if (m % d === 0) {
      throw new RangeError(`Invalid Maglev table size ${m}: must be prime (divisible by ${d})`);
    }
  }
}

/** The plain-TypeScript reference builder (the default). */
export const referenceMaglev: MaglevBuilder = {
  build(backends: readonly MaglevBackend[], m: number, out?: Uint32Array): Uint32Array {
    checkMaglevSize(m);
    if (backends.length > m) {
      throw new RangeError(
        `Cannot build Maglev table: ${backends.length} backends exceed table size M=${m}`,
      );
    }
    const table = out !== undefined && out.length === m ? out.fill(0) : new Uint32Array(m);
    const order: number[] = [];
    const h1s = new Uint32Array(backends.length), h2s = new Uint32Array(backends.length);
    let maxW = 0, minW = Infinity;
    for (let i = 0; i < backends.length; i++) {
      const b = backends[i]!;
      if (!Number.isInteger(b.weight) || b.weight < 0 || b.weight > 0xffffffff) {
        throw new RangeError(
          `Cannot build Maglev table: backend "${b.key}" has weight ${b.weight}`,
        );
      }
      h1s[i] = murmur3(b.key, KEY_SEED_OFFSET);
      h2s[i] = murmur3(b.key, KEY_SEED_SKIP);
      if (b.weight === 0) continue;
      order.push(i);
      if (b.weight > maxW) maxW = b.weight;
      if (b.weight < minW) minW = b.weight;
    }
    const n = order.length;
    if (n === 0) return table;
    order.sort((a, b) => (h1s[a]! - h1s[b]!) || (h2s[a]! - h2s[b]!));
    const pos = new Uint32Array(n), skip = new Uint32Array(n), target = new Float64Array(n);
    for (let k = 0; k < n; k++) {
      const i = order[k]!;
      if (k > 0 && h1s[i] === h1s[order[k - 1]!] && h2s[i] === h2s[order[k - 1]!]) {
        throw new RangeError(
          `Cannot build Maglev table: backend key "${backends[i]!.key}" appears twice`,
        );
      }
      pos[k] = h1s[i]! % m;
      skip[k] = (h2s[i]! % (m - 1)) + 1;
      target[k] = maxW;
    }
    // Inlined turn-taking: each turn a backend takes its next free preferred slot.
    let filled = 0;
    const equal = minW === maxW;
    for (let round = 1;; round++) {
      for (let k = 0; k < n; k++) {
        if (!equal) {
          if (round * backends[order[k]!]!.weight < target[k]!) continue;
          target[k] = target[k]! + maxW;
        }
        let c = pos[k]!;
        const s = skip[k]!;
        while (table[c] !== 0) {
          c += s;
          if (c >= m) c -= m;
        }
        table[c] = order[k]! + 1;
        c += s;
        pos[k] = c >= m ? c - m : c;
        if (++filled === m) return table;
      }
    }
  },
};
