/**
 * Small test helpers for controller tests, private to them: a seeded PRNG and a bounded wait.
 * Assertions come from `node:assert/strict`.
 *
 * @module
 */

/** A tiny seeded PRNG (mulberry32) so property tests are reproducible. */
export function mulberry32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Waits until `cond()` holds, polling every `everyMs` (default 5 ms); throws naming `what` after
 * `timeoutMs` (default 10 s). Bounded in count and time. The bound is only how long a failing test
 * takes to say so: what tests wait for takes milliseconds, orders of magnitude below it, so a
 * loaded machine does not flip the verdict.
 */
export async function waitUntil(
  cond: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
  everyMs = 5,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (let i = 0; i < 1_000_000; i++) {
    if (await cond()) return;
    if (Date.now() > end) break;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
}
