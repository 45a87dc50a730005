/**
 * The parts of a daemon, started in order and stopped in reverse: each part registers its stop
 * hook once it runs, and {@link Lifecycle.stop} runs them last first, logging a failure (with the
 * part's name) and going on with the rest — so a daemon's `main()` reads as the list of its parts.
 *
 * @example
 * ```ts
 * import { Lifecycle } from "./lifecycle.ts";
 * import { log } from "./log.ts";
 * const order: string[] = [];
 * const life = new Lifecycle(log);
 * const db = await life.start("db", () => {
 *   order.push("start db");
 *   return { value: 42, stop: () => void order.push("stop db") };
 * });
 * life.onStop("server", () => void order.push("stop server"));
 * await life.stop();
 * if (db !== 42 || order.join() !== "start db,stop server,stop db") throw new Error("order");
 * ```
 *
 * @module
 */

import type { Logger } from "./log.ts";

/** A stop hook: what undoes a started part. */
export type StopHook = () => Promise<unknown> | unknown;

/** Started parts of one process, stopped last first. */
export class Lifecycle {
  readonly #stops: { name: string; stop: StopHook }[] = [];
  #stopping = false;

  /** `log` gets one warning per failed stop hook (`cleanup step failed`, `component`). */
  constructor(readonly log: Logger) {}

  /**
   * Runs `start` (part `name`) and registers the stop hook it returns, if any; returns its
   * value. A start that throws registers nothing (what it started before throwing is its own
   * to undo, or registered with {@link onStop} first).
   */
  async start<T>(
    name: string,
    start: () => Promise<{ value: T; stop?: StopHook }> | { value: T; stop?: StopHook },
  ): Promise<T> {
    const { value, stop } = await start();
    if (stop) this.onStop(name, stop);
    return value;
  }

  /** Registers the stop hook of a part already running (after {@link stop}: runs it at once). */
  onStop(name: string, stop: StopHook): void {
    if (!this.#stopping) {
      this.#stops.push({ name, stop });
      return;
    }
    (async () => await stop())().catch((err) =>
      this.log.warn("cleanup step failed", { component: name, err })
    );
  }

  /** The parts registered so far, in start order (for logs and tests). */
  get parts(): string[] {
    return this.#stops.map((s) => s.name);
  }

  /** Runs every stop hook once, last registered first; a failure is logged, the rest still run. */
  async stop(): Promise<void> {
    this.#stopping = true;
    while (this.#stops.length > 0) {
      const { name, stop } = this.#stops.pop()!;
      try {
        await stop();
      } catch (err) {
        this.log.warn("cleanup step failed", { component: name, err });
      }
    }
  }
}
