/**
 * The one plain-TypeScript Maglev builder: the controller's default, the WASM module's fallback,
 * the benchmark's baseline and the reference the module's tables are checked against (they must
 * be identical, slot for slot; `policy-as/vectors/maglev.json` pins both).
 *
 * Populate (Eisenbud et al., NSDI'16): backend k walks its permutation
 * `offset_k + j * skip_k (mod M)`, `offset = keyHash1 % M`, `skip = keyHash2 % (M - 1) + 1`
 * (key hashes: `key_hash.ts`), taking the first empty slot on its turn. Backends of weight > 0
 * are first sorted by (keyHash1, keyHash2) so input order does not matter. Equal weights: round
 * robin. Otherwise in round r a backend of weight w has had floor(r * w / maxWeight) turns (the
 * heaviest one turn per round). Until all M slots are taken.
 *
 * Like the WASM module (which walks until √M / 2 are left), the walk stops when √M slots are left
 * and each remaining turn picks the backend's next empty slot directly from its permutation index
 * ({@link tailTake}); the walk itself is the textbook loop over the table.
 *
 * @module
 */
import {
  duplicateKeyError,
  encodeMaglevInput,
  type MaglevBackend,
  type MaglevBuilder,
  MaglevInputError,
  singleBackendTable,
} from "./maglev_input.ts";

/** Work counters of one fill, for tests that bound the cost without timing it. */
export interface MaglevFillStats {
  /** Backends visited in weighted rounds, whether or not it was their turn (M if equal). */
  visits: number;
  /** Slots examined while walking preference lists (at least M). */
  probes: number;
}

/** Inverse of `a` modulo the prime `m` (extended Euclid); `a` in 1..m-1. */
export function modInverse(a: number, m: number): number {
  let t = 0, newT = 1, r = m, newR = a;
  while (newR !== 0) {
    const q = Math.floor(r / newR);
    const t2 = t - q * newT, r2 = r - q * newR;
    t = newT, newT = t2, r = newR, newR = r2;
  }
  return t < 0 ? t + m : t;
}

/** Empty slots left when the fill stops walking ({@link tailTake}): √M, at least 8. */
function tailSize(m: number): number {
  return Math.max(8, Math.floor(Math.sqrt(m)));
}

/**
 * The last empty slots of a fill (at most √M of them, as in the WASM module). A backend's next
 * slot is the empty one with the smallest index in its permutation, `(slot - offset) * skip⁻¹
 * mod M`: the one its walk would reach first, every slot before it there being taken. Indices are
 * computed once per backend that takes a turn here; a turn then scans at most √M numbers instead
 * of walking about M / (empty slots) of them (the last 1 % of a fill is ~20 % of its walk).
 * Buffers are kept between fills (module scope: fills are synchronous).
 */
const tail = {
  empty: new Int32Array(64),
  left: 0,
  /** Row length: the empty slots at the start of the tail. */
  width: 0,
  /** Row r holds one backend's permutation indices of `empty`, in the same order. */
  index: new Int32Array(64 * 64),
  rows: 0,
  /** Backend → its row, -1 before its first turn here. */
  rowOf: new Int32Array(64),
};

/** Starts the tail phase: lists the `left` empty slots of `slots` for `count` backends. */
function tailStart(slots: Int32Array, left: number, count: number): void {
  if (tail.empty.length < left) tail.empty = new Int32Array(left);
  const need = left * Math.min(count, left);
  if (tail.index.length < need) tail.index = new Int32Array(need);
  if (tail.rowOf.length < count) tail.rowOf = new Int32Array(count);
  tail.rowOf.fill(-1, 0, count);
  tail.rows = 0;
  tail.width = left;
  let e = 0;
  // indexOf scans natively: several times faster than a loop over the M slots here.
  for (let c = slots.indexOf(0); c >= 0 && e < left; c = slots.indexOf(0, c + 1)) {
    tail.empty[e++] = c;
  }
  tail.left = e;
}

/** Removes and returns the next empty slot of backend `k` (permutation `offset + j * skip`). */
function tailTake(k: number, offset: number, skip: number, m: number): number {
  const { empty, index, width } = tail, left = tail.left;
  let row = tail.rowOf[k]!;
  if (row < 0) {
    row = tail.rowOf[k] = tail.rows++;
    const inv = modInverse(skip, m), base = row * width, rm = 1 / m;
    for (let i = 0; i < left; i++) {
      const d = empty[i]! - offset;
      // (d * inv) mod m: the product is below 2^34, exact in a double; the quotient from the
      // reciprocal is off by at most one, fixed after (a division costs more).
      const p = (d < 0 ? d + m : d) * inv;
      const r = p - Math.floor(p * rm) * m;
      index[base + i] = r < 0 ? r + m : r >= m ? r - m : r;
    }
  }
  const base = row * width;
  let best = 0, bestIndex = index[base]!;
  for (let i = 1; i < left; i++) {
    const j = index[base + i]!;
    if (j < bestIndex) {
      bestIndex = j;
      best = i;
    }
  }
  const c = empty[best]!, last = left - 1;
  empty[best] = empty[last]!;
  for (let r = 0, b = 0; r < tail.rows; r++, b += width) index[b + best] = index[b + last]!;
  tail.left = last;
  return c;
}

/**
 * Fills `table` (length M, zeroed here) from ABI records (`3 * n` u32 of
 * `{keyHash1, keyHash2, weight}`, {@link encodeMaglevInput}). Returns the number of backends
 * used (weight > 0). `stats`, if given, receives the work counters. A slot of backend i holds
 * `values[i]` when `values` is given (non-zero, e.g. backend IDs), else i + 1.
 *
 * @throws {MaglevInputError} when two backends of weight > 0 share their key hashes.
 */
