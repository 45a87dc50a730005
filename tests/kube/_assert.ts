/**
 * The two assertions the kube tests use beyond `node:assert/strict` (which they import directly):
 * a substring with the text shown, and a rejection read from the message or the API body.
 *
 * @module
 */
import nodeAssert from "node:assert/strict";

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
