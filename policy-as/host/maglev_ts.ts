/**
 * The Maglev fill in plain TypeScript, step for step the algorithm of
 * `policy-as/assembly/index.ts`: the benchmark's baseline and the reference the WASM module's
 * tables are checked against (they must be identical).
 *
 * Populate (Eisenbud et al., NSDI'16): backend k walks its permutation
 * `offset_k + j * skip_k (mod M)`, `offset = keyHash1 % M`, `skip = keyHash2 % (M - 1) + 1`,
 * taking the first empty slot on its turn. Backends are first sorted by (keyHash1, keyHash2) so
 * input order does not matter. Weights: in round r a backend of weight w has had
 * floor(r * w / maxWeight) turns (the heaviest one turn per round). The walk's tail is replaced
 * by a direct search that yields the same slots (see {@link maglevFill}).
 *
 * @module
 */
import { encodeMaglevInput, type MaglevBackend, type MaglevBuilder } from "./maglev_input.ts";

/** Slots left empty when the fill switches from walking to the direct search: ~sqrt(M). */
export function tailThreshold(m: number): number {
  const r = Math.floor(Math.sqrt(m));
  return r < 8 ? 8 : r;
}

/** Inverse of `a` modulo the prime `m` (extended Euclid); `a` in 1..m-1. */
export function modInverse(a: number, m: number): number {
  let t = 0, newT = 1, r = m, newR = a;
  while (newR !== 0) {
    const q = Math.floor(r / newR);
    [t, newT] = [newT, t - q * newT];
    [r, newR] = [newR, r - q * newR];
  }
  return t < 0 ? t + m : t;
}

/**
 * Fills `table` (length M, zeroed here) from ABI records (`3 * n` u32 of
 * `{keyHash1, keyHash2, weight}`). Returns the number of backends used (weight > 0).
 * Inputs must already be valid ({@link encodeMaglevInput}).
 *
 * Occupancy is a bitmap; once at most {@link tailThreshold} slots are empty, a backend finds its
 * next preference directly — the empty slot e with the smallest `(e - pos) * skip^-1 mod M`,
 * which is the slot the classic walk would reach first — instead of walking.
 *
 * @throws {RangeError} when two backends share a key hash.
 */
export function maglevFill(records: Uint32Array, table: Uint32Array): number {
  const m = table.length;
  const n = records.length / 3;
  table.fill(0);
  const order: number[] = [];
  let maxW = 0;
  let minW = 0xffffffff;
  for (let i = 0; i < n; i++) {
    const w = records[i * 3 + 2]!;
    if (w === 0) continue;
    order.push(i);
    if (w > maxW) maxW = w;
    if (w < minW) minW = w;
  }
  const count = order.length;
  if (count === 0) return 0;
  order.sort((a, b) =>
    (records[a * 3]! - records[b * 3]!) || (records[a * 3 + 1]! - records[b * 3 + 1]!)
  );
  const pos = new Uint32Array(count);
  const skip = new Uint32Array(count);
  const weight = new Uint32Array(count);
  const idx = new Uint32Array(count);
  const target = new Float64Array(count);
  const inv = new Uint32Array(count);
  const bitmap = new Uint32Array((m + 31) >>> 5);
  const tail = tailThreshold(m);
  const empty = new Uint32Array(tail + 1);
  for (let k = 0; k < count; k++) {
    const i = order[k]!;
    const h1 = records[i * 3]!;
    const h2 = records[i * 3 + 1]!;
    if (k > 0) {
      const p = order[k - 1]!;
      if (records[p * 3] === h1 && records[p * 3 + 1] === h2) {
        throw new RangeError(
          `Cannot build Maglev table: backends #${p} and #${i} have the same key hash`,
        );
      }
    }
    pos[k] = h1 % m;
    skip[k] = (h2 % (m - 1)) + 1;
    weight[k] = records[i * 3 + 2]!;
    idx[k] = i + 1;
    target[k] = maxW;
  }

  let filled = 0;
  let inTail = false;
  let emptyCount = 0;
  const takeNext = (k: number): void => {
    let c = pos[k]!;
    const s = skip[k]!;
    if (!inTail) {
      for (;;) {
        const w = bitmap[c >>> 5]!;
        const bit = 1 << (c & 31);
        if ((w & bit) === 0) {
          bitmap[c >>> 5] = w | bit;
          break;
        }
        c += s;
        c = c >= m ? c - m : c;
      }
    } else {
      let iv = inv[k]!;
      if (iv === 0) iv = inv[k] = modInverse(s, m);
      let best = Infinity;
      let bestI = 0;
      for (let i = 0; i < emptyCount; i++) {
        const e = empty[i]!;
        const j = ((e >= c ? e - c : e + m - c) * iv) % m; // < 2^35: exact in a double
        if (j < best) {
          best = j;
          bestI = i;
        }
      }
      c = empty[bestI]!;
      empty[bestI] = empty[--emptyCount]!;
    }
    table[c] = idx[k]!;
    c += s;
    if (c >= m) c -= m;
    pos[k] = c;
    filled++;
    if (!inTail && m - filled <= tail && filled < m) {
      // List the empty slots a bitmap word at a time; inverses come lazily (0 = not yet).
      for (let w = 0; w < bitmap.length; w++) {
        let free = ~bitmap[w]! >>> 0;
        while (free !== 0) {
          const c = (w << 5) + (31 - Math.clz32(free & -free));
          free &= free - 1;
          if (c >= m) break;
          empty[emptyCount++] = c;
        }
      }
      inTail = true;
    }
  };

  if (minW === maxW) {
    for (;;) {
      for (let k = 0; k < count; k++) {
        takeNext(k);
        if (filled === m) return count;
      }
    }
  }
  for (let round = 1;; round++) {
    for (let k = 0; k < count; k++) {
      // round * weight < 2^17 * 2^32: exact in a double.
      if (round * weight[k]! < target[k]!) continue;
      target[k] = target[k]! + maxW;
      takeNext(k);
      if (filled === m) return count;
    }
  }
}

/**
 * Plain-TypeScript {@link MaglevBuilder}: same tables as the WASM module, no swap, no limits.
 *
 * @example
 * ```ts
 * import { TsMaglevBuilder } from "./maglev_ts.ts";
 * const table = new TsMaglevBuilder().build([{ key: "a", weight: 1 }, { key: "b", weight: 1 }], 251);
 * if (table.length !== 251 || table.includes(0)) throw new Error("table not full");
 * ```
 */
export class TsMaglevBuilder implements MaglevBuilder {
  build(backends: readonly MaglevBackend[], m: number): Uint32Array {
    const records = encodeMaglevInput(backends, m);
    const table = new Uint32Array(m);
    maglevFill(records, table);
    return table;
  }
}
