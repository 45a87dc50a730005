/**
 * Wiring of the control plane: table store, LB tables, Writer and the BPF-maps reconciler
 * against an {@linkcode LBMaps} target. Data sources attach to `writer`.
 *
 * @example
 * ```ts
 * import { createControlPlane } from "./control_plane.ts";
 * import { MemoryLBMaps } from "./maps/memory.ts";
 * import { DEFAULT_CONFIG_YAML, FileSource } from "./sources/file_source.ts";
 * const cp = await createControlPlane(new MemoryLBMaps());
 * const file = new FileSource(cp.writer); // sources (and their initializers) before start()
 * cp.start();
 * file.load(DEFAULT_CONFIG_YAML);
 * await cp.waitFrontend("10.0.100.1:80/TCP");
 * await cp.stop();
 * ```
 *
 * @module
 */

import type { BackoffOptions } from "../../lib/backoff.ts";
import { log, type Logger } from "../../lib/log.ts";
import { LBMapsOps } from "./maps/reconciler.ts";
import type { Frontend } from "./tables/frontend.ts";
import { createLBTables, type LBTables } from "./tables/tables.ts";
import { Writer } from "./tables/writer.ts";
import type { LBMaps } from "./maps/lbmaps.ts";
import type { MaglevBuilder } from "../../policy-as/host/maglev_input.ts";
import { Reconciler, waitReconciled } from "./reconciler/mod.ts";
import type { ReconcileStatus } from "./reconciler/status.ts";
import { DB } from "../../lib/statedb/mod.ts";

/** A running control plane. */
export interface ControlPlane {
  readonly db: DB;
  readonly tables: LBTables;
  readonly writer: Writer;
  readonly ops: LBMapsOps;
  readonly reconciler: Reconciler<Frontend>;
  /** Starts the reconciler. Register data sources' initializers first: pruning waits for them. */
  start(): void;
  /** Waits until the frontend at `address` is reconciled (status done) or gone. */
  waitFrontend(address: string, options?: { timeoutMs?: number; absent?: boolean }): Promise<void>;
  stop(): Promise<void>;
}

/** Options of {@linkcode createControlPlane}. */
export interface ControlPlaneOptions {
  /** Maglev builder (default: TypeScript reference; the policy WASM plugs in here). */
  maglev?: MaglevBuilder;
  /** Maglev size of services that set none (prime, default 16,381: docs/maglev.md). */
  maglevSize?: number;
  /** Reconciler batch size (default 1000). */
  batchSize?: number;
  /** Maglev tables staged before a batch installs them early (default 1,024; `LBMapsOps`). */
  maxStaged?: number;
  /** Workers building Maglev tables ahead in a big rebuild (default 1..2, 0: none). */
  maglevWorkers?: number;
  /** The prune reads every backend ID on every this many full passes (default 10; `LBMapsOps`). */
  readAllBackendIdsEvery?: number;
  /** Retry schedule of failed map writes (default 10 ms .. 30 s with jitter). */
  retry?: BackoffOptions;
  /**
   * Period of the full reconciliation that compares the maps with the tables and repairs what
   * differs (0, the default: only once at start and on `reconciler.triggerFullReconcile()`).
   */
  fullReconcileIntervalMs?: number;
  /** Source priorities (lower wins); see DEFAULT_PRIORITIES. */
  priorities?: Readonly<Record<string, number>>;
  /** Logger (default: the process logger with `component: "control-plane"`). */
  logger?: Logger;
  /** Clock of the statuses' `since` (default `Date.now`). */
  now?: () => number;
}

/** Frontend status accessors for the reconciler. */
export const frontendStatus = {
  get: (fe: Frontend): ReconcileStatus => fe.status,
  set: (fe: Frontend, status: ReconcileStatus): Frontend => ({ ...fe, status }),
};

/**
 * Creates the tables and Writer and restores IDs from `maps`. Attach data sources to `writer`
 * (registering their initializers), then call `start()`: a reconciler started with no
 * initializer registered would count the empty tables as synced and prune the maps.
 */
export async function createControlPlane(
  maps: LBMaps,
  options: ControlPlaneOptions = {},
): Promise<ControlPlane> {
  const db = new DB();
  const tables = createLBTables(db);
  const logger = options.logger ?? log.with({ component: "control-plane" });
  const writer = new Writer(tables, {
    priorities: options.priorities,
    logger,
    now: options.now,
  });
  const ops = new LBMapsOps(tables, maps, {
    maglev: options.maglev,
    maglevSize: options.maglevSize,
    maxStaged: options.maxStaged,
    maglevWorkers: options.maglevWorkers,
    readAllBackendIdsEvery: options.readAllBackendIdsEvery,
  });
  const restored = await ops.restore();
  logger.info("restored IDs from maps", restored);
  const reconciler = new Reconciler<Frontend>({
    name: "bpf-lbmaps",
    db,
    table: tables.frontends,
    ops,
    getStatus: frontendStatus.get,
    setStatus: frontendStatus.set,
    batchSize: options.batchSize,
    retry: options.retry,
    fullReconcileIntervalMs: options.fullReconcileIntervalMs,
    logger,
    keyField: "frontend",
    now: options.now,
  });
  return {
    start: () => reconciler.start(),
    db,
    tables,
    writer,
    ops,
    reconciler,
    waitFrontend: (address, o = {}) =>
      waitReconciled(db, tables.frontends, address, { getStatus: frontendStatus.get, ...o }),
    stop: () => reconciler.stop().finally(() => ops.close()),
  };
}
