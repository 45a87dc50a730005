/**
 * The flow agent's outage job: a failed store call moves the agent to `store-down`; a recovery
 * loop probes the store with backoff and, once it answers, restores under the restore lock
 * (`recovering`) — missed additions and removals applied, flows the store lacks written, and,
 * if the store lost its data (its instance token changed), every local flow written back first —
 * then returns to `ready`. The map keeps forwarding throughout. A Redis that restarted empty
 * while none of this node's calls failed is caught by {@link Outage.verify}: on every reconnect
 * of the store's connections and on every sweep, the incarnation tokens are compared.
 *
 * @module
 */

import { Backoff, sleep } from "../../../lib/backoff.ts";
import type { AgentContext } from "./_context.ts";
import type { Learner } from "./_learner.ts";
import type { Restorer } from "./_restore.ts";
import { StoreUnavailableError } from "./store.ts";

/** Notices outages and recovers from them. */
export class Outage {
  readonly #ctx: AgentContext;
  readonly #restorer: Restorer;
  readonly #learner: Learner;
  /** Store incarnation token per followed LB IP (a change means Redis lost its data). */
  readonly #instance = new Map<string, string>();
  /** Recovery attempts back off while the store keeps failing (reset by a successful write). */
  // Within one outage, probes stay at most 1 s apart: a restarted Redis is noticed within a second.
  readonly #backoff = new Backoff({ minMs: 50, maxMs: 1000 });
  /** Queue drops already compensated by restoring. */
  #droppedAtRecovery = 0;
  #recovering: Promise<void> | null = null;
  #signal: AbortSignal = AbortSignal.abort();

  constructor(ctx: AgentContext, restorer: Restorer, learner: Learner) {
    this.#ctx = ctx;
    this.#restorer = restorer;
    this.#learner = learner;
  }

  /** Recovery loops stop when `signal` aborts (the agent stops). */
  arm(signal: AbortSignal): void {
    this.#signal = signal;
  }

  /** Records the store incarnation of `vips` (default all followed ones). */
  async recordInstances(vips: readonly string[] = this.#ctx.followed.list()): Promise<void> {
    const ids = await Promise.all(vips.map((v) => this.#ctx.store.instanceId([v])));
    vips.forEach((v, i) => this.#instance.set(v, ids[i]!));
  }

  /** Forgets an LB IP no longer followed. */
  forget(vip: string): void {
    this.#instance.delete(vip);
  }

  /**
   * Checks that the store is the incarnation this node restored from (the tokens recorded per LB
   * IP): on a reconnect and on every sweep, since a Redis that restarted empty while no call of
   * this node failed is otherwise never noticed. A changed token sends the agent through
   * recovery, which writes every local flow back; a failed check is a failed call.
   */
  async verify(during: string): Promise<void> {
    const { state, followed, store, log } = this.#ctx;
    if (!state.inSync) return;
    const vips = followed.list().filter((v) => this.#instance.has(v));
    let ids: string[];
    try {
      ids = await Promise.all(vips.map((v) => store.instanceId([v])));
    } catch (err) {
      this.failed(err, during);
      return;
    }
    // Compared with what is recorded now: a recovery that ran meanwhile recorded the new tokens.
    const changed = vips.filter((v, i) => {
      const was = this.#instance.get(v);
      return was !== undefined && was !== ids[i];
    });
    if (changed.length === 0 || !state.inSync) return;
    log.warn("flow store lost its data", { during, vips: changed });
    if (!state.move("store-down", `${during}: store incarnation changed`)) return;
    this.#recovering ??= this.#recover().finally(() => this.#recovering = null);
  }

  /** The store worked: the next outage's recovery starts from the shortest delay. */
  worked(): void {
    this.#backoff.reset();
  }

  /** A store call failed during `during`: store-down, and a recovery loop if none runs. */
  failed(err: unknown, during: string): void {
    const { state, log } = this.#ctx;
    if (state.inSync) {
      const queued = this.#learner.queue.size;
      if (err instanceof StoreUnavailableError) {
        log.warn("flow store unavailable", { during, err, queued });
      } else {
        // Reachable but refusing (e.g. an ACL without a needed command): retried with backoff.
        log.error("flow store rejected a request", { during, err, queued });
      }
    }
    if (!state.move("store-down", `${during} failed`)) return;
    this.#recovering ??= this.#recover().finally(() => this.#recovering = null);
  }

  /** Waits for a recovery loop in progress to end (after the agent's signal aborted). */
  async settled(): Promise<void> {
    await this.#recovering;
  }

  async #recover(): Promise<void> {
    const { state, log } = this.#ctx;
    for (let i = 0; i < 1_000_000 && state.current === "store-down"; i++) {
      try {
        await sleep(this.#backoff.next(), this.#signal);
      } catch {
        return; // stopping
      }
      if (state.current !== "store-down") return;
      try {
        await this.#restorer.exclusive(() => this.#attempt());
      } catch (err) {
        log.debug("flow store still unavailable", { err });
        continue;
      }
      if (state.inSync) {
        log.info("flow store available", { queued: this.#learner.queue.size });
        this.#learner.schedule();
        return;
      }
    }
  }

  /** One recovery attempt, under the restore lock. Throws while the store does not answer. */
  async #attempt(): Promise<void> {
    const { state, followed, store, log } = this.#ctx;
    const vips = followed.list();
    const ids = await Promise.all(vips.map((v) => store.instanceId([v])));
    if (!state.move("recovering", "store answered", { vips })) return;
    try {
      // LB IPs followed since the outage began have no recorded token yet: not a restart.
      const changed = vips.filter((v, i) => {
        const was = this.#instance.get(v);
        return was !== undefined && was !== ids[i];
      });
      if (changed.length > 0) {
        log.warn("flow store restarted empty, rewriting local flows", {
          vips: changed,
          previous: changed.map((v) => this.#instance.get(v)),
          current: changed.map((v) => ids[vips.indexOf(v)]),
        });
        await this.#restorer.reseed();
      } else if (this.#learner.queue.dropped > this.#droppedAtRecovery) {
        log.warn("flow queue overflowed during the outage, rewriting learned flows", {
          dropped: this.#learner.queue.dropped - this.#droppedAtRecovery,
        });
      }
      // This node may have missed stream entries (or the stream was trimmed past it) and flows
      // may have fallen out of the full queue: restore reconciles both — missed additions
      // installed, missed removals applied, flows learned here but not stored written.
      await this.#restorer.restore();
    } catch (err) {
      state.move("store-down", "recovery failed", { err });
      throw err;
    }
    vips.forEach((v, i) => this.#instance.set(v, ids[i]!));
    this.#droppedAtRecovery = this.#learner.queue.dropped;
    state.move("ready", "recovered", { queued: this.#learner.queue.size });
  }
}
