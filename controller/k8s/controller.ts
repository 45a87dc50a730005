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
import { registry } from "../../lib/metrics.ts";
import {
  ADDRESS_ALLOCATED_CONDITION,
  AddressAllocator,
  type IpamCondition,
  type IpamEvent,
  type IpamResult,
  isClaimed,
} from "../ipam/mod.ts";
import { type ConfigView, readConfig } from "./_config.ts";
import { type FedService, type ModelSink, SourceFeed } from "./_feed.ts";
import { type ClusterView, keyOf, type KubeObject } from "./objects.ts";
import {
  type ClusterWriter,
  type EventInput,
  mergeConditions,
  type ObjectTarget,
  sameConditions,
} from "./status.ts";

const reconciles = registry.counter(
  "holdfast_controller_reconciles_total",
  "Reconcile passes (every Service and pool each time)",
);
const reconcileSeconds = registry.histogram(
  "holdfast_controller_reconcile_seconds",
  "Duration of a reconcile pass, writes included",
);
const allocations = registry.counter(
  "holdfast_controller_allocations_total",
  "Addresses allocated (AddressAllocated Events)",
);
const allocationFailures = registry.counter(
  "holdfast_controller_allocation_failures_total",
  "Services that could not get an address (AllocationFailed Events)",
);
const writes = registry.counter(
  "holdfast_controller_writes_total",
  "Writes to the API server by kind (Service, AddressPool, LoadBalancerConfig, Event)",
  { labelNames: ["kind"] },
);
const writeFailures = registry.counter(
  "holdfast_controller_write_failures_total",
  "Failed writes to the API server by kind (retried on the next pass)",
  { labelNames: ["kind"] },
);

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
  /** Writes in flight at once (default 8). */
  concurrency?: number;
  /** Clock of conditions' lastTransitionTime (default `new Date()`). */
  now?: () => Date;
  logger?: Logger;
}

/** What one pass did. */
export interface PassSummary {
  leader: boolean;
  writes: number;
  failures: number;
  fed: number;
  events: string[];
}

const ACTIONS: Record<IpamEvent["reason"], string> = {
  AddressAllocated: "Allocate",
  AddressReleased: "Release",
  AllocationFailed: "Allocate",
  PoolInvalid: "Validate",
};

