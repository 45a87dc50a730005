/**
 * The flow-sync agent of one LB node: mirrors the node's flow map and the shared store.
 *
 * - New flows (datapath ring-buffer events) are queued without waiting and written to the store
 *   in batches as soon as a write slot is free (so a batch holds what arrived during the previous
 *   write), while the store is up.
 * - Peers' additions and removals are followed on the store's streams and applied to the flow
 *   map (own additions are no-ops; two nodes learning one flow at once converge on the stored,
 *   last-written backend).
 * - `start()` restores every stored flow of the node's LB IPs before it resolves (ready).
 * - A sweep pushes activity (from the map's last seen) to the store, expires idle flows in the
 *   store (the removals come back on the stream and leave every map), and removes local flows
 *   that are idle and no longer stored.
 * - Store down: the map keeps forwarding, events wait in a bounded queue (overflow counted and
 *   logged) and are written when it returns; if it came back empty (restarted), every local flow
 *   is written again and the map is restored from it.
 *
 * @module
 */

import {
  describeFlow,
  FLOW_F_PEER,
  type FlowEntry,
  type FlowEvent,
  type FlowKey,
} from "../bpf/flow.ts";
import type { FlowTable } from "./table.ts";
import { type FlowChange, type FlowStore, StoreUnavailableError } from "./store.ts";
import { BoundedQueue } from "./queue.ts";
import { setImmediate } from "node:timers";
import { log as rootLog, type Logger } from "../../lib/log.ts";
import {
  type Counter,
  type Gauge,
  type Histogram,
  Registry,
  registry as rootRegistry,
} from "../../lib/metrics.ts";
import { flowField, flowId, parseFlowField } from "./field.ts";
import { formatIpv4, parseIpv4 } from "../../lib/ipv4.ts";

/** How far the datapath's last_seen may trail CLOCK_MONOTONIC (bpf/lb.h: per-tick clock). */
const LAST_SEEN_LAG_NS = 20_000_000;

/** Options of {@link FlowSyncAgent}. */
export interface FlowSyncAgentOptions {
  /** This LB node's name, written with every change (to skip own additions). */
  node: string;
  /**
   * LB IPs (dotted) this node follows at start; events for others are ignored (counted in
   * `holdfast_flow_events_ignored_total`). Changed while running with
   * {@link FlowSyncAgent.setVips}.
   */
  vips: readonly string[];
  /** A flow with no packet for this long expires everywhere (default 300,000 ms). */
  idleTimeoutMs?: number;
  /** Period of the activity/expiry sweep (default idle timeout / 4, at most 30,000 ms). */
  sweepIntervalMs?: number;
  /** Flows per store write (default 1000). */
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
  /** Epoch written with a learned flow (e.g. the service's backend-set generation). */
  epochOf?: (vip: string) => number;
  /** Metrics registry (default the process-wide one). */
  registry?: Registry;
  /** Logger (default the process-wide one). */
  logger?: Logger;
}

interface Pending {
  vip: string;
  key: FlowKey;
  /** Filled in when written (kept off the new-flow path). */
  field: string;
  backend: number;
  epoch: number;
  queuedAt: number;
}

interface Metrics {
  learned: Counter;
  installed: Counter;
  removed: Counter;
  dropped: Counter;
  ignored: Counter;
  queue: Gauge;
  up: Gauge;
  ready: Gauge;
  writeSeconds: Histogram;
  restoreSeconds: Gauge;
}

