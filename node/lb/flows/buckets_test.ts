import { deepStrictEqual as assertEquals, throws } from "node:assert";
import {
  bucketOf,
  bucketTags,
  checkFlowBuckets,
  groupByBucket,
  joinPositions,
  splitPositions,
} from "./buckets.ts";
import { compareStreamIds } from "./_follower.ts";

Deno.test("buckets: counts are powers of two up to 256", () => {
  for (const n of [1, 2, 16, 256]) assertEquals(checkFlowBuckets(n), n);
  for (const n of [0, 3, 12, 512, 1.5]) throws(() => checkFlowBuckets(n), RangeError);
});

Deno.test("buckets: one bucket is today's layout; fields spread evenly over 16", () => {
  assertEquals(bucketTags("2001:db8::1", 1), ["2001:db8::1"]);
  assertEquals(bucketTags("10.0.100.1", 2), ["10.0.100.1#0", "10.0.100.1#1"]);
  const counts = new Array(16).fill(0);
  for (let i = 0; i < 16_000; i++) {
    const field = (0x0a000000 + i).toString(16).padStart(8, "0") +
      (10_000 + i % 50_000).toString(16).padStart(4, "0") + "005006";
    counts[bucketOf(field, 16)]++;
  }
  for (const c of counts) {
    if (c < 800 || c > 1200) throw new Error(`uneven buckets ${counts}`);
  }
  const groups = groupByBucket(["a", "b", "c", "d"], (s) => s, 4);
  assertEquals([...groups.values()].flat().sort(), ["a", "b", "c", "d"]);
  for (const [b, items] of groups) for (const s of items) assertEquals(bucketOf(s, 4), b);
});

Deno.test("buckets: positions join, split and order bucket by bucket", () => {
  const p = joinPositions(["1-0", "5-2"]);
  assertEquals(splitPositions(p, 2), ["1-0", "5-2"]);
  assertEquals(splitPositions("0-0", 3), ["0-0", "0-0", "0-0"]);
  assertEquals(compareStreamIds("1-0|5-3", p), 1);
  assertEquals(compareStreamIds("2-0|5-2", p), 1);
  assertEquals(compareStreamIds(p, p), 0);
  assertEquals(compareStreamIds("1-0|5-1", p), -1);
});
