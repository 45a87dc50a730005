/**
 * What a swapped-in Maglev table fill must do, checked by properties instead of digests: any fill
 * whose tables the datapath can use and whose shares follow the weights may serve, so a module may
 * fill tables differently from the reference (`maglev_ts.ts`).
 *
 * - `table-size`: the table has exactly M slots;
 * - `slot-names-backend`: every slot holds a backend's input index + 1 (0 only when no backend
 *   has a weight: the empty table the datapath drops on);
 * - `zero-weight-no-slot`: a backend of weight 0 owns no slot;
 * - `weight-share`: each backend owns `M × w / Σw` slots within ±{@link MAGLEV_SHARE_TOLERANCE}
 *   of that (at least ±1 slot). The reference is within 3.1 % on every golden vector (within 1
 *   slot of the exact share), so 10 % leaves a fill room to differ and still catches weights
 *   ignored or inverted;
 * - `deterministic` and `order-independent` (checked by `validate.ts`): two builds give the same
 *   table, and the same backends in reverse order give every slot the same backend — LB nodes
 *   must build identical tables from the same service.
 *
 * @module
 */
import type { MaglevBackend } from "./maglev_input.ts";

/** Largest allowed deviation of a backend's slot count from its weight share, as a fraction. */
export const MAGLEV_SHARE_TOLERANCE = 0.1;

/** A broken property of one table. */
export interface MaglevViolation {
  check: string;
  message: string;
}

/**
 * Checks `table` (built from `backends` with size `m`) against the per-table properties. Returns
 * the first violation, or the largest relative share error (0 for an empty table).
 */
export function maglevViolation(
  backends: readonly MaglevBackend[],
  m: number,
  table: Uint32Array,
): MaglevViolation | { shareError: number } {
  if (table.length !== m) {
    return { check: "table-size", message: `${table.length} slots, expected ${m}` };
  }
  const n = backends.length;
  const total = backends.reduce((sum, b) => sum + b.weight, 0);
  const counts = new Array<number>(n).fill(0);
  for (let i = 0; i < m; i++) {
    const v = table[i]!;
    if (total === 0 ? v !== 0 : v < 1 || v > n) {
      return {
        check: "slot-names-backend",
        message: `slot ${i} is ${v}, expected ${
          total === 0 ? "0 (no weighted backend)" : `1..${n}`
        }`,
      };
    }
    if (v !== 0) counts[v - 1]!++;
  }
  let shareError = 0;
  for (const [i, b] of backends.entries()) {
    const count = counts[i]!;
    if (b.weight === 0) {
      if (count > 0) {
        return {
          check: "zero-weight-no-slot",
          message: `backend ${i} ("${b.key}", weight 0) owns ${count} slots`,
        };
      }
      continue;
    }
    const expected = m * b.weight / total;
    const bound = Math.max(MAGLEV_SHARE_TOLERANCE * expected, 1);
    if (Math.abs(count - expected) > bound) {
      return {
        check: "weight-share",
        message: `backend ${i} ("${b.key}", weight ${b.weight}) owns ${count} slots, expected ` +
          `${expected.toFixed(1)} ± ${bound.toFixed(1)}`,
      };
    }
    shareError = Math.max(shareError, Math.abs(count - expected) / expected);
  }
  return { shareError };
}

/**
 * Whether `reversed` (built from the backends in reverse order) gives every slot of `table` the
 * same backend; the first slot that differs, or -1.
 */
export function firstOrderDifference(table: Uint32Array, reversed: Uint32Array, n: number): number {
  for (let i = 0; i < table.length; i++) {
    const r = reversed[i]!;
    if (table[i] !== (r === 0 ? 0 : n - r + 1)) return i;
  }
  return table.length === reversed.length ? -1 : Math.min(table.length, reversed.length);
}