function makeMetrics(r: Registry): Metrics {
  const vip = { labelNames: ["vip"] };
  return {
    learned: r.counter("holdfast_flows_learned_total", "Flows learned here and stored.", vip),
    installed: r.counter(
      "holdfast_flows_installed_total",
      "Flows installed into the flow map from the store (peers, restore).",
      vip,
    ),
    removed: r.counter(
      "holdfast_flows_removed_total",
      "Flows removed from the flow map (reason: idle, purge, orphan, stale).",
      { labelNames: ["vip", "reason"] },
    ),
    dropped: r.counter(
      "holdfast_flow_queue_dropped_total",
      "Learned flows dropped because the outage queue was full.",
    ),
    ignored: r.counter(
      "holdfast_flow_events_ignored_total",
      "New-flow events for an LB IP this agent does not sync.",
    ),
    queue: r.gauge("holdfast_flow_queue_length", "Learned flows waiting to be stored."),
    up: r.gauge("holdfast_flow_store_up", "1 when the flow store is reachable."),
    ready: r.gauge("holdfast_flow_agent_ready", "1 once the flow map was restored."),
    writeSeconds: r.histogram(
      "holdfast_flow_write_seconds",
      "Time from a new-flow event to its batch being stored (oldest flow of each batch).",
    ),
    restoreSeconds: r.gauge("holdfast_flow_restore_seconds", "Duration of the last restore."),
  };
}

