/**
 * Key comparison and binary search within one B+tree node: its keys and, in non-unique trees,
 * the tiebreak beside each key.
 *
 * @module
 */

/** Index keys: strings (addresses, names) or small integers (revisions). */
export type Key = string | number;

/** Compares keys of the same kind; strings by code unit, numbers numerically. */
export function compareKeys(a: Key, b: Key): number {
  return a === b ? 0 : a < b ? -1 : 1;
}

/** Sign of (entry i) − (probe key, probe tiebreak); an undefined tiebreak is below all. */
export function cmpAt(
  ks: Key[],
  ts: Key[] | null,
  i: number,
  key: Key,
  tb: Key | undefined,
): number {
  const k = ks[i]!;
  if (k < key) return -1;
  if (k > key) return 1;
  if (ts === null) return 0;
  if (tb === undefined) return 1;
  const t = ts[i]!;
  return t < tb ? -1 : t > tb ? 1 : 0;
}

// The search loops come in a string and a number flavour: a comparison site that only ever sees
// one type compiles to a direct string or integer compare instead of V8's generic `<`.

function lowerStr(ks: string[], ts: Key[] | null, key: string, tb: Key | undefined): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const k = ks[mid]!;
    if (
      k < key ||
      (k === key && ts !== null && tb !== undefined && (ts[mid] as string) < (tb as string))
    ) {
      lo = mid + 1;
    } else hi = mid;
  }
  return lo;
}

function lowerNum(ks: number[], key: number): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ks[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The generic loop (number keys with tiebreaks), kept apart so the flavours stay monomorphic. */
function lowerAny(ks: Key[], ts: Key[] | null, key: Key, tb: Key | undefined): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cmpAt(ks, ts, mid, key, tb) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index whose entry is ≥ the probe. */
export function lowerIndex(ks: Key[], ts: Key[] | null, key: Key, tb: Key | undefined): number {
  if (typeof key === "string") return lowerStr(ks as string[], ts, key, tb);
  if (ts === null) return lowerNum(ks as number[], key);
  return lowerAny(ks, ts, key, tb);
}

/** Number of separators ≤ the probe: the child that may hold it. */
export function upperIndex(ks: Key[], ts: Key[] | null, key: Key, tb: Key | undefined): number {
  // Entries (key, tiebreak) are distinct within a node, so at most one equals the probe, and
  // it is the first one ≥ the probe (an undefined tiebreak equals none).
  const i = lowerIndex(ks, ts, key, tb);
  return i < ks.length && ks[i] === key && (ts === null || ts[i] === tb) ? i + 1 : i;
}