function sameIngress(svc: KubeObject, ips: readonly string[]): boolean {
  const cur: { ip?: string; ipMode?: string }[] = svc.status?.loadBalancer?.ingress ?? [];
  return cur.length === ips.length && cur.every((i, n) => i.ip === ips[n] && i.ipMode === "VIP");
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
  #allocator: AddressAllocator | undefined;
  #claimKey = "";
  #led = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running: Promise<void> | undefined;
  #dirty = false;
  #stopped = false;
  /** Status writes not yet seen by the informers: key → resourceVersion written over, time. */
  readonly #pending = new Map<string, { rv: string; at: number }>();
  /** Resolves after the first pass (the tables hold the initial state). */
  readonly firstPass: Promise<void>;
  #markFirst!: () => void;

  constructor(options: ControllerOptions) {
    this.#o = options;
    this.#log = (options.logger ?? log).with({ component: "k8s-controller" });
    this.#feed = options.sink ? new SourceFeed(options.sink, this.#log) : undefined;
    this.#backoff = new Backoff(options.retry ?? { minMs: 100, maxMs: 30_000 });
    this.firstPass = new Promise((r) => (this.#markFirst = r));
  }

  /** Schedules a pass (debounced; one at a time; a change during a pass runs another after it). */
  trigger(delayMs = this.#o.debounceMs ?? 20): void {
    if (this.#stopped || this.#timer !== undefined) return;
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

  /** Forgets the allocator's memory: the next pass restores from status (new leadership). */
  resetAllocator(): void {
    this.#allocator = undefined;
  }

  /** One pass now (tests call it directly; `trigger` is the loop's way). */
  async reconcile(): Promise<PassSummary> {
    const started = performance.now();
    reconciles.inc();
    const view = this.#o.view;
    const leader = this.#o.isLeader?.() ?? true;
    if (leader && !this.#led) this.#allocator = undefined;
    this.#led = leader;
    const cfg = readConfig(view.list("loadbalancerconfigs"));
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
    if (this.#feed) summary.fed = this.#feed.sync(fed, view.list("endpointslices"));
    if (result) await this.#write(result, services, pools, cfg, summary);
    if (summary.failures > 0) this.trigger(this.#backoff.next());
    else this.#backoff.reset();
    reconcileSeconds.observe(undefined, (performance.now() - started) / 1000);
    this.#log.debug("reconciled", { ...summary, events: summary.events.length });
    this.#markFirst();
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
    const tasks: (() => Promise<void>)[] = [];
    const byKey = new Map(services.map((s) => [keyOf(s), s]));
    const run = (kind: string, key: string, rv: string | undefined, write: () => Promise<void>) => {
      const p = this.#pending.get(key);
      if (p !== undefined && p.rv === rv && performance.now() - p.at < 5_000) return;
      tasks.push(async () => {
        if (!(this.#o.isLeader?.() ?? true)) return; // fencing: not the leader any more
        this.#pending.set(key, { rv: rv ?? "", at: performance.now() });
        try {
          await write();
          writes.inc({ kind });
          summary.writes++;
        } catch (err) {
          this.#pending.delete(key);
          writeFailures.inc({ kind });
          summary.failures++;
          this.#log.warn("write failed; retrying", { kind, object: key, error: errorText(err) });
        }
      });
    };
    for (const a of result.services) {
      const key = `${a.namespace}/${a.name}`, svc = byKey.get(key)!;
      const conditions = svc.status?.conditions as IpamCondition[] | undefined;
      if (sameIngress(svc, a.addresses) && sameConditions(conditions, [a.condition])) continue;
      const target = serviceTarget(svc);
      run("Service", key, target.resourceVersion, () =>
        this.#o.writer.patchServiceStatus(target, {
          loadBalancer: {
            ingress: a.addresses.length > 0
              ? a.addresses.map((ip) => ({ ip, ipMode: "VIP" as const }))
              : null,
          },
          conditions: mergeConditions(conditions, [a.condition], now),
        }));
    }
    // Level-triggered release: a Service we no longer claim loses what we wrote.
    for (const svc of services) {
      const conditions = (svc.status?.conditions ?? []) as IpamCondition[];
      if (!conditions.some((c) => c.type === ADDRESS_ALLOCATED_CONDITION)) continue;
      if (isClaimed(svc, cfg.claim)) continue;
      const others = conditions.filter((c) => c.type !== ADDRESS_ALLOCATED_CONDITION);
      const target = serviceTarget(svc);
      run(
        "Service",
        keyOf(svc),
        target.resourceVersion,
        () =>
          this.#o.writer.patchServiceStatus(target, {
            loadBalancer: { ingress: null },
            conditions: others.length > 0 ? others : null,
          }),
      );
    }
    const poolsByName = new Map(pools.map((p) => [keyOf(p), p]));
    for (const p of result.pools) {
      const obj = poolsByName.get(p.name)!, cur = obj.status ?? {};
      const gen = obj.metadata?.generation;
      if (
        cur.total === p.total && cur.used === p.used && cur.available === p.available &&
        cur.observedGeneration === gen && sameConditions(cur.conditions, p.conditions)
      ) continue;
      const target = objectTarget("AddressPool", obj);
      run(
        "AddressPool",
        `pool:${p.name}`,
        target.resourceVersion,
        () =>
          this.#o.writer.patchObjectStatus(target, {
            ...(gen !== undefined ? { observedGeneration: gen } : {}),
            total: p.total,
            used: p.used,
            available: p.available,
            conditions: mergeConditions(cur.conditions, p.conditions, now),
          }),
      );
    }
    this.#writeConfig(cfg, now, run);
    const events = result.events.map((e) => this.#eventInput(e, byKey, poolsByName));
    for (const e of events) {
      summary.events.push(`${e.reason} ${e.regarding.name}`);
      if (e.reason === "AddressAllocated") allocations.inc();
      if (e.reason === "AllocationFailed") allocationFailures.inc();
    }
    await limited(tasks, this.#o.concurrency ?? 8);
    // Events after status, so a reader who sees the Event finds the status it speaks of.
    await limited(
      events.map((e) => async () => {
        if (!(this.#o.isLeader?.() ?? true)) return;
        try {
          await this.#o.writer.emitEvent(e);
          writes.inc({ kind: "Event" });
        } catch (err) {
          writeFailures.inc({ kind: "Event" });
          this.#log.warn("event not written", { reason: e.reason, error: errorText(err) });
        }
      }),
      this.#o.concurrency ?? 8,
    );
  }

  #writeConfig(
    cfg: ConfigView,
    now: Date,
    run: (kind: string, key: string, rv: string | undefined, w: () => Promise<void>) => void,
  ): void {
    const obj = this.#o.view.list("loadbalancerconfigs").find((c) =>
      c.metadata?.name === "default"
    );
    if (!obj || !cfg.ready) return;
    const cur = obj.status ?? {}, gen = obj.metadata?.generation;
    if (cur.observedGeneration === gen && sameConditions(cur.conditions, [cfg.ready])) return;
    const target = objectTarget("LoadBalancerConfig", obj);
    const ready = cfg.ready;
    run("LoadBalancerConfig", "config:default", target.resourceVersion, async () => {
      await this.#o.writer.patchObjectStatus(target, {
        ...(gen !== undefined ? { observedGeneration: gen } : {}),
        conditions: mergeConditions(cur.conditions, [ready], now),
      });
      if (ready.status === "False") {
        await this.#o.writer.emitEvent({
          regarding: target,
          type: "Warning",
          reason: "ConfigInvalid",
          note: ready.message,
          action: "Validate",
        });
      }
    });
  }

  #eventInput(
    e: IpamEvent,
    services: Map<string, KubeObject>,
    pools: Map<string, KubeObject>,
  ): EventInput {
    const o = e.object;
    const obj = o.kind === "Service" ? services.get(`${o.namespace}/${o.name}`) : pools.get(o.name);
    return {
      regarding: { ...o, ...(obj?.metadata?.uid ? { uid: obj.metadata.uid } : {}) },
      type: e.type,
      reason: e.reason,
      note: e.message,
      action: ACTIONS[e.reason],
    };
  }

  /** Stops scheduling passes and waits for the running one. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }
}

function serviceTarget(svc: KubeObject): ObjectTarget {
  return {
    kind: "Service",
    namespace: svc.metadata?.namespace ?? "default",
    name: svc.metadata?.name ?? "",
    uid: svc.metadata?.uid,
    resourceVersion: svc.metadata?.resourceVersion,
  };
}

function objectTarget(kind: "AddressPool" | "LoadBalancerConfig", obj: KubeObject): ObjectTarget {
  return {
    kind,
    name: obj.metadata?.name ?? "",
    uid: obj.metadata?.uid,
    resourceVersion: obj.metadata?.resourceVersion,
  };
}

function errorText(err: unknown): string {
  const e = err as { code?: number; body?: unknown; message?: string };
  return e?.code !== undefined ? `${e.code}: ${String(e.body ?? e.message)}` : String(err);
}
