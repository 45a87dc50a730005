/**
 * The flow agent's learning job: new flows from the datapath are queued without waiting (a
 * bounded queue: the oldest are dropped and counted when full) and written to the store in
 * batches, pipelined, while the agent is in sync with the store.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import {
  type AnyFlowEvent,
  type AnyFlowKey,
  describeFlow,
  type FlowBackend,
  formatFlowAddress,
} from "../../bpf/flow.ts";
import type { AgentContext } from "./_context.ts";
import { flowField } from "./field.ts";
import { BoundedQueue } from "./queue.ts";
import { isException } from "./exceptions.ts";
import type { StoredFlow } from "./store.ts";

interface Pending {
  vip: string;
  key: AnyFlowKey;
  /** Filled in when written (kept off the new-flow path). */
  field: string;
  backend: FlowBackend;
  queuedAt: number;
}

/** Settings of a {@link Learner}. */
export interface LearnerOptions {
  /** Extra wait to gather a partial batch, ms (0: write as soon as a write slot is free). */
  readonly flushMs: number;
  /** Batches written concurrently. */
  readonly maxInFlight: number;
  /** Flows held while the store is unreachable. */
  readonly queueCapacity: number;
}

/** Queues learned flows and writes them in batches. */
export class Learner {
  readonly queue: BoundedQueue<Pending>;
  readonly #ctx: AgentContext;
  readonly #o: LearnerOptions;
  #inFlight: Promise<void>[] = [];
  #flushTimer: ReturnType<typeof setTimeout> | "immediate" | undefined;
  #droppedSinceLog = 0;
  #lastDropLog = -Infinity;

  constructor(ctx: AgentContext, options: LearnerOptions) {
    this.#ctx = ctx;
    this.#o = options;
    this.queue = new BoundedQueue(options.queueCapacity);
    ctx.metrics.queue.onCollect(() => ctx.metrics.queue.set(undefined, this.queue.size));
  }

  /** Queues the flow of `event` for LB IP `vip`; never waits. */
  push(vip: string, event: AnyFlowEvent): void {
    const dropped = this.queue.push({
      vip,
      key: event.key,
      field: "",
      backend: event.backend,
      queuedAt: performance.now(),
    });
    if (dropped > 0) this.#countDrops(dropped);
    this.schedule();
  }

