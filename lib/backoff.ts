/**
 * Exponential backoff with jitter: the one retry schedule every Holdfast loop uses (reconciler
 * retries, Redis reconnects, flow-store recovery, stream follow); `sleep`, and `loopTurn` for
 * slicing long synchronous work.
 *
 * Delays grow from `minMs` by `factor` per attempt up to `maxMs`. Jitter is "equal jitter": a
 * delay `d` becomes a uniform value in `[d·(1−jitter), d]`, so many nodes retrying the same
 * failure (Redis restarted under every LB node) spread out instead of arriving together.
 *
 * @example A bounded retry loop
 * ```ts
 * import { Backoff } from "./backoff.ts";
 * const backoff = new Backoff({ minMs: 10, maxMs: 1000, jitter: 0 });
 * if (backoff.next() !== 10 || backoff.next() !== 20) throw new Error("not exponential");
 * backoff.reset();
 * if (backoff.next() !== 10) throw new Error("not reset");
 * ```
 *
 * @module
 */

import { setImmediate } from "node:timers";

/** How a {@link Backoff} grows. */
export interface BackoffOptions {
  /** First delay in ms (default 50). */
  readonly minMs?: number;
  /** Largest delay in ms (default 5,000). */
  readonly maxMs?: number;
  /** Growth per attempt (default 2). */
  readonly factor?: number;
  /** Fraction of each delay that is randomized, 0..1 (default 0.2; 0 = deterministic). */
  readonly jitter?: number;
  /** Source of randomness in [0, 1) (default `Math.random`; tests pass their own). */
  readonly random?: () => number;
}

/** The delay before retry number `attempt` (1-based) under `options`, jitter included. */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const min = options.minMs ?? 50, max = options.maxMs ?? 5_000, factor = options.factor ?? 2;
  const jitter = Math.min(1, Math.max(0, options.jitter ?? 0.2));
  if (!(min >= 0) || !(max >= min) || !(factor >= 1)) {
    throw new RangeError(
      `Cannot compute backoff: need 0 <= minMs <= maxMs and factor >= 1, got minMs=${min} maxMs=${max} factor=${factor}`,
    );
  }
  const exp = Math.min(Math.max(0, attempt - 1), 64);
  const base = Math.min(max, min * factor ** exp);
  if (jitter === 0) return base;
  const r = (options.random ?? Math.random)();
  return base * (1 - jitter * r);
}

/** A retry schedule with state: `next()` for each failure, `reset()` after a success. */
export class Backoff {
  readonly #options: BackoffOptions;
  #attempt = 0;

  /** A schedule growing per {@link BackoffOptions}. */
  constructor(options: BackoffOptions = {}) {
    backoffDelay(1, options); // validate now, not at the first failure
    this.#options = options;
  }

  /** Failures since the last `reset()`. */
  get attempt(): number {
    return this.#attempt;
  }

  /** The delay (ms) before the next try; counts one more failure. */
  next(): number {
    this.#attempt++;
    return backoffDelay(this.#attempt, this.#options);
  }

  /** Starts over from `minMs` (after a success). */
  reset(): void {
    this.#attempt = 0;
  }
}

/**
 * Resolves after `ms`, or at once (rejecting with the signal's reason) when `signal` aborts, so a
 * retry loop's wait never outlives its owner.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Resolves once the event loop has run its due timers: long synchronous work sliced with this
 * between slices never holds a timer (a lease renew, a heartbeat) longer than one slice. Two
 * `setImmediate` hops: called from an I/O callback, one alone runs before that loop iteration's
 * timers (Node's loop phases, which Deno follows); `setTimeout(0)` would be clamped to 1–4 ms.
 */
export async function loopTurn(): Promise<void> {
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
}
