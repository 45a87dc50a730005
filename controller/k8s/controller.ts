/**
 * The controller's reconcile loop. On any change (debounced, one pass at a time) it reads every
 * Service, AddressPool and the LoadBalancerConfig `default` from the cluster view, runs the
 * allocator ({@linkcode AddressAllocator.reconcile}: level-triggered, pure), feeds the claimed
 * Services (with their allocation applied) and their EndpointSlices to the model sink (the
 * controller's own tables through `K8sSource`), and writes what differs from what the cluster
 * shows: Service status (ingress + `holdfast.io/AddressAllocated`), pool status, the config's
 * `Ready` condition, and the allocator's Events.
 *
 * Only the leader allocates and writes: every write checks `isLeader()` at the moment it is made
 * (fencing). A follower feeds its tables from the status the leader wrote, so it is warm; when it
 * becomes leader it starts a fresh allocator, which takes every address from status and so
 * changes nothing. Failed writes are retried on a capped backoff.
 *
 * @module
 */

import { Backoff, type BackoffOptions } from "../../lib/backoff.ts";
import { log, type Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import { AddressAllocator, type IpamResult, isClaimed } from "../ipam/mod.ts";
import { CONFIG_NAME, type ConfigView, readConfig } from "./_config.ts";
import { type FedService, type ModelSink, SourceFeed } from "./_feed.ts";
import { planEvents, planStatusWrites } from "./_plan.ts";
import { withRetry } from "./_write_retry.ts";
import { type ClusterView, keyOf, type KubeObject } from "./objects.ts";
import type { ClusterWriter, EventInput } from "./status.ts";

/** The controller's metrics, on `registry` (lib/metrics.ts: registered per instance). */
const controllerMetrics = (registry: Registry) => ({
  reconciles: registry.counter(
    "holdfast_controller_reconciles_total",
    "Reconcile passes (every Service and pool each time)",
  ),
  reconcileSeconds: registry.histogram(
    "holdfast_controller_reconcile_seconds",
    "Duration of a reconcile pass, writes included",
  ),
  allocations: registry.counter(
    "holdfast_controller_allocations_total",
    "Addresses allocated (AddressAllocated Events)",
  ),
  allocationFailures: registry.counter(
    "holdfast_controller_allocation_failures_total",
    "Services that could not get an address (AllocationFailed Events)",
  ),
  writes: registry.counter(
    "holdfast_controller_writes_total",
    "Writes to the API server by kind (Service, AddressPool, LoadBalancerConfig, Event)",
    { labelNames: ["kind"] },
  ),
  writeFailures: registry.counter(
    "holdfast_controller_write_failures_total",
    "Failed writes to the API server by kind (retried on the next pass)",
    { labelNames: ["kind"] },
  ),
  writeRetries: registry.counter(
    "holdfast_controller_write_retries_total",
    "Writes tried again at once by kind (429, 500/503/504, or 409 on a write without precondition)",
    { labelNames: ["kind"] },
  ),
});

/** Options of {@linkcode LbController}. */
export interface ControllerOptions {
  /** The informers' caches (or any list of objects). */
  view: ClusterView;
  /** Where status and Events go. */
  writer: ClusterWriter;
  /** The controller's tables (a `K8sSource`); absent: no model is built. */
  sink?: ModelSink;
  /** Whether this replica leads right now (default: always). Checked before every write. */
  isLeader?: () => boolean;
  /** Quiet time before a triggered pass runs (default 20 ms). */
  debounceMs?: number;
  /** Retry schedule after failed writes (default 100 ms .. 30 s). */
  retry?: BackoffOptions;
  /**
   * Writes in flight at once (default 8; one kept-alive connection each). Each write that is
   * refused with 429/500/503/504 (or 409 without a precondition) is tried again in place, up to 4
   * times on a 20 ms .. 1 s backoff or the answer's `Retry-After` (`_write_retry.ts`).
   */
  concurrency?: number;
  /** Waits between a write's tries (tests inject one; default a timer). */
  sleep?: (ms: number) => Promise<void>;
  /** Clock of conditions' lastTransitionTime (default `new Date()`). */
  now?: () => Date;
  logger?: Logger;
  /** Where its metrics go (default the process registry, served at `/metrics`). */
  registry?: Registry;
}

/** What one pass did. */
export interface PassSummary {
  leader: boolean;
  writes: number;
  failures: number;
  fed: number;
  events: string[];
}

/** Runs `tasks` with at most `n` in flight. */
async function limited(tasks: (() => Promise<void>)[], n: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await tasks[next++]!();
  };
  await Promise.all(Array.from({ length: Math.min(n, tasks.length) }, worker));
}

