/**
 * Small test helpers for controller tests, private to them (no `jsr:@std` here: JSR is unreachable).
 *
 * @module
 */

/** Deep equality over plain data, arrays, Maps, Sets and typed arrays. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) || ArrayBuffer.isView(a)) {
    const aa = a as unknown as ArrayLike<unknown>, bb = b as unknown as ArrayLike<unknown>;
    if (!(Array.isArray(b) || ArrayBuffer.isView(b)) || aa.length !== bb.length) return false;
    for (let i = 0; i < aa.length; i++) if (!deepEqual(aa[i], bb[i])) return false;
    return true;
  }
  if (a instanceof Map) {
    if (!(b instanceof Map) || a.size !== b.size) return false;
    for (const [k, v] of a) if (!b.has(k) || !deepEqual(v, b.get(k))) return false;
    return true;
  }
  if (a instanceof Set) {
    if (!(b instanceof Set) || a.size !== b.size) return false;
    for (const k of a) if (!b.has(k)) return false;
    return true;
  }
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    if (!deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) {
      return false;
    }
  }
  return true;
}

/** Throws with both values printed when they differ. */
export function assertEquals(actual: unknown, expected: unknown, msg = ""): void {
  if (!deepEqual(actual, expected)) {
    throw new Error(
      `${msg ? msg + ": " : ""}values differ\nactual:   ${show(actual)}\nexpected: ${
        show(expected)
      }`,
    );
  }
}

/** Throws unless `cond` holds. */
export function assert(cond: unknown, msg = "assertion failed"): asserts cond {
  if (!cond) throw new Error(msg);
}

/** Asserts that `fn` rejects/throws and that the message contains `includes`. */
export async function assertRejects(fn: () => unknown, includes?: string): Promise<Error> {
  try {
    await fn();
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    if (includes !== undefined && !err.message.includes(includes)) {
      throw new Error(
        `error message ${JSON.stringify(err.message)} lacks ${JSON.stringify(includes)}`,
      );
    }
    return err;
  }
  throw new Error("expected an error, got none");
}

function show(x: unknown): string {
  try {
    return JSON.stringify(x, (_k, v) => (v instanceof Map ? [...v] : v));
  } catch {
    return String(x);
  }
}

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
