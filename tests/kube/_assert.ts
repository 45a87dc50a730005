/**
 * The few assertions the kube tests use, on node:assert (no network fetch for std).
 *
 * @module
 */
import nodeAssert from "node:assert/strict";

/** Deep equality. */
export function assertEquals(actual: unknown, expected: unknown, msg?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, msg);
}

/** Truthiness. */
export function assert(cond: unknown, msg = "assertion failed"): asserts cond {
  nodeAssert.ok(cond, msg);
}

/** `text` matches `re`. */
export function assertMatch(text: string, re: RegExp, msg?: string): void {
  nodeAssert.match(text, re, msg);
}

/** `text` contains `part`. */
export function assertStringIncludes(text: string, part: string, msg?: string): void {
  nodeAssert.ok(text.includes(part), msg ?? `expected ${JSON.stringify(part)} in:\n${text}`);
}

/** `fn` throws (or rejects) with an error whose message contains `part`; returns the error. */
export async function assertRejects(fn: () => unknown, part?: string): Promise<Error> {
  try {
    await fn();
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    if (part !== undefined) {
      assertStringIncludes(String((e as { body?: unknown }).body ?? "") + err.message, part);
    }
    return err;
  }
  throw new Error(`expected a rejection${part ? ` with "${part}"` : ""}`);
}