/** Orders stream entry IDs (`<ms>-<seq>`): negative when `a` is older than `b`. */
function compareStreamIds(a: string, b: string): number {
  const [am = "0", as = "0"] = a.split("-");
  const [bm = "0", bs = "0"] = b.split("-");
  const d = Number(am) - Number(bm);
  return d !== 0 ? Math.sign(d) : Math.sign(Number(as) - Number(bs));
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Mirrors one LB node's flow map with the shared flow store. */
export class FlowSyncAgent {
  readonly node: string;
  readonly #table: FlowTable;
  readonly #store: FlowStore;
  /** Followed LB IPs: learned, restored, followed, touched and expired. */
  readonly #vipByAddr = new Map<number, string>();
  /** LB IPs no longer followed → when (table clock, ns); their map entries idle out locally. */
  readonly #retired = new Map<number, number>();
  /** Serializes restores (start, recovery) and LB IP set changes. */
  #vipLock: Promise<unknown> = Promise.resolve();
  readonly #queue: BoundedQueue<Pending>;
  readonly #positions = new Map<string, string>();
  /** Flows learned here that a peer's addition replaced before ours was seen on the stream. */
  readonly #contested = new Set<string>();
  readonly #m: Metrics;
  readonly #log: Logger;
  readonly #idleMs: number;
  readonly #sweepMs: number;
  readonly #batchSize: number;
  readonly #flushMs: number;
  readonly #maxInFlight: number;
  readonly #readBlockMs: number;
  readonly #epochOf: (vip: string) => number;

  #ready = false;
  #running = false;
  #down = false;
  #recovering: Promise<void> | null = null;
  /** Store incarnation token per followed LB IP (a change means Redis lost its data). */
  readonly #instance = new Map<string, string>();
  #inFlight = 0;
  #inFlightDone: Promise<void>[] = [];
  #flushTimer: ReturnType<typeof setTimeout> | "immediate" | undefined;
  #sweepTimer: ReturnType<typeof setInterval> | undefined;
  #sweeping: Promise<void> | null = null;
  #follower: Promise<void> | null = null;
  #lastSweepNs = 0;
  #droppedSinceLog = 0;
  #lastDropLog = -Infinity;
  /** Queue drops already compensated by rewriting learned flows. */
  #droppedAtDown = 0;
  /** Store failures since the last successful write (recovery backoff). */
  #failStreak = 0;

  constructor(table: FlowTable, store: FlowStore, options: FlowSyncAgentOptions) {
    this.node = options.node;
    this.#table = table;
    this.#store = store;
    for (const vip of options.vips) this.#vipByAddr.set(parseIpv4(vip), vip);
    this.#idleMs = options.idleTimeoutMs ?? 300_000;
    this.#sweepMs = options.sweepIntervalMs ?? Math.min(30_000, Math.max(10, this.#idleMs / 4));
    this.#batchSize = options.batchSize ?? 1000;
    this.#flushMs = options.flushIntervalMs ?? 0;
    this.#maxInFlight = options.maxInFlight ?? 4;
    this.#readBlockMs = options.readBlockMs ?? 1000;
    this.#epochOf = options.epochOf ?? (() => 0);
    this.#queue = new BoundedQueue(options.queueCapacity ?? 100_000);
    this.#m = makeMetrics(options.registry ?? rootRegistry);
    this.#m.queue.onCollect(() => this.#m.queue.set(undefined, this.#queue.size));
    this.#log = (options.logger ?? rootLog).with({ component: "flows", node: this.node });
  }

  /** True once the flow map holds every stored flow of this node's LB IPs. */
  get ready(): boolean {
    return this.#ready;
  }

  /** True while the store is believed reachable. */
  get storeUp(): boolean {
    return !this.#down;
  }

  /** Flows waiting to be stored. */
  get queued(): number {
    return this.#queue.size;
  }

  /** Flows dropped from the outage queue so far. */
  get dropped(): number {
    return this.#queue.dropped;
  }

  /**
   * Restores the flow map from the store (retrying while it is unreachable), then starts
   * following peers and sweeping. Resolves when ready.
   */
  async start(options: { signal?: AbortSignal } = {}): Promise<void> {
    if (this.#running) throw new Error(`Cannot start flow agent "${this.node}": already running`);
    this.#running = true;
    let delay = 100;
    for (;;) {
      if (options.signal?.aborted || !this.#running) {
        this.#running = false;
        throw new Error(`Cannot start flow agent "${this.node}": aborted before restore`);
      }
      try {
        await this.#exclusive(async () => {
          await this.#readInstances();
          await this.#restore();
          // Under the lock, so a concurrent setVips sees "ready" only with every LB IP restored.
          this.#setDown(false);
          this.#ready = true;
        });
        break;
      } catch (err) {
        this.#setDown(true);
        this.#log.warn("flow restore failed, retrying", { err, retry_ms: delay });
        await sleep(delay);
        delay = Math.min(delay * 2, 2000);
      }
    }
    this.#m.ready.set(undefined, 1);
    this.#follower = this.#follow();
    this.#sweepTimer = setInterval(() => void this.sweep(), this.#sweepMs);
    this.#scheduleFlush();
  }

  /** Stops following, sweeping and flushing (queued flows stay queued). Does not close the store. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#ready = false;
    this.#m.ready.set(undefined, 0);
    clearInterval(this.#sweepTimer);
    if (this.#flushTimer !== "immediate") clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    await Promise.allSettled([
      this.#follower,
      this.#sweeping,
      this.#recovering,
      ...this.#inFlightDone,
    ]);
  }

  /**
   * Takes one new-flow event from the datapath. Never waits: the flow is queued and written in
   * the next batch.
   */
  learn(event: FlowEvent): void {
    const vip = this.#vipByAddr.get(event.key.daddr);
    if (vip === undefined) {
      this.#m.ignored.inc();
      return;
    }
    const dropped = this.#queue.push({
      vip,
      key: event.key,
      field: "",
      backend: event.backend,
      epoch: this.#epochOf(vip),
      queuedAt: performance.now(),
    });
    if (dropped > 0) this.#countDrops(dropped);
    this.#scheduleFlush();
  }

  /** LB IPs (dotted) followed now. */
  get vips(): string[] {
    return [...this.#vipByAddr.values()];
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
    const want = new Map<number, string>();
    for (const vip of vips) want.set(parseIpv4(vip), vip);
    return this.#exclusive(() => this.#applyVips(want));
  }

  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#vipLock.then(fn, fn);
    this.#vipLock = run.catch(() => {});
    return run;
  }

  async #applyVips(want: Map<number, string>): Promise<void> {
    for (const [addr, vip] of [...this.#vipByAddr]) {
      if (want.has(addr)) continue;
      this.#vipByAddr.delete(addr);
      this.#positions.delete(vip);
      this.#instance.delete(vip);
      this.#retired.set(addr, this.#table.nowNs());
      this.#log.info("stopped following LB IP", { vip, following: this.vips });
    }
    const added = new Map<number, string>();
    for (const [addr, vip] of want) {
      if (this.#vipByAddr.has(addr)) continue;
      added.set(addr, vip);
      this.#retired.delete(addr);
    }
    if (added.size === 0) return;
    if (!this.#ready || this.#down) {
      // Not started yet, or the store is down: the pending start/recovery restore covers them.
      for (const [addr, vip] of added) {
        this.#vipByAddr.set(addr, vip);
        this.#log.info("following LB IP", {
          vip,
          following: this.vips,
          restored: false,
          pending: this.#running ? "store unavailable" : "start",
        });
      }
      return;
    }
    for (const [addr, vip] of added) this.#vipByAddr.set(addr, vip);
    try {
      await this.#readInstances([...added.values()]);
      await this.#restore(added);
    } catch (err) {
      // Followed already; recovery restores every followed LB IP, these included.
      this.#storeFailed(err, "restore");
      this.#log.info("following LB IP", {
        vip: [...added.values()],
        following: this.vips,
        restored: false,
        pending: "store unavailable",
      });
      return;
    }
    for (const vip of added.values()) {
      this.#log.info("following LB IP", { vip, following: this.vips, restored: true });
    }
  }

  /** Records the store incarnation of `vips` (default all followed ones). */
  async #readInstances(vips: readonly string[] = this.vips): Promise<void> {
    const ids = await Promise.all(vips.map((v) => this.#store.instanceId([v])));
    vips.forEach((v, i) => this.#instance.set(v, ids[i]!));
  }

  /** Learns every event of `events` (e.g. the datapath's ring buffer) until it ends. */
  async consume(events: AsyncIterable<FlowEvent>): Promise<void> {
    for await (const ev of events) this.learn(ev);
  }

  /** Writes everything queued now (when the store is up) and waits for it. For tests. */
  async flush(): Promise<void> {
    for (let i = 0; i < 10_000 && this.#queue.size > 0 && !this.#down; i++) {
      this.#pump();
      await Promise.allSettled(this.#inFlightDone);
    }
    await Promise.allSettled(this.#inFlightDone);
  }

  #countDrops(n: number): void {
    this.#m.dropped.inc(undefined, n);
    this.#droppedSinceLog += n;
    const now = performance.now();
    if (now - this.#lastDropLog >= 5000) {
      this.#log.warn("flow queue overflow, oldest flows dropped", {
        dropped: this.#droppedSinceLog,
        dropped_total: this.#queue.dropped,
        capacity: this.#queue.capacity,
      });
      this.#droppedSinceLog = 0;
      this.#lastDropLog = now;
    }
  }

  #setDown(down: boolean): void {
    this.#down = down;
    this.#m.up.set(undefined, down ? 0 : 1);
  }

  /**
   * Writes as soon as a write slot is free ("send when idle, batch when busy"): at low rates a
   * flow goes out on the next turn of the event loop; under load, flows gather while earlier
   * batches are in flight and go out as full batches when one completes.
   */
  #scheduleFlush(): void {
    if (!this.#ready || this.#down || this.#queue.size === 0) return;
    const full = this.#queue.size >= this.#batchSize;
    if (this.#flushTimer !== undefined) {
      if (this.#flushTimer === "immediate" || !full) return;
      clearTimeout(this.#flushTimer); // a full batch does not wait for the gathering delay
    }
    if (this.#flushMs > 0 && !full) {
      this.#flushTimer = setTimeout(() => {
        this.#flushTimer = undefined;
        this.#pump();
      }, this.#flushMs);
      return;
    }
    // setImmediate: a nested setTimeout(0) would be clamped to 4 ms.
    this.#flushTimer = "immediate";
    setImmediate(() => {
      this.#flushTimer = undefined;
      this.#pump();
    });
  }

  #pump(): void {
    while (
      this.#running && !this.#down && this.#queue.size > 0 && this.#inFlight < this.#maxInFlight
    ) {
      const batch = this.#queue.take(this.#batchSize);
      this.#inFlight++;
      const done = this.#write(batch).finally(() => {
        this.#inFlight--;
        this.#inFlightDone = this.#inFlightDone.filter((p) => p !== done);
        if (this.#running) this.#scheduleFlush();
      });
      this.#inFlightDone.push(done);
    }
  }

  async #write(batch: Pending[]): Promise<void> {
    const byVip = new Map<string, Pending[]>();
    for (const p of batch) {
      if (p.field === "") p.field = flowField(p.key);
      let list = byVip.get(p.vip);
      if (!list) byVip.set(p.vip, list = []);
      list.push(p);
    }
    const nowMs = Date.now();
    let oldest = Infinity;
    try {
      for (const [vip, list] of byVip) {
        await this.#store.learn(vip, list, {
          node: this.node,
          nowMs,
          idleTimeoutMs: this.#idleMs,
        });
        this.#m.learned.inc({ vip }, list.length);
        const logEach = this.#log.enabled("info");
        for (const p of list) {
          if (p.queuedAt < oldest) oldest = p.queuedAt;
          if (!logEach) continue;
          this.#log.info("flow learned", {
            vip,
            flow: describeFlow(p.key),
            backend: formatIpv4(p.backend),
            epoch: p.epoch,
          });
        }
        byVip.delete(vip);
      }
      this.#m.writeSeconds.observe(undefined, (performance.now() - oldest) / 1000);
      this.#failStreak = 0;
    } catch (err) {
      // Put back what was not written (vips already written were removed from byVip).
      const rest: Pending[] = [];
      for (const list of byVip.values()) rest.push(...list);
      const dropped = this.#queue.requeue(rest);
      if (dropped > 0) this.#countDrops(dropped);
      this.#storeFailed(err, "write");
    }
  }

  #storeFailed(err: unknown, during: string): void {
    if (!this.#down) {
      this.#failStreak++;
      if (err instanceof StoreUnavailableError) {
        this.#log.warn("flow store unavailable", { during, err, queued: this.#queue.size });
      } else {
        // Reachable but refusing (e.g. an ACL without a needed command): retried with backoff.
        this.#log.error("flow store rejected a request", { during, err, queued: this.#queue.size });
      }
    }
    this.#setDown(true);
    this.#recovering ??= this.#recover().finally(() => this.#recovering = null);
  }

  async #recover(): Promise<void> {
    // Consecutive failures without a successful write back off up to 5 s between attempts.
    let delay = Math.min(50 * 2 ** Math.min(this.#failStreak - 1, 10), 5000);
    while (this.#running) {
      await sleep(delay);
      delay = Math.max(delay, Math.min(delay * 2, 1000));
      try {
        await this.#exclusive(async () => {
          await this.#recoverOnce();
          // Under the lock, so a concurrent setVips sees "up" only with every LB IP restored.
          this.#droppedAtDown = this.#queue.dropped;
          this.#setDown(false);
        });
        this.#log.info("flow store available", { queued: this.#queue.size });
        this.#scheduleFlush();
        return;
      } catch (err) {
        this.#log.debug("flow store still unavailable", { err });
      }
    }
  }

  async #recoverOnce(): Promise<void> {
    const vips = this.vips;
    const ids = await Promise.all(vips.map((v) => this.#store.instanceId([v])));
    // LB IPs followed since the outage began have no recorded token yet: not a restart.
    const changed = vips.filter((v, i) => {
      const was = this.#instance.get(v);
      return was !== undefined && was !== ids[i];
    });
    if (changed.length > 0) {
      this.#log.warn("flow store restarted empty, rewriting local flows", {
        vips: changed,
        previous: changed.map((v) => this.#instance.get(v)),
        current: changed.map((v) => ids[vips.indexOf(v)]),
      });
      await this.#reseed();
      await this.#restore();
    } else {
      // Same data, but this node may have missed stream entries (or the stream was trimmed
      // past it) and flows may have fallen out of the full queue: restore reconciles both —
      // missed additions installed, missed removals applied, flows learned here but not
      // stored (the map still has them) written.
      if (this.#queue.dropped > this.#droppedAtDown) {
        this.#log.warn("flow queue overflowed during the outage, rewriting learned flows", {
          dropped: this.#queue.dropped - this.#droppedAtDown,
        });
      }
      await this.#restore();
    }
    vips.forEach((v, i) => this.#instance.set(v, ids[i]!));
  }

  /**
   * Writes every local flow of this node's LB IPs to the store (as any learn: last writer wins),
   * after the store lost its data.
   */
  async #reseed(): Promise<void> {
    const byVip = new Map<string, FlowEntry[]>();
    for (const e of this.#table.entries()) {
      const vip = this.#vipByAddr.get(e.key.daddr);
      if (vip === undefined) continue;
      let list = byVip.get(vip);
      if (!list) byVip.set(vip, list = []);
      list.push(e);
    }
    for (const [vip, list] of byVip) {
      await this.#publish(vip, list);
      this.#log.info("flows rewritten to store", { vip, flows: list.length });
    }
  }

  /** Installs every stored flow of `vips` (default all followed); sets the stream positions. */
  async #restore(vips: ReadonlyMap<number, string> = new Map(this.#vipByAddr)): Promise<void> {
    const t0 = performance.now();
    // Entries already in the map (pinned across an agent restart), by identity; those the store
    // also has are struck off while scanning, what remains is unknown to the store.
    const local = new Map<string, FlowEntry>();
    for (const e of this.#table.entries()) {
      if (vips.has(e.key.daddr)) local.set(flowId(e.key), e);
    }
    for (const [addr, vip] of vips) {
      const tail = await this.#store.streamTail(vip);
      let installed = 0;
      let stored = 0;
      for await (const page of this.#store.scan(vip)) {
        const entries: FlowEntry[] = [];
        for (const f of page) {
          const key = parseFlowField(f.field, addr);
          stored++;
          let lastSeenNs = 0;
          if (local.size > 0) {
            const id = flowId(key);
            const cur = local.get(id);
            if (cur) {
              local.delete(id);
              if (cur.value.backend === f.backend) continue;
              lastSeenNs = cur.value.lastSeenNs;
            }
          }
          entries.push({ key, value: { backend: f.backend, flags: FLOW_F_PEER, lastSeenNs } });
        }
        if (entries.length > 0) this.#table.putBatch(entries);
        installed += entries.length;
      }
      // Removed by setVips meanwhile: not followed (its map entries idle out as unfollowed).
      if (this.#vipByAddr.get(addr) === vip) this.#positions.set(vip, tail);
      this.#m.installed.inc({ vip }, installed);
      // Local entries the store lacks: flows learned here while the agent was away are written;
      // flows once installed from peers were removed meanwhile (expired, purged) and go — unless
      // the store is empty for this LB IP (it lost its data), then everything is written back.
      const missing = [...local.values()].filter((e) => e.key.daddr === addr);
      const publish = stored === 0
        ? missing
        : missing.filter((e) => (e.value.flags & FLOW_F_PEER) === 0);
      let removed = 0;
      if (stored > 0) {
        for (const e of missing) {
          if ((e.value.flags & FLOW_F_PEER) === 0 || !this.#table.delete(e.key)) continue;
          removed++;
          this.#log.info("flow removed, no longer stored", { vip, flow: describeFlow(e.key) });
        }
        if (removed > 0) this.#m.removed.inc({ vip, reason: "stale" }, removed);
      }
      await this.#publish(vip, publish);
      this.#log.info("flows restored", {
        vip,
        stored,
        installed,
        published: publish.length,
        removed,
        from_stream_id: tail,
      });
    }
    this.#m.restoreSeconds.set(undefined, (performance.now() - t0) / 1000);
  }

  /** Writes map entries to the store in batches (not through the queue: may be large). */
  async #publish(vip: string, entries: readonly FlowEntry[]): Promise<void> {
    const epoch = this.#epochOf(vip);
    for (let i = 0; i < entries.length; i += this.#batchSize) {
      const flows = entries.slice(i, i + this.#batchSize).map((e) => ({
        field: flowField(e.key),
        backend: e.value.backend,
        epoch,
      }));
      await this.#store.learn(vip, flows, {
        node: this.node,
        nowMs: Date.now(),
        idleTimeoutMs: this.#idleMs,
      });
    }
  }

  async #follow(): Promise<void> {
    let delay = 50;
    while (this.#running) {
      if (this.#down) {
        await (this.#recovering ?? sleep(50));
        if (this.#down) await sleep(50);
        continue;
      }
      try {
        const changes = await this.#store.read(this.#positions, {
          blockMs: this.#readBlockMs,
          count: 100,
        });
        delay = 50;
        if (!this.#running) return;
        for (const c of changes) this.#apply(c);
      } catch (err) {
        if (!this.#running) return;
        this.#storeFailed(err, "follow");
        await sleep(delay);
        delay = Math.min(delay * 2, 1000);
      }
    }
  }

  #apply(change: FlowChange): void {
    // A read started before the LB IP was unfollowed (or unfollowed and followed again, then
    // restored to a later position) may return entries no longer wanted: skip them.
    const pos = this.#positions.get(change.vip);
    if (pos === undefined || compareStreamIds(change.id, pos) <= 0) return;
    this.#positions.set(change.vip, change.id);
    const addr = parseIpv4(change.vip);
    if (change.op === "add") {
      // Own additions match the map already, except for a flow a peer learned at the same time
      // ("contested"): then the later stream entry wins on every node (last writer wins).
      if (change.node === this.node && this.#contested.size === 0) return;
      const entries: FlowEntry[] = [];
      for (const f of change.flows) {
        const key = parseFlowField(f.field, addr);
        const id = flowId(key);
        if (change.node === this.node && !this.#contested.delete(id)) continue;
        const cur = this.#table.get(key);
        if (cur?.backend === f.backend) continue;
        if (cur && (cur.flags & FLOW_F_PEER) === 0 && change.node !== this.node) {
          if (this.#contested.size < 100_000) this.#contested.add(id);
        }
        entries.push({
          key,
          value: { backend: f.backend, flags: FLOW_F_PEER, lastSeenNs: cur?.lastSeenNs ?? 0 },
        });
      }
      if (entries.length === 0) return;
      this.#table.putBatch(entries);
      this.#m.installed.inc({ vip: change.vip }, entries.length);
      for (const e of this.#log.enabled("info") ? entries : []) {
        this.#log.info(
          change.node === this.node ? "flow replaced by later learn" : "flow installed from peer",
          {
            vip: change.vip,
            flow: describeFlow(e.key),
            backend: formatIpv4(e.value.backend),
            peer: change.node,
          },
        );
      }
      return;
    }
    const reason = change.reason ?? "idle";
    let removed = 0;
    for (const f of change.flows) {
      const key = parseFlowField(f.field, addr);
      if (!this.#table.delete(key)) continue;
      removed++;
      this.#log.info(reason === "purge" ? "flow purged" : "flow expired", {
        vip: change.vip,
        flow: describeFlow(key),
        by: change.node,
      });
    }
    if (removed > 0) this.#m.removed.inc({ vip: change.vip, reason }, removed);
  }

  /**
   * One activity/expiry pass: pushes last seen of flows active since the previous pass, expires
   * idle flows in the store (announced, so every map drops them) and removes local flows that
   * are idle and no longer stored. Runs every `sweepIntervalMs`; callable directly in tests.
   */
  sweep(): Promise<void> {
    if (this.#sweeping || this.#down || !this.#ready) return this.#sweeping ?? Promise.resolve();
    this.#sweeping = this.#sweep()
      .catch((err) => this.#storeFailed(err, "sweep"))
      .finally(() => this.#sweeping = null);
    return this.#sweeping;
  }

  async #sweep(): Promise<void> {
    const nowNs = this.#table.nowNs();
    const nowMs = Date.now();
    const idleNs = this.#idleMs * 1e6;
    // The datapath stamps last_seen from a per-tick cached clock (up to ~2 jiffies behind
    // CLOCK_MONOTONIC), so a packet just after the previous pass can carry a stamp just before
    // it: look back a margin. Reporting a flow active twice is harmless; missing it is not.
    const since = this.#lastSweepNs - LAST_SEEN_LAG_NS;
    const active = new Map<string, { field: string; lastSeenMs: number }[]>();
    const idle = new Map<string, FlowKey[]>();
    const retiredIdle: FlowKey[] = [];
    const retiredLive = new Set<number>();
    for (const e of this.#table.entries()) {
      const vip = this.#vipByAddr.get(e.key.daddr);
      if (vip === undefined) {
        const since = this.#retired.get(e.key.daddr);
        if (since === undefined) continue;
        // Unfollowed LB IP: local idle-out only (peer-installed entries count from unfollowing).
        if (nowNs - Math.max(since, e.value.lastSeenNs) > idleNs) {
          if (retiredIdle.length < 10_000) retiredIdle.push(e.key);
        } else retiredLive.add(e.key.daddr);
        continue;
      }
      const seen = e.value.lastSeenNs;
      if (seen <= 0) continue;
      if (seen > since) {
        let list = active.get(vip);
        if (!list) active.set(vip, list = []);
        list.push({ field: flowField(e.key), lastSeenMs: nowMs - (nowNs - seen) / 1e6 });
      } else if (nowNs - seen > idleNs) {
        let list = idle.get(vip);
        if (!list) idle.set(vip, list = []);
        if (list.length < 10_000) list.push(e.key);
      }
    }
    this.#lastSweepNs = nowNs;
    for (const key of retiredIdle) {
      if (!this.#table.delete(key)) continue;
      const vip = formatIpv4(key.daddr);
      this.#m.removed.inc({ vip, reason: "unfollowed" });
      this.#log.info("flow expired", {
        vip,
        flow: describeFlow(key),
        by: this.node,
        followed: false,
      });
    }
    for (const [addr, since] of [...this.#retired]) {
      if (!retiredLive.has(addr) && nowNs - since > idleNs) this.#retired.delete(addr);
    }
    for (const [vip, seen] of active) {
      await this.#store.touch(vip, seen, { idleTimeoutMs: this.#idleMs });
    }
    for (const vip of this.#vipByAddr.values()) {
      // One node per round walks the LB IP's flows; the removals come back on the stream.
      await this.#store.expire(vip, nowMs - this.#idleMs, {
        node: this.node,
        lockMs: this.#sweepMs * 0.9,
      });
    }
    for (const [vip, keys] of idle) {
      const stored = await this.#store.exists(vip, keys.map(flowField));
      let removed = 0;
      keys.forEach((key, i) => {
        if (stored[i] || !this.#table.delete(key)) return;
        removed++;
        this.#log.info("flow expired", {
          vip,
          flow: describeFlow(key),
          by: this.node,
          stored: false,
        });
      });
      if (removed > 0) this.#m.removed.inc({ vip, reason: "orphan" }, removed);
    }
  }
}
