/**
 * The world a script test runs in: a control plane over in-memory (fault-injecting) maps, its
 * k8s and file sources, the fake API server that survives `restart`, the test clock, the last
 * stdout and the archive's files. Commands (`_commands.ts`) act on it.
 *
 * @module
 */

import { parseAllDocuments } from "yaml";
import type { LogRecord } from "../../../lib/log.ts";
import { type ControlPlane, createControlPlane } from "../control_plane.ts";
import { backendHeader, backendToRow } from "../tables/backend.ts";
import { frontendHeader, frontendToRow } from "../tables/frontend.ts";
import { formatTable } from "../tables/print.ts";
import { redirectHeader, redirectToRow } from "../tables/redirect.ts";
import { selectBackends } from "../tables/select.ts";
import { serviceHeader, serviceToRow } from "../tables/service.ts";
import { FaultyLBMaps, MemoryLBMaps } from "../maps/memory.ts";
import { FileSource } from "../sources/file_source.ts";
import type { K8sEndpointSlice, K8sService } from "../sources/k8s_convert.ts";
import { K8sSource } from "../sources/k8s_source.ts";
import type { Table } from "../../../lib/statedb/mod.ts";

/** Options of a script run. */
export interface ScriptOptions {
  /** Maglev size used by the script's control plane (small, so dumps stay readable). */
  maglevSize?: number;
  /** Seed of the fault injector. */
  seed?: number;
  /** Update mode: called with (file, actual) instead of failing a comparison. */
  update?: (file: string, actual: string) => void;
}

/** What `k8s/*` commands read from YAML. */
export type K8sObject = K8sService | K8sEndpointSlice;

/** The API server's key of a k8s object: `Kind/namespace/name`. */
export function objectKey(o: K8sObject): string {
  return `${o.kind}/${o.metadata?.namespace ?? "default"}/${o.metadata?.name}`;
}

/** One script's control plane, sources, maps, clock and output. */
export class ScriptEnv {
  readonly files: ReadonlyMap<string, string>;
  readonly maps = new MemoryLBMaps();
  readonly faulty: FaultyLBMaps;
  readonly options: ScriptOptions;
  cp!: ControlPlane;
  k8s!: K8sSource;
  file!: FileSource;
  stdout = "";
  /** The fake API server: what k8s/* wrote, for resync after restart. */
  readonly apiserver = new Map<string, K8sObject>();
  lastFileConfig: string | null = null;
  /** In update mode, only the last retry records the actual output. */
  lastChance = true;
  k8sSynced = false;
  /** The test clock (ms since the epoch): 2026-01-01T00:00:00Z until `clock/advance`. */
  now = Date.UTC(2026, 0, 1);
  /** Log lines captured since the script started. */
  readonly logs: readonly LogRecord[];

  constructor(
    files: ReadonlyMap<string, string>,
    options: ScriptOptions,
    logs: readonly LogRecord[],
  ) {
    this.files = files;
    this.options = options;
    this.logs = logs;
    this.faulty = new FaultyLBMaps(this.maps, { seed: options.seed ?? 1 });
  }

  async start(): Promise<void> {
    this.cp = await createControlPlane(this.faulty, {
      maglevSize: this.options.maglevSize ?? 251,
      retry: { minMs: 1, maxMs: 20, jitter: 0 },
      now: () => this.now,
    });
    this.k8s = new K8sSource(this.cp.writer);
    this.k8s.registerInitializer();
    this.file = new FileSource(this.cp.writer, { initializer: false });
    this.cp.start();
  }

  async stop(): Promise<void> {
    await this.cp.stop();
  }

  /** New control plane over the same maps; sources resync from their inputs. */
  async restart(): Promise<void> {
    await this.cp.stop();
    await this.start();
    // Sources resync from their inputs, as after a real restart — in reverse order, so fresh
    // allocation would hand out different IDs and only restoring them keeps the numbering.
    this.k8s.apply(
      [...this.apiserver.values()].reverse().map((object) => ({ type: "add" as const, object })),
    );
    if (this.lastFileConfig !== null) this.file.load(this.lastFileConfig);
    if (this.k8sSynced) this.k8s.synced();
  }

  /** The archive file `name`; throws if the argument is missing or no such file exists. */
  fileText(name: string | undefined): string {
    if (name === undefined) throw new Error("missing file argument");
    const f = this.files.get(name);
    if (f === undefined) throw new Error(`no file "${name}" in the archive`);
    return f;
  }

  /** The table `name` of the control plane. */
  table(name: string | undefined): Table<unknown> {
    const t = this.cp.tables as unknown as Record<string, Table<unknown>>;
    const tb = name === undefined ? undefined : t[name];
    if (tb === undefined || !("insert" in tb)) throw new Error(`unknown table "${name}"`);
    return tb;
  }

  /** The table `name` printed as operators see it. */
  show(name: string | undefined): string {
    const txn = this.cp.db.readTxn();
    const { services, frontends, backends, redirects } = this.cp.tables;
    switch (name) {
      case "services":
        return formatTable(serviceHeader, services.all(txn).map(serviceToRow));
      case "frontends":
        return formatTable(
          frontendHeader,
          frontends.all(txn).map((f) =>
            frontendToRow(
              f,
              selectBackends(txn, this.cp.tables, f).map((b) => b.address),
              this.now,
            )
          ),
        );
      case "backends":
        return formatTable(backendHeader, backends.all(txn).map(backendToRow));
      case "redirects":
        return formatTable(redirectHeader, redirects.all(txn).map(redirectToRow));
    }
    throw new Error(`unknown table "${name}"`);
  }

  /** Every object of the (multi-document) YAML files. */
  k8sObjects(files: readonly string[]): K8sObject[] {
    const objs: K8sObject[] = [];
    for (const f of files) {
      for (const doc of parseAllDocuments(this.fileText(f))) {
        const o = doc.toJS() as K8sObject | null;
        if (o !== null) objs.push(o);
      }
    }
    return objs;
  }

  /**
   * A comparison with archive file `file` failed: in update mode (last retry) records `got` as
   * its new content, otherwise throws `message`.
   */
  mismatch(file: string, got: string, message: string): void {
    if (this.options.update && this.lastChance) return this.options.update(file, got);
    throw new Error(message);
  }
}
