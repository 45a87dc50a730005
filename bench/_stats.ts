/**
 * Small statistics shared by the benchmarks.
 *
 * @example
 * ```ts
 * import { median } from "./_stats.ts";
 * if (median([3, 1, 2]) !== 2 || median([1, 2, 3, 4]) !== 2.5) throw new Error("median");
 * ```
 *
 * @module
 */

/** The median of `xs` (the mean of the two middle values for an even count); NaN when empty. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