  /**
   * Writes as soon as a write slot is free ("send when idle, batch when busy"): at low rates a
   * flow goes out on the next turn of the event loop; under load, flows gather while earlier
   * batches are in flight and go out as full batches when one completes.
   */
  schedule(): void {
    if (!this.#ctx.state.inSync || this.queue.size === 0) return;
    const full = this.queue.size >= this.#ctx.batchSize;
    if (this.#flushTimer !== undefined) {
      if (this.#flushTimer === "immediate" || !full) return;
      clearTimeout(this.#flushTimer); // a full batch does not wait for the gathering delay
    }
    if (this.#o.flushMs > 0 && !full) {
      this.#flushTimer = setTimeout(() => {
        this.#flushTimer = undefined;
        this.#pump();
      }, this.#o.flushMs);
      return;
    }
    // setImmediate: a nested setTimeout(0) would be clamped to 4 ms.
    this.#flushTimer = "immediate";
    setImmediate(() => {
      this.#flushTimer = undefined;
      this.#pump();
    });
  }

  /** Writes everything queued now (while in sync) and waits for it. */
  async flush(): Promise<void> {
    for (let i = 0; i < 10_000 && this.queue.size > 0 && this.#ctx.state.inSync; i++) {
      this.#pump();
      await Promise.allSettled(this.#inFlight);
    }
    await Promise.allSettled(this.#inFlight);
  }

  /** Stops scheduling and waits for writes in flight (queued flows stay queued). */
  async stop(): Promise<void> {
    if (this.#flushTimer !== "immediate") clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    await Promise.allSettled(this.#inFlight);
  }

  #pump(): void {
    while (
      this.#ctx.state.inSync && this.queue.size > 0 && this.#inFlight.length < this.#o.maxInFlight
    ) {
      const batch = this.queue.take(this.#ctx.batchSize);
      const done: Promise<void> = this.#write(batch).finally(() => {
        this.#inFlight = this.#inFlight.filter((p) => p !== done);
        this.schedule();
      });
      this.#inFlight.push(done);
    }
  }

  async #write(batch: Pending[]): Promise<void> {
    const { store, metrics, log } = this.#ctx;
    const byVip = new Map<string, Pending[]>();
    for (const p of batch) {
      if (p.field === "") p.field = flowField(p.key);
      let list = byVip.get(p.vip);
      if (!list) byVip.set(p.vip, list = []);
      list.push(p);
    }
    const nowMs = this.#ctx.nowMs();
    let oldest = Infinity;
    try {
      for (const [vip, list] of byVip) {
        const o = { node: this.#ctx.node, nowMs, idleTimeoutMs: this.#ctx.idleMs };
        if (this.#ctx.sharing === "all") await store.learn(vip, list, o);
        else await this.#learnExceptions(vip, list, o);
        metrics.learned.inc({ vip }, list.length);
        this.#ctx.tally.learned(vip, list.length);
        const logEach = log.enabled("debug");
        for (const p of list) {
          if (p.queuedAt < oldest) oldest = p.queuedAt;
          if (!logEach) continue;
          log.debug("flow learned", {
            vip,
            flow: describeFlow(p.key),
            backend: formatFlowAddress(p.backend),
          });
        }
        byVip.delete(vip);
      }
      metrics.writeSeconds.observe(undefined, (performance.now() - oldest) / 1000);
      this.#ctx.storeWorked();
    } catch (err) {
      // Put back what was not written (LB IPs already written were removed from byVip).
      const rest: Pending[] = [];
      for (const list of byVip.values()) rest.push(...list);
      const dropped = this.queue.requeue(rest);
      if (dropped > 0) this.#countDrops(dropped);
      this.#ctx.storeFailed(err, "write");
    }
  }

  /**
   * Exceptions-only sharing: every flow is stored (durability), only exceptions are announced —
   * flows whose backend is not what the current table picks (the table changed since the
   * datapath placed them, or the pick is unknown). Others carry their table's version.
   */
  async #learnExceptions(
    vip: string,
    list: Pending[],
    o: { node: string; nowMs: number; idleTimeoutMs: number },
  ): Promise<void> {
    const { picker, store, metrics, log } = this.#ctx;
    const plain: StoredFlow[] = [];
    const exceptions: StoredFlow[] = [];
    for (const p of list) {
      const pick = picker?.pick(p.key);
      if (isException(pick, p.backend)) exceptions.push(p);
      else plain.push({ field: p.field, backend: p.backend, version: pick!.version });
    }
    if (plain.length > 0) await store.learn(vip, plain, { ...o, announce: false });
    if (exceptions.length > 0) await store.learn(vip, exceptions, o);
    metrics.unannounced.inc({ vip }, plain.length);
    if (exceptions.length === 0) return;
    metrics.exceptionsPublished.inc({ vip, why: "learn" }, exceptions.length);
    log.debug("flow exceptions published", {
      vip,
      flows: exceptions.length,
      stored_unannounced: plain.length,
      why: "backend differs from the current table's pick (or the pick is unknown)",
    });
  }

  #countDrops(n: number): void {
    this.#ctx.metrics.dropped.inc(undefined, n);
    this.#droppedSinceLog += n;
    const now = performance.now();
    if (now - this.#lastDropLog >= 5000) {
      this.#ctx.log.warn("flow queue overflow, oldest flows dropped", {
        dropped: this.#droppedSinceLog,
        dropped_total: this.queue.dropped,
        capacity: this.queue.capacity,
      });
      this.#droppedSinceLog = 0;
      this.#lastDropLog = now;
    }
  }
}
