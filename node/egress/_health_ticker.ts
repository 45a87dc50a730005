/**
 * A periodic timer on a fixed grid anchored to `performance.now()` at start: tick k is due at
 * start + k·interval, so it never drifts; a late tick (a busy or stopped process) skips the slots
 * it missed instead of firing them back to back. Used by the heartbeats and the lease renewals.
 *
 * @module
 */

/** Calls `fn` every `intervalMs` on a drift-free grid until stopped. */
export class Ticker {
  #timer?: ReturnType<typeof setTimeout>;
  #startedAt = 0;
  #tick = 0;
  #running = false;
  /** performance.now() of the latest tick. */
  lastTickAt = 0;
  /** performance.now() of the latest tick that came more than two intervals after the one before. */
  lateAt = -Infinity;

  constructor(readonly intervalMs: number, readonly fn: () => void) {}

  /** Starts ticking; the first tick runs now. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#startedAt = this.lastTickAt = performance.now();
    this.#tick = 0;
    this.#run();
  }

  /** Stops ticking. */
  stop(): void {
    this.#running = false;
    clearTimeout(this.#timer);
  }

  #run(): void {
    if (!this.#running) return;
    const now = performance.now();
    if (now - this.lastTickAt > 2 * this.intervalMs) this.lateAt = now;
    this.lastTickAt = now;
    try {
      this.fn();
    } finally {
      const slot = Math.floor((now - this.#startedAt) / this.intervalMs) + 1;
      this.#tick = Math.max(this.#tick + 1, slot);
      const due = this.#startedAt + this.#tick * this.intervalMs;
      if (this.#running) {
        this.#timer = setTimeout(() => this.#run(), Math.max(0, due - performance.now()));
      }
    }
  }
}
