/**
 * The flow-sync agent of one LB node: mirrors the node's flow map and the shared store. It is
 * one state machine (`_state.ts`: stopped → restoring → ready ⇄ store-down → recovering →
 * ready, … → stopping → stopped) over six jobs, each in its own file:
 *
 * | job                                   | file           |
 * |---------------------------------------|----------------|
 * | learning, batched writes              | `_learner.ts`  |
 * | the followed LB IPs                   | `_followed.ts` |
 * | outage and recovery                   | `_outage.ts`   |
 * | restore and publish                   | `_restore.ts`  |
 * | following the stream                  | `_follower.ts` |
 * | activity and expiry sweep             | `_sweeper.ts`  |
 *
 * Flows read from the store pass the trust gate (`_gate.ts`): installed only if their backend
 * serves their frontend in the services config given with {@link FlowSyncAgent.setServices}.
 *
 * IPv4 and IPv6 flows alike: the jobs work on keys of either family (`AnyFlowKey` of
 * node/bpf/flow.ts; their Redis forms in field.ts and schema.ts), over a table holding both
 * (`DualFlowTable`).
 *
 * @module
 */

import { type AnyFlowEvent, describeFlow, formatFlowAddress } from "../../bpf/flow.ts";
import { Backoff, sleep } from "../../../lib/backoff.ts";
import { log as rootLog, type Logger } from "../../../lib/log.ts";
import { type Registry, registry as rootRegistry } from "../../../lib/metrics.ts";
import type { AgentContext } from "./_context.ts";
import { Follower } from "./_follower.ts";
import { FollowedVips } from "./_followed.ts";
import { FlowGate } from "./_gate.ts";
import { FlowTally } from "./_tally.ts";
import { agentJobs } from "./_jobs.ts";
import { Learner } from "./_learner.ts";
import { agentMetrics } from "./_metrics.ts";
import { Outage } from "./_outage.ts";
import { Restorer } from "./_restore.ts";
import { AgentStateMachine, type FlowAgentState } from "./_state.ts";
import { Sweeper } from "./_sweeper.ts";
import { LEARN_BATCH_FLOWS, LEARN_COALESCE_MS } from "./burst_timing.ts";
import type { ServicesView } from "./frontends.ts";
import type { FlowStore } from "./store.ts";
import type { FlowTable } from "./table.ts";
import type { FlowSharingMode, TableChange, TablePicker } from "./exceptions.ts";
import { tableChanging } from "./_handshake.ts";

export type { FlowAgentState } from "./_state.ts";

export {
  flowEventReader,
  LEARN_BURST_FLOWS,
  LEARN_COALESCE_MAX_MS,
  LEARN_COALESCE_MS,
} from "./burst_timing.ts";

/** Options of {@link FlowSyncAgent}. */
export interface FlowSyncAgentOptions {
  /** This LB node's name, written with every change (to skip own additions). */
  node: string;
  /**
   * LB IPs (dotted IPv4, IPv6 text) this node follows at start; events for others are ignored
   * (counted in `holdfast_flow_events_ignored_total`). Changed while running with
   * {@link FlowSyncAgent.setVips}.
   */
  vips: readonly string[];
  /**
   * The services config whose frontends and backends flows from the store are checked against
   * (default none: every such flow is rejected). Changed with {@link FlowSyncAgent.setServices}.
   */
  services?: ServicesView | null;
  /** A flow with no packet for this long expires everywhere (default 300,000 ms). */
  idleTimeoutMs?: number;
  /** Period of the activity/expiry sweep (default idle timeout / 4, at most 30,000 ms). */
  sweepIntervalMs?: number;
  /** Flows per store write (default {@link LEARN_BATCH_FLOWS}: a whole burst in one write). */
  batchSize?: number;
  /**
   * Extra wait to gather a partial batch, ms (default 0: write as soon as a write slot is free;
   * batches then hold whatever arrived during the previous write).
   */
  flushIntervalMs?: number;
  /** Batches written concurrently (pipelined) (default 4). */
  maxInFlight?: number;
  /** Flows held while the store is unreachable; beyond, the oldest are dropped (default 100,000). */
  queueCapacity?: number;
  /** Longest blocking stream read, ms (default 1000; stop() may wait this long). */
  readBlockMs?: number;
  /**
   * Pause after a stream read that found entries waiting, ms (default
   * {@link LEARN_COALESCE_MS}): the learning nodes' batches gather into one read. None after a
   * read that blocked until an entry came.
   */
  readGatherMs?: number;
  /**
   * Longest such pause, ms (default `readGatherMs`): it grows up to this while reads that find
   * entries waiting carry few peers' flows (at most `readGatherMs` when that is 0).
   */
  readGatherMaxMs?: number;
  /** Metrics registry (default the process-wide one). */
  registry?: Registry;
  /** Logger (default the process-wide one). */
  logger?: Logger;
  /** Wall clock, ms (default `Date.now`; tests drive their own, with the flow table's clock). */
  clockMs?: () => number;
  /**
   * `all` (default): every flow is announced and installed on every node. `exceptions`: every
   * flow is stored, only exceptions are announced, installed and restored (`exceptions.ts`);
   * needs `picker` and {@link FlowSyncAgent.tableChanging} before every table change.
   */
  sharing?: FlowSharingMode;
  /** What this node's current Maglev tables pick (with `sharing: "exceptions"`). */
  picker?: TablePicker;
}

