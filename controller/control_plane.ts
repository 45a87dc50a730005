/**
 * Wiring of the control plane: table store, LB tables, Writer and the BPF-maps reconciler
 * against an {@linkcode LBMaps} target. Data sources attach to `writer`.
 *
 * @example
 * ```ts
 * import { createControlPlane } from "./control_plane.ts";
 * import { MemoryLBMaps } from "./lbmaps_memory.ts";
 * import { DEFAULT_CONFIG_YAML, FileSource } from "./sources/file_source.ts";
 * const cp = await createControlPlane(new MemoryLBMaps(), { log: () => {} });
 * const file = new FileSource(cp.writer); // sources (and their initializers) before start()
 * cp.start();
 * file.load(DEFAULT_CONFIG_YAML);
 * await cp.waitFrontend("10.0.100.1:80/TCP");
 * await cp.stop();
 * ```
 *
 * @module
 */

import { LBMapsOps } from "./bpf_reconciler.ts";
import type { Frontend } from "./lb/frontend.ts";
import type { ReconcileStatus } from "./lb/status.ts";
import { createLBTables, type LBTables } from "./lb/tables.ts";
import { Writer } from "./lb/writer.ts";
import type { LBMaps } from "./lbmaps.ts";
import type { MaglevBuilder } from "../policy-as/host/maglev_input.ts";
import { Reconciler, waitReconciled } from "./reconciler/mod.ts";
import { DB } from "./statedb/mod.ts";

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

/** Options of {@linkcode startControlPlane}. */
export interface ControlPlaneOptions {
  /** Maglev builder (default: TypeScript reference; the policy WASM plugs in here). */
  maglev?: MaglevBuilder;
  /** Maglev size of services that set none (prime, default 16,381: docs/maglev.md). */
  maglevSize?: number;
  /** Reconciler batch size (default 1000). */
  batchSize?: number;
  retryMinMs?: number;
  retryMaxMs?: number;
  pruneIntervalMs?: number;
  /** Source priorities (lower wins); see DEFAULT_PRIORITIES. */
  priorities?: Readonly<Record<string, number>>;
  /** Structured log sink (default: JSON lines on stdout). */
  log?: (level: "info" | "warn", msg: string, fields: Record<string, unknown>) => void;
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
  const log = options.log;
  const writer = new Writer(tables, {
    priorities: options.priorities,
    log: log ? (msg, f) => log("info", msg, f) : undefined,
  });
  const ops = new LBMapsOps(tables, maps, {
    maglev: options.maglev,
    maglevSize: options.maglevSize,
  });
  const restored = await ops.restore();
  if (log) log("info", "restored IDs from maps", restored);
  else console.log(JSON.stringify({ level: "info", msg: "restored IDs from maps", ...restored }));
  const reconciler = new Reconciler<Frontend>({
    name: "bpf-lbmaps",
    db,
    table: tables.frontends,
    ops,
    getStatus: frontendStatus.get,
    setStatus: frontendStatus.set,
    batchSize: options.batchSize,
    retryMinMs: options.retryMinMs,
    retryMaxMs: options.retryMaxMs,
    pruneIntervalMs: options.pruneIntervalMs,
    log,
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
    stop: () => reconciler.stop(),
  };
}
