/**
 * Watch: a one-shot "this result may be stale now" signal, the twin every query returns.
 *
 * Cheap until someone waits: the Promise and AbortSignal are created lazily, so tables can hand
 * out watches on every query without allocating per call beyond the shared object.
 *
 * @module
 */

/** A one-shot signal that fires (closes) when the result it came with may have changed. */
export class Watch {
  #closed = false;
  #resolve: (() => void) | null = null;
  #promise: Promise<void> | null = null;
  #controller: AbortController | null = null;

  /** True once the result this watch came with may be out of date. */
  get stale(): boolean {
    return this.#closed;
  }

  /** Resolves when the watch fires (immediately if it already has). */
  wait(): Promise<void> {
    if (this.#promise === null) {
      if (this.#closed) this.#promise = Promise.resolve();
      else this.#promise = new Promise((r) => (this.#resolve = r));
    }
    return this.#promise;
  }

  /** An AbortSignal aborted when the watch fires, for APIs that take one. */
  get signal(): AbortSignal {
    if (this.#controller === null) {
      this.#controller = new AbortController();
      if (this.#closed) this.#controller.abort(new Error("stale"));
    }
    return this.#controller.signal;
  }

  /** Fires the watch. Idempotent. Called by the table store on commit. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#resolve?.();
    this.#controller?.abort(new Error("stale"));
  }

  /** A watch that has already fired: a safe answer when freshness cannot be proven. */
  static fired(): Watch {
    const w = new Watch();
    w.close();
    return w;
  }
}

/**
 * Resolves when any of `watches` fires, when `timeoutMs` passes, or when `signal` aborts;
 * returns which happened.
 */
export async function waitAny(
  watches: readonly Watch[],
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<"watch" | "timeout" | "aborted"> {
  if (watches.some((w) => w.stale)) return "watch";
  if (options.signal?.aborted) return "aborted";
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  const racers: Promise<"watch" | "timeout" | "aborted">[] = watches.map((w) =>
    w.wait().then(() => "watch" as const)
  );
  if (options.timeoutMs !== undefined) {
    racers.push(
      new Promise((r) => (timer = setTimeout(() => r("timeout"), Math.max(0, options.timeoutMs!)))),
    );
  }
  if (options.signal) {
    const sig = options.signal;
    racers.push(
      new Promise((r) => {
        onAbort = () => r("aborted");
        sig.addEventListener("abort", onAbort, { once: true });
      }),
    );
  }
  try {
    return await Promise.race(racers);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    if (onAbort) options.signal?.removeEventListener("abort", onAbort);
  }
}
