/**
 * Wiring of the controller's pieces, without a command line: informers → reconcile loop
 * ({@linkcode LbController}) → status/Events ({@linkcode ClusterWriter}) and → `K8sSource` → the
 * controller's LB tables, which the model publisher (`controller/model`) reads.
 *
 * The tables are the lighter path: statedb tables and a Writer, no BPF-maps reconciler and no
 * Maglev tables (the controller has no datapath; agents build their own maps from the model).
 *
 * @example
 * ```ts ignore
 * const kc = new k8s.KubeConfig();
 * kc.loadFromDefault();
 * await using running = startController(kc, { identity: "controller-0" });
 * await running.synced;
 * ```
 *
 * @module
 */

import type * as k8s from "@kubernetes/client-node";
import type { BackoffOptions } from "../../lib/backoff.ts";
import { log, type Logger } from "../../lib/log.ts";
import type { Registry } from "../../lib/metrics.ts";
import { createLBTables, type LBTables } from "../../node/lb/tables/tables.ts";
import { Writer } from "../../node/lb/tables/writer.ts";
import { K8sSource } from "../../node/lb/sources/k8s_source.ts";
import { DB } from "../../lib/statedb/mod.ts";
import type { RedisConnection } from "../../lib/redis_connection.ts";
import type { ModelSettings } from "../model/settings.ts";
import { CONFIG_NAME } from "./_config.ts";
import { type DerivedSettings, deriveSettings, settingsForLog } from "./_settings.ts";
import { LbController } from "./controller.ts";
import { EgressReconciler } from "./egress.ts";
import type { EgressWorkloadOptions } from "./_egress_workload.ts";
import type { WorkloadWriter } from "./_egress_workloads.ts";
import { usesSelectors } from "./_egress_sources.ts";
import { Informers } from "./informers.ts";
import { PolicyChecker, type PolicyValidator } from "./policy.ts";
import { KubeClusterWriter } from "./kube_writer.ts";
import { ReportRelay } from "./reports.ts";
import type { ClusterWriter } from "./status.ts";

/** Options of {@linkcode startController}. */
export interface StartControllerOptions {
  /** This replica's name (Events' `reportingInstance`). */
  identity: string;
  /** Whether this replica leads (default: always). */
  isLeader?: () => boolean;
  /** Where status and Events go (default: the API server of `kc`). */
  writer?: ClusterWriter;
  /** Quiet time before a batch of changes is reconciled (default 10 ms). */
  debounceMs?: number;
  /** Watch and validate this policy ConfigMap (absent: no policy checks). */
  policyConfigMap?: { namespace: string; name: string };
  /** Validator of policy modules (default: policy-as/host validation). */
  validatePolicy?: PolicyValidator;
  /** Retry schedule of failed lists/watches and writes. */
  backoff?: BackoffOptions;
  /** Redis of the EgressNAT configs and leases (absent: EgressNATs are validated only). */
  egressRedis?: RedisConnection;
  /** EgressNAT lease poll period (default 1,000 ms). */
  egressPollMs?: number;
  /**
   * Make each EgressNAT's NAT pods (Deployment + PodDisruptionBudget) with these options
   * (needs `egressRedis`; absent: the operator makes them).
   */
  egressWorkload?: EgressWorkloadOptions;
  /** Redis of the LB model: LB nodes' reports there become Events (`reports.ts`; absent: none). */
  reportsRedis?: RedisConnection;
  /** Gathering window of report Events, ms (default 2,000). */
  reportsWindowMs?: number;
  logger?: Logger;
  /** Where every part's metrics go (default the process registry, served at `/metrics`). */
  registry?: Registry;
}

/** A running controller. */
export interface RunningController extends AsyncDisposable {
  readonly informers: Informers;
  readonly controller: LbController;
  /** The EgressNAT reconciler (controller/k8s/egress.ts). */
  readonly egress: EgressReconciler;
  /** The policy ConfigMap's checker (when `policyConfigMap` is set). */
  readonly policy?: PolicyChecker;
  /** The controller's LB tables (what the model publisher reads). */
  readonly cp: { readonly db: DB; readonly tables: LBTables; readonly writer: Writer };
  /**
   * The model's settings (encap port, LB nodes) from the LoadBalancerConfig and the Nodes, as
   * of the last batch (`{}` before the first list).
   */
  modelSettings(): ModelSettings;
  /** Calls `fn` with the settings each time they change (the publisher writes them). */
  onModelSettings(fn: (settings: ModelSettings) => void): void;
  /** Resolves once every resource was listed, reconciled once and written to the tables. */
  readonly synced: Promise<void>;
  /** Whether `synced` has resolved. */
  isSynced(): boolean;
  stop(): Promise<void>;
}

