/**
 * The EgressNAT reconciler: for each `EgressNAT` object and its NAT pods (pods labelled
 * `holdfast.io/egress: NAME` in its namespace, see `_egress_derive.ts`) it derives the egress
 * config, validates it with `parseEgressConfig`, publishes it to Redis
 * (`hf:egress:{NS/NAME}:config`, controller/egress/redis_config.ts) for the NAT pods' agents
 * (`main.ts egress --egress NS/NAME`), and writes `status.owners` (address, pod, epoch, from the
 * leases in Redis) and the `Ready` condition.
 *
 * An object that cannot be turned into a config gets `Ready=False` reason `InvalidSpec` (the
 * message names the field) and a Warning Event; the last valid config stays in Redis, so its
 * NAT pods keep working, and every other EgressNAT is unaffected. A deleted EgressNAT's config
 * is removed (its leases expire by themselves).
 *
 * Runs on every change of the objects or pods (debounced) and every `pollMs` (leases change
 * without the API server knowing); writes status only when it differs from what the cluster
 * shows. Only the leader publishes and writes (checked at each pass and before each write).
 *
 * @module
 */

import { log, type Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import type { RedisConnection } from "../../lib/redis_connection.ts";
import { type LeaseState, RedisLeaseStore } from "../egress/lease.ts";
import { deleteEgressConfig, publishEgressConfig } from "../egress/redis_config.ts";
import {
  deriveEgressConfig,
  type EgressOwner,
  INVALID_SPEC,
  ownersOf,
  readyCondition,
} from "./_egress_derive.ts";
import type { EgressWorkloadOptions } from "./_egress_workload.ts";
import {
  NAT_PODS,
  reconcileWorkload,
  type WorkloadWriter,
  workloadWritesCounter,
} from "./_egress_workloads.ts";
import { type ClusterView, keyOf, type KubeObject } from "./objects.ts";
import { type ClusterWriter, mergeConditions, sameConditions } from "./status.ts";

/** The reconciler's metrics, on `registry` (lib/metrics.ts: registered per instance). */
const egressMetrics = (registry: Registry) => ({
  published: registry.counter(
    "holdfast_controller_egress_configs_published_total",
    "EgressNAT configs published to Redis with a new revision",
  ),
  invalid: registry.gauge(
    "holdfast_controller_egress_invalid",
    "EgressNAT objects whose spec cannot be turned into a config (Ready=False InvalidSpec)",
  ),
  statusWrites: registry.counter(
    "holdfast_controller_egress_status_writes_total",
    "EgressNAT status writes by result",
    { labelNames: ["result"] },
  ),
  workloadWrites: workloadWritesCounter(registry),
});

/** Options of {@linkcode EgressReconciler}. */
export interface EgressReconcilerOptions {
  /** The informers' caches: `egressnats` and `egresspods`. */
  view: ClusterView;
  /** Where status and Events go. */
  writer: ClusterWriter;
  /** Redis of the configs and leases (absent: validate and report only, publish nothing). */
  redis?: RedisConnection;
  /** Key prefix (default `hf`). */
  prefix?: string;
  /** Whether this replica leads right now (default: always). */
  isLeader?: () => boolean;
  /** Lease poll period, ms (default 1,000). */
  pollMs?: number;
  /** Quiet time before a triggered pass, ms (default 20). */
  debounceMs?: number;
  /**
   * Make each EgressNAT's NAT pods (Deployment + PodDisruptionBudget, `_egress_workloads.ts`)
   * with these options through `workloadWriter` (absent: the operator makes them).
   */
  workload?: EgressWorkloadOptions;
  workloadWriter?: WorkloadWriter;
  /** Clock of conditions' lastTransitionTime. */
  now?: () => Date;
  logger?: Logger;
  /** Where its metrics go (default the process registry, served at `/metrics`). */
  registry?: Registry;
}

/** See the module doc. */
export class EgressReconciler {
  readonly #o: EgressReconcilerOptions;
  readonly #log: Logger;
  readonly #metrics: ReturnType<typeof egressMetrics>;
  /** key → JSON of the config last published (this leadership). */
  readonly #published = new Map<string, string>();
  /** key → the status written and the resourceVersion it was written over. */
  readonly #written = new Map<string, { rv: string; json: string }>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #poll: ReturnType<typeof setInterval> | undefined;
  #running: Promise<void> | undefined;
  #dirty = false;
  #stopped = false;
  #led = false;

  constructor(options: EgressReconcilerOptions) {
    this.#o = options;
    this.#log = (options.logger ?? log).with({ component: "egress-controller" });
    this.#metrics = egressMetrics(options.registry ?? processRegistry);
  }

  /** Starts the lease poll (passes also run on {@link trigger}). */
  start(): void {
    if (this.#poll !== undefined || this.#stopped) return;
    this.#poll = setInterval(() => this.trigger(0), this.#o.pollMs ?? 1_000);
    this.trigger(0);
  }

  /** Schedules a pass (debounced, one at a time; a change during a pass runs another). */
  trigger(delayMs = this.#o.debounceMs ?? 20): void {
    if (this.#stopped || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#running) {
        this.#dirty = true;
        return;
      }
      this.#running = this.reconcile().catch((err) => {
        this.#log.error("egress pass failed", { error: String(err) });
      }).finally(() => {
        this.#running = undefined;
        if (this.#dirty) {
          this.#dirty = false;
          this.trigger();
        }
      });
    }, delayMs);
  }

  #leader(): boolean {
    return this.#o.isLeader?.() ?? true;
  }

  /** One pass over every EgressNAT now. */
  async reconcile(): Promise<void> {
    const leader = this.#leader();
    if (leader && !this.#led) {
      this.#published.clear(); // a new leadership publishes everything once (no-op if unchanged)
      this.#written.clear();
    }
    this.#led = leader;
    if (!leader) return;
    const nats = this.#o.view.list("egressnats");
    const pods = this.#o.view.list("egresspods");
    let invalid = 0;
    for (const nat of nats) {
      try {
        if (!(await this.#one(nat, pods))) invalid++;
      } catch (err) {
        this.#log.warn("egress object not reconciled; retrying", {
          egress: keyOf(nat),
          error: String((err as Error)?.message ?? err),
        });
      }
    }
    this.#metrics.invalid.set(undefined, invalid);
    const live = new Set(nats.map(keyOf));
    for (const key of [...this.#published.keys()]) {
      if (live.has(key) || !this.#o.redis || !this.#leader()) continue;
      await deleteEgressConfig(this.#o.redis, key, this.#o.prefix).then(() => {
        this.#published.delete(key);
        this.#written.delete(key);
        this.#log.info("egress config removed", { egress: key, why: "EgressNAT deleted" });
      }, (err) => this.#log.warn("egress config not removed", { egress: key, error: String(err) }));
    }
  }

  /** Reconciles one object; false when its spec is invalid. */
  async #one(nat: KubeObject, pods: readonly KubeObject[]): Promise<boolean> {
    const key = keyOf(nat);
    const derived = deriveEgressConfig(nat, pods, {
      pods: this.#o.view.list("pods"),
      namespaces: this.#o.view.list("namespaces"),
    });
    const redis = this.#o.redis;
    let owners: EgressOwner[] | undefined;
    if ("config" in derived && redis) {
      const json = JSON.stringify([derived.config, derived.clients]);
      if (this.#published.get(key) !== json) {
        const rev = await publishEgressConfig(
          redis,
          derived.config,
          this.#o.prefix,
          derived.clients,
        );
        this.#published.set(key, json);
        this.#metrics.published.inc();
        this.#log.info("egress config published", {
          egress: key,
          rev,
          peers: derived.config.peers.map((p) => p.name),
          sources: derived.config.sources.length,
          clients: derived.clients.length,
        });
      }
      const leases = new RedisLeaseStore(redis, key, { prefix: this.#o.prefix });
      const found = new Map<string, LeaseState | null>();
      for (const { address } of derived.config.addresses) {
        found.set(address, await leases.read(address));
      }
      owners = ownersOf(derived.config, found);
    }
    const conditions = [readyCondition(nat, derived, owners)];
    const { workload, workloadWriter } = this.#o;
    if (workload && workloadWriter) {
      const v = this.#o.view;
      conditions.push(
        await reconcileWorkload(
          nat,
          v.list("egressdeployments"),
          v.list("egresspdbs"),
          workload,
          workloadWriter,
          this.#log,
          () => this.#leader(),
          this.#metrics.workloadWrites,
        ),
      );
    }
    const current = nat.status ?? {};
    const ownersNow = owners ?? current.owners ?? [];
    const same = sameConditions(current.conditions, conditions) &&
      JSON.stringify(current.owners ?? []) === JSON.stringify(ownersNow);
    if (!same) await this.#writeStatus(nat, conditions, ownersNow);
    return !conditions.some((c) => c.reason === INVALID_SPEC);
  }

  async #writeStatus(
    nat: KubeObject,
    conditions: ReturnType<typeof readyCondition>[],
    owners: readonly EgressOwner[],
  ): Promise<void> {
    const key = keyOf(nat);
    const rv = nat.metadata?.resourceVersion ?? "";
    const [ready, natPods] = conditions as [typeof conditions[0], typeof conditions[0] | undefined];
    const status: Record<string, unknown> = {
      owners,
      conditions: mergeConditions(
        nat.status?.conditions,
        conditions,
        this.#o.now?.() ?? new Date(),
      ),
      ...(nat.metadata?.generation !== undefined
        ? { observedGeneration: nat.metadata.generation }
        : {}),
    };
    const json = JSON.stringify([owners, conditions]);
    const w = this.#written.get(key);
    if (w && w.rv === rv && w.json === json) return; // written; the informer has not caught up
    if (!this.#leader()) return;
    const target = {
      kind: "EgressNAT" as const,
      namespace: nat.metadata?.namespace,
      name: nat.metadata?.name ?? "",
      uid: nat.metadata?.uid,
      resourceVersion: rv,
    };
    try {
      await this.#o.writer.patchObjectStatus(target, status);
      this.#written.set(key, { rv, json });
      this.#metrics.statusWrites.inc({ result: "ok" });
      this.#log.info("egress status written", {
        egress: key,
        ready: `${ready.status} ${ready.reason}`,
        ...(natPods ? { natPods: `${natPods.status} ${natPods.reason}` } : {}),
        owners: owners.map((o) => `${o.address}=${o.pod}@${o.epoch}`),
      });
    } catch (err) {
      this.#metrics.statusWrites.inc({ result: "error" });
      this.#log.warn("egress status not written; retrying", { egress: key, error: String(err) });
      return;
    }
    for (const c of conditions) {
      const before = nat.status?.conditions?.find((x: { type: string }) => x.type === c.type);
      const warn = c.reason === INVALID_SPEC || (c.type === NAT_PODS && c.status === "False");
      if (!warn || before?.message === c.message) continue;
      await this.#o.writer.emitEvent({
        regarding: { ...target, resourceVersion: undefined },
        type: "Warning",
        reason: c.type === NAT_PODS && c.reason !== INVALID_SPEC ? `NATPods${c.reason}` : c.reason,
        note: c.message,
        action: c.type === NAT_PODS ? "CreateNATPods" : "Validate",
      }).catch((err) =>
        this.#log.warn("event not written", {
          egress: key,
          reason: c.reason,
          error: String(err),
        })
      );
      this.#log.warn(c.type === NAT_PODS ? "egress NAT pods not managed" : "egress spec invalid", {
        egress: key,
        condition: c.type,
        reason: c.reason,
        problem: c.message,
      });
    }
  }

  /** Stops the poll and waits for the running pass. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearInterval(this.#poll);
    this.#timer = undefined;
    await this.#running;
  }
}
