import { deepStrictEqual, rejects } from "node:assert/strict";
import { retryableWrite, withRetry } from "./_write_retry.ts";

/** An error as client-node throws it (`ApiException`: code, headers). */
function apiError(code: number, headers: Record<string, string> = {}) {
  return Object.assign(new Error(`HTTP-Code: ${code}`), { code, headers });
}

Deno.test("withRetry: a 429 is tried again after its Retry-After, then succeeds", async () => {
  const waits: number[] = [];
  let calls = 0;
  const retries = await withRetry(() => {
    calls++;
    return calls < 3 ? Promise.reject(apiError(429, { "retry-after": "1" })) : Promise.resolve();
  }, { sleep: (ms) => (waits.push(ms), Promise.resolve()) });
  deepStrictEqual([retries, calls, waits], [2, 3, [1000, 1000]]);
});

Deno.test("withRetry: bounded tries; the last error propagates", async () => {
  let calls = 0;
  await rejects(
    () =>
      withRetry(() => (calls++, Promise.reject(apiError(503))), {
        tries: 3,
        sleep: () => Promise.resolve(),
      }),
    (err: unknown) => (err as Error & { code?: number }).code === 503,
  );
  deepStrictEqual(calls, 3);
});

Deno.test("withRetry: a conflict is retried only without a precondition", async () => {
  let calls = 0;
  const conflict = () => (calls++, Promise.reject(apiError(409)));
  await rejects(() => withRetry(conflict, { sleep: () => Promise.resolve() }));
  deepStrictEqual(calls, 1); // a status patch's resourceVersion: the next pass replans
  calls = 0;
  await rejects(() =>
    withRetry(conflict, { conflictRetries: true, sleep: () => Promise.resolve() })
  );
  deepStrictEqual(calls, 4);
});

Deno.test("retryableWrite: 422 and errors without a status are not retried in place", () => {
  deepStrictEqual(retryableWrite(apiError(422), true), false);
  deepStrictEqual(retryableWrite(new Error("connection refused"), true), false);
  deepStrictEqual(retryableWrite(apiError(500), false), true);
});
