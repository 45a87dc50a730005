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

/**
 * String keys: the first index whose entry is ≥ the probe (`upper` false) or > it (`upper`
 * true). The tiebreak is only looked at on equal keys, so `upper` costs nothing on the way.
 */
function searchStr(
  ks: string[],
  ts: Key[] | null,
  key: string,
  tb: Key | undefined,
  upper: boolean,
): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const k = ks[mid]!;
    if (
      k < key ||
      (k === key && (ts === null ? upper : tb !== undefined && (
        (ts[mid] as string) < (tb as string) || (upper && ts[mid] === tb)
      )))
    ) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Number keys without tiebreaks: the first index whose entry is ≥ `key`. */
function lowerNum(ks: number[], key: number): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ks[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The generic search (number keys with tiebreaks): the first index whose entry compares with
 * the probe at or above `bound`, so 0 finds the first entry ≥ the probe and 1 the first > it.
 */
function searchFrom(
  ks: Key[],
  ts: Key[] | null,
  key: Key,
  tb: Key | undefined,
  bound: 0 | 1,
): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cmpAt(ks, ts, mid, key, tb) < bound) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index whose entry is ≥ the probe. */
export function lowerIndex(ks: Key[], ts: Key[] | null, key: Key, tb: Key | undefined): number {
  if (typeof key === "string") return searchStr(ks as string[], ts, key, tb, false);
  if (ts === null) return lowerNum(ks as number[], key);
  return searchFrom(ks, ts, key, tb, 0);
}

/** Number of separators ≤ the probe: the child that may hold it. */
export function upperIndex(ks: Key[], ts: Key[] | null, key: Key, tb: Key | undefined): number {
  if (typeof key === "string") return searchStr(ks as string[], ts, key, tb, true);
  if (ts === null) {
    // Without tiebreaks a node's keys are distinct: at most one entry equals the probe.
    const i = lowerNum(ks as number[], key);
    return i < ks.length && ks[i] === key ? i + 1 : i;
  }
  return searchFrom(ks, ts, key, tb, 1);
}