/** The reconcile loop; see the module doc. */
export class LbController {
  readonly #o: ControllerOptions;
  readonly #log: Logger;
  readonly #feed: SourceFeed | undefined;
  readonly #backoff: Backoff;
  readonly #metrics: ReturnType<typeof controllerMetrics>;
  #allocator: AddressAllocator | undefined;
  #claimKey = "";
  #led = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When the scheduled pass runs (performance.now()). */
  #due = 0;
  #running: Promise<void> | undefined;
  #dirty = false;
  #stopped = false;
  /** Status writes not yet seen by the informers: key → resourceVersion written over, time. */
  readonly #pending = new Map<string, { rv: string; at: number }>();
  /** Waiting for a pass made as leader to have fed the sink. */
  #leaderFed: (() => void)[] = [];
  /** Events that failed to be written, retried on the next passes. */
  #eventBacklog: { event: EventInput; tries: number }[] = [];
  /**
   * Resolves once the first pass has fed the model sink (the tables hold the initial state; its
   * status writes may still be in flight), so the model is published without waiting for them.
   */
  readonly firstPass: Promise<void>;
  #markFirst!: () => void;

  constructor(options: ControllerOptions) {
    this.#o = options;
    this.#log = (options.logger ?? log).with({ component: "k8s-controller" });
    this.#feed = options.sink ? new SourceFeed(options.sink, this.#log) : undefined;
    this.#backoff = new Backoff(options.retry ?? { minMs: 100, maxMs: 30_000 });
    this.#metrics = controllerMetrics(options.registry ?? processRegistry);
    this.firstPass = new Promise((r) => (this.#markFirst = r));
  }

  /**
   * Schedules a pass (debounced; one at a time; a change during a pass runs another after it).
   * A sooner request replaces a later one (a change does not wait out a retry's backoff).
   */
  trigger(delayMs = this.#o.debounceMs ?? 20): void {
    if (this.#stopped) return;
    const due = performance.now() + delayMs;
    if (this.#timer !== undefined) {
      if (due >= this.#due) return;
      clearTimeout(this.#timer);
    }
    this.#due = due;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#running) {
        this.#dirty = true;
        return;
      }
      this.#running = this.reconcile().then(() => {}, (err) => {
        this.#log.error("reconcile pass failed", { error: String(err) });
        this.trigger(this.#backoff.next());
      }).finally(() => {
        this.#running = undefined;
        if (this.#dirty) {
          this.#dirty = false;
          this.trigger();
        }
      });
    }, delayMs);
  }

  /**
   * Resolves once a pass made as leader has fed the sink: the tables hold the leader's decisions
   * (start publishing the model then, not with a follower's view).
   */
  leaderFed(): Promise<void> {
    return new Promise((resolve) => this.#leaderFed.push(resolve));
  }

  /** Forgets the allocator's memory: the next pass restores from status (new leadership). */
  resetAllocator(): void {
    this.#allocator = undefined;
  }

  /** One pass now (tests call it directly, never while `trigger` runs passes). */
  async reconcile(): Promise<PassSummary> {
    const started = performance.now();
    this.#metrics.reconciles.inc();
    const view = this.#o.view;
    const leader = this.#o.isLeader?.() ?? true;
    if (leader && !this.#led) this.#allocator = undefined;
    this.#led = leader;
    const cfg = readConfig(view.list("loadbalancerconfigs"), view.list("nodes"));
    const claimKey = JSON.stringify(cfg.claim);
    if (claimKey !== this.#claimKey) this.#allocator = undefined;
    this.#claimKey = claimKey;
    const services = view.list("services");
    const pools = view.list("addresspools");
    const summary: PassSummary = { leader, writes: 0, failures: 0, fed: 0, events: [] };
    let result: IpamResult | undefined;
    let fed: FedService[];
    if (leader) {
      this.#allocator ??= new AddressAllocator(cfg.claim);
      result = this.#allocator.reconcile(pools, services);
      const byKey = new Map(services.map((s) => [keyOf(s), s]));
      fed = result.services.map((a) => ({
        object: byKey.get(`${a.namespace}/${a.name}`)!,
        addresses: a.addresses,
      }));
    } else {
      fed = services.filter((s) => isClaimed(s, cfg.claim)).map((object) => ({ object }));
    }
    if (this.#feed) {
      summary.fed = this.#feed.sync(fed, view.list("endpointslices"), cfg.defaults);
    }
    this.#markFirst();
    if (leader) { for (const resolve of this.#leaderFed.splice(0)) resolve(); }
    if (result) await this.#write(result, services, pools, cfg, summary);
    if (summary.failures > 0) this.trigger(this.#backoff.next());
    else this.#backoff.reset();
    this.#metrics.reconcileSeconds.observe(undefined, (performance.now() - started) / 1000);
    this.#log.debug("reconciled", { ...summary, events: summary.events.length });
    return summary;
  }

  async #write(
    result: IpamResult,
    services: readonly KubeObject[],
    pools: readonly KubeObject[],
    cfg: ConfigView,
    summary: PassSummary,
  ): Promise<void> {
    const now = this.#o.now?.() ?? new Date();
    for (const [key, p] of this.#pending) {
      if (performance.now() - p.at >= PENDING_MS) this.#pending.delete(key);
    }
    const problems = this.#feed?.problems;
    const planned = planStatusWrites(result, services, pools, this.#config(), cfg, now, problems)
      // Written over this very version already: the informers have not brought it back yet.
      .filter((w) => this.#pending.get(w.key)?.rv !== (w.resourceVersion ?? ""));
    const tasks = planned.map((w) => async () => {
      if (!(this.#o.isLeader?.() ?? true)) return; // fencing: not the leader any more
      this.#pending.set(w.key, { rv: w.resourceVersion ?? "", at: performance.now() });
      try {
        // A precondition (resourceVersion) makes a conflict final: the next pass replans it.
        const retries = await withRetry(() => w.apply(this.#o.writer), {
          conflictRetries: w.resourceVersion === undefined,
          sleep: this.#o.sleep,
        });
        if (retries > 0) this.#metrics.writeRetries.inc({ kind: w.kind }, retries);
        this.#metrics.writes.inc({ kind: w.kind });
        summary.writes++;
      } catch (err) {
        this.#pending.delete(w.key);
        this.#metrics.writeFailures.inc({ kind: w.kind });
        summary.failures++;
        this.#log.warn("write failed; retrying", {
          kind: w.kind,
          object: w.key,
          error: errorText(err),
        });
      }
    });
    const fresh = planEvents(result, services, pools);
    for (const e of fresh) {
      summary.events.push(`${e.reason} ${e.regarding.name}`);
      if (e.reason === "AddressAllocated") this.#metrics.allocations.inc();
      if (e.reason === "AllocationFailed") this.#metrics.allocationFailures.inc();
    }
    await limited(tasks, this.#o.concurrency ?? CONCURRENCY);
    // Events after status, so a reader who sees the Event finds the status it speaks of. The
    // allocator emits each once: a failed one is kept for the next passes (bounded).
    const events = [...this.#eventBacklog, ...fresh.map((event) => ({ event, tries: 0 }))];
    this.#eventBacklog = [];
    await limited(
      events.map((e) => async () => {
        if (!(this.#o.isLeader?.() ?? true)) return;
        try {
          const event = e.event;
          const retries = await withRetry(() => this.#o.writer.emitEvent(event), {
            conflictRetries: true, // a generated name taken: the next try generates another
            sleep: this.#o.sleep,
          });
          if (retries > 0) this.#metrics.writeRetries.inc({ kind: "Event" }, retries);
          this.#metrics.writes.inc({ kind: "Event" });
        } catch (err) {
          this.#metrics.writeFailures.inc({ kind: "Event" });
          summary.failures++;
          const keep = e.tries + 1 < EVENT_TRIES && this.#eventBacklog.length < EVENT_BACKLOG;
          if (keep) this.#eventBacklog.push({ event: e.event, tries: e.tries + 1 });
          this.#log.warn("event not written", {
            reason: e.event.reason,
            object: e.event.regarding.name,
            error: errorText(err),
            retry: keep,
          });
        }
      }),
      this.#o.concurrency ?? CONCURRENCY,
    );
  }

  #config(): KubeObject | undefined {
    return this.#o.view.list("loadbalancerconfigs").find((c) => c.metadata?.name === CONFIG_NAME);
  }

  /** Stops scheduling passes and waits for the running one. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }
}

/**
 * Writes in flight by default. Measured in `bench:k8s` (the controller, the test API server and
 * the model publisher share one thread): 32 in flight wrote every status no sooner than 8 and
 * delayed the model's first publish (0.67–0.86 s against 0.31–0.60 s), so the agents' cold start.
 */
const CONCURRENCY = 8;
/** Tries per Event, and Events kept for retry at most. */
const EVENT_TRIES = 5, EVENT_BACKLOG = 1_000;
/** How long a write's resourceVersion holds back rewriting the same object (ms). */
const PENDING_MS = 5_000;

function errorText(err: unknown): string {
  const e = err as { code?: number; body?: unknown; message?: string };
  if (e?.code === undefined) return String(err);
  // A parsed Status (raw writes) says it in its message; client-node's bodies are text.
  const body = typeof e.body === "object" && e.body !== null
    ? (e.body as { message?: unknown }).message ?? JSON.stringify(e.body)
    : e.body;
  return `${e.code}: ${String(body ?? e.message)}`;
}
