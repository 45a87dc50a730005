/**
 * The flow agent's one state machine. Every job asks it, instead of flags of its own, whether it
 * may act (write, follow, sweep), and reports store failures and recoveries as transitions.
 *
 * ```
 * stopped ─start─► restoring ─restored─► ready ─store failed─► store-down ─store answers─► recovering
 *    ▲                 │                   ▲                       ▲                         │
 *    │                 │                   └──────── restored ─────┼─────────────────────────┤
 *    │                 │                                           └──── store failed ───────┘
 *    └── stopped ◄── stopping ◄─stop()─ (from restoring, ready, store-down, recovering)
 * ```
 *
 * Each transition is logged (`flow agent state` with `from`, `to`, `reason`) and exported as
 * `holdfast_flow_agent_state{state}` (1 for the current state), with `holdfast_flow_agent_ready`
 * (1 from the first restore until stop) and `holdfast_flow_store_up` (1 in `ready`).
 *
 * @module
 */

import type { Logger } from "../../../lib/log.ts";
import type { AgentMetrics } from "./_metrics.ts";

/** A state of the flow agent. */
export type FlowAgentState =
  | "stopped"
  | "restoring"
  | "ready"
  | "store-down"
  | "recovering"
  | "stopping";

const STATES: readonly FlowAgentState[] = [
  "stopped",
  "restoring",
  "ready",
  "store-down",
  "recovering",
  "stopping",
];

/** The transitions allowed from each state. */
const NEXT: { readonly [S in FlowAgentState]: readonly FlowAgentState[] } = {
  stopped: ["restoring"],
  restoring: ["ready", "stopping"],
  ready: ["store-down", "stopping"],
  "store-down": ["recovering", "stopping"],
  recovering: ["ready", "store-down", "stopping"],
  stopping: ["stopped"],
};

/** The current state, its transitions, and waiting for the next one. */
export class AgentStateMachine {
  #state: FlowAgentState = "stopped";
  #waiters = new Set<() => void>();
  readonly #log: Logger;
  readonly #m: AgentMetrics;

  constructor(log: Logger, metrics: AgentMetrics) {
    this.#log = log;
    this.#m = metrics;
    this.#export();
  }

  /** The current state. */
  get current(): FlowAgentState {
    return this.#state;
  }

  /** Restoring, ready, store down or recovering: between start() and stop(). */
  get running(): boolean {
    return this.#state !== "stopped" && this.#state !== "stopping";
  }

  /** Restored once and not stopping: the flow map holds the store's flows (or did, when down). */
  get ready(): boolean {
    return this.#state === "ready" || this.#state === "store-down" ||
      this.#state === "recovering";
  }

  /** In sync with a reachable store: the jobs may write, follow and sweep. */
  get inSync(): boolean {
    return this.#state === "ready";
  }

  /**
   * Moves to `to` for `reason` if that is a transition from the current state; else does
   * nothing (a late report, e.g. a write failing after stop()) and returns false.
   */
  move(to: FlowAgentState, reason: string, fields: Record<string, unknown> = {}): boolean {
    const from = this.#state;
    if (!NEXT[from].includes(to)) return false;
    this.#state = to;
    this.#export();
    const level = to === "store-down" ? "warn" : "info";
    this.#log[level]("flow agent state", { from, to, reason, ...fields });
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const w of waiters) w();
    return true;
  }

  /** Resolves at the next transition, or when `signal` aborts. */
  changed(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = () => {
        this.#waiters.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      this.#waiters.add(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }

  #export(): void {
    for (const s of STATES) this.#m.state.set({ state: s }, s === this.#state ? 1 : 0);
    this.#m.ready.set(undefined, this.ready ? 1 : 0);
    this.#m.up.set(undefined, this.inSync ? 1 : 0);
  }
}