/** Starts informers and the reconcile loop against the cluster of `kc`. */
export function startController(
  kc: k8s.KubeConfig,
  options: StartControllerOptions,
): RunningController {
  const logger = options.logger ?? log;
  const db = new DB();
  const tables = createLBTables(db);
  const writer = new Writer(tables, { logger: logger.with({ component: "tables" }) });
  const source = new K8sSource(writer);
  const ownWriter = options.writer ? undefined : new KubeClusterWriter(kc, options.identity);
  const clusterWriter = options.writer ?? ownWriter!;
  source.registerInitializer(); // the publisher waits for the first full state
  const controller = new LbController({
    view: { list: (r) => informers.list(r) },
    writer: clusterWriter,
    sink: source,
    isLeader: options.isLeader,
    debounceMs: options.debounceMs,
    retry: options.backoff,
    logger,
    registry: options.registry,
  });
  const policy = options.policyConfigMap
    ? new PolicyChecker({
      writer: clusterWriter,
      isLeader: options.isLeader,
      validate: options.validatePolicy,
      logger,
      registry: options.registry,
    })
    : undefined;
  const egress = new EgressReconciler({
    view: { list: (r) => informers.list(r) },
    writer: clusterWriter,
    redis: options.egressRedis,
    isLeader: options.isLeader,
    pollMs: options.egressPollMs,
    workload: options.egressRedis ? options.egressWorkload : undefined,
    workloadWriter: "createWorkload" in clusterWriter
      ? clusterWriter as unknown as WorkloadWriter
      : undefined,
    logger,
    registry: options.registry,
  });
  const reports = options.reportsRedis
    ? new ReportRelay({
      redis: options.reportsRedis,
      writer: clusterWriter,
      isLeader: options.isLeader,
      policyConfigMap: options.policyConfigMap,
      windowMs: options.reportsWindowMs,
      logger,
      registry: options.registry,
    })
    : undefined;
  reports?.start();
  const notLb = new Set([
    "policy",
    "egressnats",
    "egresspods",
    "egressdeployments",
    "egresspdbs",
    "pods",
    "namespaces",
    "nodes",
  ]);
  let derived: DerivedSettings = { settings: {} };
  let derivedKey = JSON.stringify(derived);
  const settingsListeners: ((settings: ModelSettings) => void)[] = [];
  const updateSettings = () => {
    const cfg = informers.list("loadbalancerconfigs").find((c) => c.metadata?.name === CONFIG_NAME);
    const next = deriveSettings(cfg, informers.list("nodes"));
    const key = JSON.stringify(next);
    if (key === derivedKey) return;
    const problemChanged = next.problem !== derived.problem;
    derived = next;
    derivedKey = key;
    logger.info("model settings", {
      component: "k8s-controller",
      ...settingsForLog(next.settings),
      ...(next.problem ? { problem: next.problem } : {}),
    });
    for (const fn of settingsListeners) fn(next.settings);
    // The config's Ready condition names a selector that selects no node.
    if (problemChanged) controller.trigger(0);
  };
  const informers: Informers = new Informers(kc, {
    onBatch: (batch) => {
      if (batch.nodes || batch.loadbalancerconfigs) updateSettings();
      if (batch.policy) policy?.check(informers.list("policy"));
      const egressBatch = batch.egressnats || batch.egresspods || batch.egressdeployments ||
        batch.egresspdbs;
      const clients = (batch.pods || batch.namespaces) &&
        informers.list("egressnats").some(usesSelectors);
      if (egressBatch || clients) egress.trigger(0);
      // The batch is already debounced: reconcile at once.
      if (Object.keys(batch).some((r) => !notLb.has(r))) controller.trigger(0);
    },
    policyConfigMap: options.policyConfigMap,
    debounceMs: options.debounceMs,
    backoff: options.backoff,
    logger,
    registry: options.registry,
  });
  informers.start();
  let synced = false;
  const syncedP = informers.synced.then(async () => {
    controller.trigger(0);
    await controller.firstPass;
    source.synced();
    egress.start();
    synced = true;
    logger.info("synced", { component: "k8s-controller" });
  });
  const stop = async () => {
    await informers.stop();
    await egress.stop();
    await controller.stop();
    await reports?.stop();
    ownWriter?.close();
  };
  return {
    informers,
    controller,
    egress,
    policy,
    cp: { db, tables, writer },
    modelSettings: () => derived.settings,
    onModelSettings: (fn) => void settingsListeners.push(fn),
    synced: syncedP,
    isSynced: () => synced,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