export function maglevFill(
  records: Uint32Array,
  table: Uint32Array,
  stats?: MaglevFillStats,
  values?: ArrayLike<number>,
): number {
  const m = table.length;
  const n = records.length / 3;
  table.fill(0);
  // The same memory as signed 32-bit: slots and positions stay small integers in the JIT's eyes.
  const slots = new Int32Array(table.buffer, table.byteOffset, m);
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
  if (count === 0) {
    if (stats) stats.visits = stats.probes = 0;
    return 0;
  }
  order.sort((a, b) =>
    (records[a * 3]! - records[b * 3]!) || (records[a * 3 + 1]! - records[b * 3 + 1]!)
  );
  const pos = new Int32Array(count);
  const skip = new Int32Array(count);
  const weight = new Uint32Array(count);
  const idx = new Int32Array(count);
  const target = new Float64Array(count);
  for (let k = 0; k < count; k++) {
    const i = order[k]!;
    const h1 = records[i * 3]!;
    const h2 = records[i * 3 + 1]!;
    if (k > 0) {
      const p = order[k - 1]!;
      if (records[p * 3] === h1 && records[p * 3 + 1] === h2) {
        throw new MaglevInputError(
          `Cannot build Maglev table: backends #${p} and #${i} have the same key hash`,
        );
      }
    }
    pos[k] = h1 % m;
    skip[k] = (h2 % (m - 1)) + 1;
    weight[k] = records[i * 3 + 2]!;
    idx[k] = values === undefined ? i + 1 : values[i]!;
    target[k] = maxW;
  }
  // Two loops with the turn inlined (walk, then the last √M slots by tailTake), so the walk's
  // loop stays as small as the JIT likes it; equal weights skip the round bookkeeping.
  const equal = minW === maxW;
  let filled = 0, visits = 0, round = 1, k = 0;
  const tailAt = m - tailSize(m);
  walk: for (;; round++, k = 0) {
    for (; k < count; k++) {
      visits++;
      if (!equal) {
        // round * weight < 2^17 * 2^16: exact in a double.
        if (round * weight[k]! < target[k]!) continue;
        target[k] = target[k]! + maxW;
      }
      let c = pos[k]!;
      const s = skip[k]!;
      // The wrap is taken at random: computed without a branch (c - m < 0 keeps c). About 12 %
      // faster than `if (c >= m) c -= m` at M = 16,381 with 10 backends.
      while (slots[c] !== 0) {
        c = (c + s) | 0;
        c -= m & ((m - 1 - c) >> 31);
      }
      slots[c] = idx[k]!;
      c = (c + s) | 0;
      pos[k] = c - (m & ((m - 1 - c) >> 31));
      if (++filled === tailAt) {
        k++; // the next turn is the tail's first
        break walk;
      }
    }
  }
  tailStart(slots, m - filled, count);
  tail: for (;; round++, k = 0) {
    for (; k < count; k++) {
      visits++;
      if (!equal) {
        if (round * weight[k]! < target[k]!) continue;
        target[k] = target[k]! + maxW;
      }
      const s = skip[k]!;
      const c = tailTake(k, records[order[k]! * 3]! % m, s, m) + s;
      slots[c - s] = idx[k]!;
      pos[k] = c >= m ? c - m : c;
      if (++filled === m) break tail;
    }
  }
  if (stats) {
    stats.visits = visits;
    stats.probes = walked(records, order, { pos, skip }, m, (k) => equal || target[k]! > maxW);
  }
  return count;
}

/**
 * Slots examined in a fill, counted after the fact so the hot loop stays bare: each examined slot
 * moves a backend one step along its permutation, and no backend walks past its whole permutation
 * (the table is full first), so backend k examined j_k = (pos_k - offset_k) / skip_k (mod M)
 * slots — or M when that is 0 although it took turns (a lone backend walks the whole table).
 */
function walked(
  records: Uint32Array,
  order: readonly number[],
  walk: { pos: Int32Array; skip: Int32Array },
  m: number,
  turnsTaken: (k: number) => boolean,
): number {
  let total = 0;
  for (let k = 0; k < order.length; k++) {
    const offset = records[order[k]! * 3]! % m, p = walk.pos[k]!;
    const j = ((p >= offset ? p - offset : p + m - offset) * modInverse(walk.skip[k]!, m)) % m;
    total += j === 0 && turnsTaken(k) ? m : j;
  }
  return total;
}

/**
 * The plain-TypeScript {@link MaglevBuilder}: same tables as the WASM module, same input checks
 * ({@link encodeMaglevInput}); fills `out` when it has length `m`, writing `values` (e.g. backend
 * IDs) straight into the slots when given.
 *
 * @example
 * ```ts
 * import { TsMaglevBuilder } from "./maglev_ts.ts";
 * const table = new TsMaglevBuilder().build([{ key: "a", weight: 1 }, { key: "b", weight: 1 }], 251);
 * if (table.length !== 251 || table.includes(0)) throw new Error("table not full");
 * ```
 */
export class TsMaglevBuilder implements MaglevBuilder {
  build(
    backends: readonly MaglevBackend[],
    m: number,
    out?: Uint32Array,
    values?: readonly number[],
  ): Uint32Array {
    const single = singleBackendTable(backends, m, out, values);
    if (single !== null) return single;
    const records = encodeMaglevInput(backends, m);
    const table = out !== undefined && out.length === m ? out : new Uint32Array(m);
    try {
      maglevFill(records, table, undefined, values);
    } catch (e) {
      if (e instanceof MaglevInputError) throw duplicateKeyError(backends);
      throw e;
    }
    return table;
  }
}
