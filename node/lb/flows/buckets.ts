/**
 * Flow buckets: one LB IP's flows spread over several hash tags, so a Redis Cluster holds a busy
 * LB IP on several masters (issue 28). With `B` buckets (a power of two, 1–256) a flow lives under
 * the tag `{<LB IP>#<b>}`, `b` = FNV-1a (32-bit) of its field's text, mixed by murmur3's
 * finalizer, masked to `B - 1`; each bucket
 * has its own hash, `seen` set, stream, instance token and sweeper lock (`schema.ts`'s keys, named
 * by {@linkcode bucketTags}). One bucket is today's layout, `{<LB IP>}`: the default, which every
 * earlier version reads. Every agent of a deployment must use the same `B` (`--flow-buckets`): an
 * agent reads only its own layout.
 *
 * A stream position of a bucketed LB IP is the positions of its buckets joined by `|`, in bucket
 * order ({@linkcode joinPositions}); {@linkcode compareStreamIds} in `_follower.ts` orders those.
 *
 * @example
 * ```ts
 * import { bucketOf, bucketTags } from "./buckets.ts";
 * if (bucketTags("10.0.100.1", 1).join() !== "10.0.100.1") throw new Error("one bucket");
 * if (bucketTags("10.0.100.1", 4)[3] !== "10.0.100.1#3") throw new Error("tags");
 * const b = bucketOf("0a0000011388005006", 16);
 * if (b < 0 || b > 15 || b !== bucketOf("0a0000011388005006", 16)) throw new Error("bucket");
 * ```
 *
 * @module
 */

/** The most buckets per LB IP. */
export const MAX_FLOW_BUCKETS = 256;

/** Checks a bucket count: a power of two in 1..{@linkcode MAX_FLOW_BUCKETS}. */
export function checkFlowBuckets(n: number): number {
  if (!Number.isInteger(n) || n < 1 || n > MAX_FLOW_BUCKETS || (n & (n - 1)) !== 0) {
    throw new RangeError(
      `Invalid flow bucket count ${n}: a power of two from 1 to ${MAX_FLOW_BUCKETS}`,
    );
  }
  return n;
}

/** The bucket (0..buckets-1) of a flow field. */
export function bucketOf(field: string, buckets: number): number {
  if (buckets === 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < field.length; i++) {
    h ^= field.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // FNV's low bits follow the last characters too closely for similar fields: mix (murmur3's
  // finalizer) before masking.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) & (buckets - 1);
}

/** The hash-tag names (`vipKeys`' argument) of `vip`'s buckets, in bucket order. */
export function bucketTags(vip: string, buckets: number): string[] {
  if (buckets === 1) return [vip];
  return Array.from({ length: buckets }, (_, b) => `${vip}#${b}`);
}

/** Groups `items` by the bucket of `field(item)`; only non-empty buckets are present. */
export function groupByBucket<T>(
  items: readonly T[],
  field: (item: T) => string,
  buckets: number,
): Map<number, T[]> {
  const out = new Map<number, T[]>();
  if (buckets === 1) {
    if (items.length > 0) out.set(0, [...items]);
    return out;
  }
  for (const item of items) {
    const b = bucketOf(field(item), buckets);
    let group = out.get(b);
    if (!group) out.set(b, group = []);
    group.push(item);
  }
  return out;
}

/** One position per bucket joined into an LB IP's position. */
export function joinPositions(ids: readonly string[]): string {
  return ids.join("|");
}

/** An LB IP's position split into `buckets` stream IDs (a plain ID is every bucket's). */
export function splitPositions(position: string, buckets: number): string[] {
  const ids = position.split("|");
  if (ids.length === buckets) return ids;
  return Array.from({ length: buckets }, () => ids.length === 1 ? ids[0]! : "0-0");
}