/** Mirrors one LB node's flow map with the shared flow store. */
export class FlowSyncAgent {
  readonly node: string;
  readonly #ctx: AgentContext;
  readonly #learner: Learner;
  readonly #restorer: Restorer;
  readonly #outage: Outage;
  readonly #follower: Follower;
  readonly #sweeper: Sweeper;
  #run = new AbortController();
  #following: Promise<void> = Promise.resolve();
  #stopping: Promise<void> | null = null;

  constructor(table: FlowTable, store: FlowStore, options: FlowSyncAgentOptions) {
    this.node = options.node;
    const log = (options.logger ?? rootLog).with({ component: "flows", node: this.node });
    const metrics = agentMetrics(options.registry ?? rootRegistry);
    const idleMs = options.idleTimeoutMs ?? 300_000;
    const ctx: AgentContext = {
      node: this.node,
      table,
      store,
      log,
      metrics,
      state: new AgentStateMachine(log, metrics),
      followed: new FollowedVips(options.vips),
      gate: new FlowGate(options.services ?? null, log, metrics),
      tally: new FlowTally(log),
      positions: new Map(),
      sharing: options.sharing ?? "all",
      picker: options.picker ?? null,
      idleMs,
      nowMs: options.clockMs ?? Date.now,
      batchSize: options.batchSize ?? LEARN_BATCH_FLOWS,
      storeFailed: (err, during) => this.#outage.failed(err, during),
      verifyStore: (during) => this.#outage.verify(during),
      storeWorked: () => this.#outage.worked(),
    };
    this.#ctx = ctx;
    this.#learner = new Learner(ctx, {
      flushMs: options.flushIntervalMs ?? 0,
      maxInFlight: options.maxInFlight ?? 4,
      queueCapacity: options.queueCapacity ?? 100_000,
    });
    this.#restorer = new Restorer(ctx);
    this.#outage = new Outage(ctx, this.#restorer, this.#learner);
    this.#follower = new Follower(ctx, {
      readBlockMs: options.readBlockMs ?? 1000,
      gatherMs: options.readGatherMs ?? LEARN_COALESCE_MS,
      gatherMaxMs: options.readGatherMaxMs ?? options.readGatherMs ?? LEARN_COALESCE_MS,
    });
    this.#sweeper = new Sweeper(ctx, {
      intervalMs: options.sweepIntervalMs ?? Math.min(30_000, Math.max(10, idleMs / 4)),
    });
    agentJobs.set(this, { learner: this.#learner, sweeper: this.#sweeper });
  }

  /** The agent's state (see `_state.ts`). */
  get state(): FlowAgentState {
    return this.#ctx.state.current;
  }

  /** True once the flow map holds every stored flow of this node's LB IPs (until stop). */
  get ready(): boolean {
    return this.#ctx.state.ready;
  }

  /** True while in sync with a reachable store (state `ready`). */
  get storeUp(): boolean {
    return this.#ctx.state.inSync;
  }

  /** Flows waiting to be stored. */
  get queued(): number {
    return this.#learner.queue.size;
  }

  /** Flows dropped from the outage queue so far. */
  get dropped(): number {
    return this.#learner.queue.dropped;
  }

  /** LB IPs (dotted) followed now. */
  get vips(): string[] {
    return this.#ctx.followed.list();
  }

  /**
   * Restores the flow map from the store (retrying with backoff while it is unreachable), then
   * starts following peers and sweeping. Resolves when ready; rejects if stopped (or `signal`
   * aborted) first.
   */
  async start(options: { signal?: AbortSignal } = {}): Promise<void> {
    const { state, log, followed } = this.#ctx;
    if (!state.move("restoring", "start", { vips: followed.list() })) {
      throw new Error(`Cannot start flow agent "${this.node}": it is ${state.current}`);
    }
    const run = this.#run = new AbortController();
    this.#outage.arm(run.signal);
    const onAbort = () => void this.stop();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    if (options.signal?.aborted) onAbort();
    const backoff = new Backoff({ minMs: 100, maxMs: 2000 });
    try {
      for (let i = 0; i < 1_000_000 && state.current === "restoring"; i++) {
        try {
          await this.#restorer.exclusive(async () => {
            if (state.current !== "restoring") return;
            await this.#outage.recordInstances();
            await this.#restorer.restore();
            // Under the lock, so a concurrent setVips sees "ready" only with every LB IP restored.
            state.move("ready", "restored", { vips: followed.list() });
          });
        } catch (err) {
          if (state.current !== "restoring") break;
          const delay = backoff.next();
          log.warn("flow restore failed, retrying", { err, retry_ms: Math.round(delay) });
          await sleep(delay, run.signal).catch(() => {});
        }
      }
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
    }
    if (state.current !== "ready") {
      throw new Error(`Cannot start flow agent "${this.node}": stopped before restoring`);
    }
    this.#following = this.#follower.run(run.signal);
    const unsubscribe = this.#ctx.store.onReconnect?.(() => void this.#outage.verify("reconnect"));
    if (unsubscribe) run.signal.addEventListener("abort", unsubscribe, { once: true });
    this.#sweeper.start();
    this.#learner.schedule();
  }

  /** Stops following, sweeping and writing (queued flows stay queued). Does not close the store. */
  stop(): Promise<void> {
    const { state } = this.#ctx;
    this.#stopping ??= (async () => {
      if (!state.move("stopping", "stop")) return;
      this.#run.abort();
      await Promise.allSettled([
        this.#following,
        this.#sweeper.stop(),
        this.#outage.settled(),
        this.#learner.stop(),
        this.#restorer.exclusive(() => Promise.resolve()),
      ]);
      this.#ctx.tally.flush();
      state.move("stopped", "stopped");
    })().finally(() => this.#stopping = null);
    return this.#stopping;
  }

  /**
   * Takes one new-flow event from the datapath. Never waits: the flow is queued and written in
   * the next batch.
   */
  learn(event: AnyFlowEvent): void {
    const vip = this.#ctx.followed.vipOf(event.key.daddr);
    if (vip === undefined) {
      this.#ctx.metrics.ignored.inc();
      return;
    }
    this.#learner.push(vip, event);
  }

  /**
   * Makes `view` the services config flows from the store are checked against: a flow is
   * installed only if its backend serves its frontend (LB IP, port, protocol) there; others are
   * counted (`holdfast_flows_rejected_total{vip,reason}`) and logged. Call it before `start()`
   * and after every reload, with the config the control plane was given — once its maps carry
   * it, so the datapath picks no more removed backends.
   *
   * Flows in this node's map (of followed LB IPs) whose backend no longer serves their frontend
   * are removed here and now (`holdfast_flows_removed_total{reason="purge"}`): whether or not
   * they reached the store, and whoever learned them, their clients get a clean new choice.
   * Returns the number removed.
   */
  setServices(view: ServicesView | null): number {
    const { gate, table, followed, metrics, log, node } = this.#ctx;
    const left = gate.set(view);
    // Only a reload that removed a backend from a frontend walks the map (not every model change).
    if (view === null || left.size === 0) return 0;
    const gone = [];
    for (const e of table.entries()) {
      if (!left.has(e.value.backend) || followed.vipOf(e.key.daddr) === undefined) continue;
      if (!gate.stillServes(e.key, e.value.backend)) gone.push(e);
    }
    let removed = 0;
    for (const e of gone) {
      if (!table.delete(e.key)) continue;
      removed++;
      const vip = formatFlowAddress(e.key.daddr);
      metrics.removed.inc({ vip, reason: "purge" });
      log.debug("flow purged", {
        vip,
        flow: describeFlow(e.key),
        backend: formatFlowAddress(e.value.backend),
        by: node,
        why: "backend no longer serves the frontend",
      });
    }
    if (removed > 0) {
      log.info("flows purged", {
        flows: removed,
        backends: [...left].map(formatFlowAddress),
        by: node,
        why: "backend no longer serves the frontend",
      });
    }
    return removed;
  }

  /**
   * Exceptions-only sharing's handshake (`_handshake.ts`), awaited before the datapath gets a
   * service's next Maglev table: this node's flows the next table moves are published, stored
   * flows it would move are installed. Does nothing in mode `all`.
   */
  tableChanging(changes: readonly TableChange[]): Promise<void> {
    if (this.#ctx.sharing !== "exceptions") return Promise.resolve();
    return tableChanging(this.#ctx, changes);
  }

  /**
   * Makes `vips` the followed LB IPs, e.g. after a config reload. Safe while running and
   * concurrently with {@link learn}; calls are applied one at a time, in order; idempotent.
   *
   * - An added LB IP is restored first (its stored flows installed into the flow map, local
   *   flows the store lacks written — e.g. ones the datapath created before it was followed),
   *   then its stream is followed from the restore's tail, and from then on its new flows are
   *   learned, its activity touched and its idle flows expired. Resolves once restored. Before
   *   `start()` (or while the store is down) it is only recorded: the start (or recovery)
   *   restore covers it.
   * - A removed LB IP is no longer followed, learned, touched or expired here; its stored flows
   *   stay in the store (other nodes may serve it; unused keys expire by TTL). Its entries in the
   *   flow map are kept and removed locally once idle for the idle timeout (counted: reason
   *   `unfollowed`), so a reverted config change keeps its connections.
   *
   * New-flow events for an LB IP not followed (yet) are dropped and counted
   * (`holdfast_flow_events_ignored_total`): the flow stays in the map and the restore that
   * starts following its LB IP writes it, so nothing is lost.
   */
  setVips(vips: readonly string[]): Promise<void> {
    return this.#restorer.exclusive(() => this.#applyVips(vips));
  }

  async #applyVips(vips: readonly string[]): Promise<void> {
    const { followed, log, state, table } = this.#ctx;
    const { removed, added } = followed.diff(vips);
    for (const [addr, vip] of removed) {
      followed.retire(addr, table.nowNs());
      this.#ctx.positions.delete(vip);
      this.#outage.forget(vip);
      log.info("stopped following LB IP", { vip, following: followed.list() });
    }
    if (added.size === 0) return;
    for (const [addr, vip] of added) followed.add(addr, vip);
    if (!state.inSync) {
      // Not started yet, or the store is down: the pending start/recovery restore covers them.
      const pending = state.ready ? "store unavailable" : "start";
      for (const vip of added.values()) {
        log.info("following LB IP", { vip, following: followed.list(), restored: false, pending });
      }
      return;
    }
    try {
      await this.#outage.recordInstances([...added.values()]);
      await this.#restorer.restore(added);
    } catch (err) {
      // Followed already; recovery restores every followed LB IP, these included.
      this.#outage.failed(err, "restore");
      log.info("following LB IP", {
        vip: [...added.values()],
        following: followed.list(),
        restored: false,
        pending: "store unavailable",
      });
      return;
    }
    for (const vip of added.values()) {
      log.info("following LB IP", { vip, following: followed.list(), restored: true });
    }
  }
}
