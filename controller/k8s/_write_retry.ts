/**
 * Retries of one write to the API server, in place: on 429 (Too Many Requests: API Priority and
 * Fairness, or a rate-limited proxy; after its `Retry-After` when it gives one), on 5xx answers
 * that say "try again" (500, 503, 504), and on 409 Conflict only for writes
 * that carry no precondition (an Event's generated name taken: a new try generates another). A
 * status patch whose resourceVersion precondition failed is not retried here: the object changed,
 * and the next pass plans the write again from the version the informers bring. Errors without an
 * HTTP status (connection refused) are left to the next pass, as before.
 *
 * @module
 */

import { backoffDelay, type BackoffOptions } from "../../lib/backoff.ts";

/** Options of {@linkcode withRetry}. */
export interface WriteRetryOptions {
  /** Tries in all, the first included (default 4). */
  readonly tries?: number;
  /** Delays between tries (default 20 ms doubling to 1 s, jittered). */
  readonly backoff?: BackoffOptions;
  /** Whether a 409 may be retried (the write has no precondition). */
  readonly conflictRetries?: boolean;
  /** Longest `Retry-After` honoured (ms; default 5,000). */
  readonly maxRetryAfterMs?: number;
  /** Waits (tests inject one; default a timer). */
  readonly sleep?: (ms: number) => Promise<void>;
}

const sleepMs = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The HTTP status of a client-node error (`ApiException.code`), if any. */
export function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}

/** The `Retry-After` of an error's response, in ms (seconds form only), if any. */
export function retryAfterMs(err: unknown): number | undefined {
  const headers = (err as { headers?: Record<string, string> } | null)?.headers;
  const v = headers?.["retry-after"] ?? headers?.["Retry-After"];
  const s = v === undefined ? NaN : Number(v);
  return Number.isFinite(s) && s >= 0 ? s * 1000 : undefined;
}

/** Whether a failed write may be tried again as it is. */
export function retryableWrite(err: unknown, conflictRetries: boolean): boolean {
  const code = statusOf(err);
  if (code === undefined) return false; // no answer (or not an API error): the next pass retries
  if (code === 429 || code === 500 || code === 503 || code === 504) return true;
  return code === 409 && conflictRetries;
}

/**
 * Runs `write`, trying again (bounded by `tries`) while its error is retryable; the last error
 * propagates. Returns how many retries it took.
 */
export async function withRetry(
  write: () => Promise<void>,
  options: WriteRetryOptions = {},
): Promise<number> {
  const tries = Math.max(1, options.tries ?? 4);
  const sleep = options.sleep ?? sleepMs;
  const backoff = options.backoff ?? { minMs: 20, maxMs: 1_000 };
  for (let attempt = 1;; attempt++) {
    try {
      await write();
      return attempt - 1;
    } catch (err) {
      if (attempt >= tries || !retryableWrite(err, options.conflictRetries ?? false)) throw err;
      const after = retryAfterMs(err);
      const delay = after !== undefined
        ? Math.min(after, options.maxRetryAfterMs ?? 5_000)
        : backoffDelay(attempt, backoff);
      await sleep(delay);
    }
  }
}
