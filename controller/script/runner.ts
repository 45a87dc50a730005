/**
 * Script tests for the control plane: txtar archives whose comment is a list of commands run
 * against a fresh control plane over in-memory maps, with inputs and expectations inline.
 *
 * Line prefixes: `*` retries the command until it passes (5 s), `!` expects it to fail.
 * Commands:
 *
 * | command | does |
 * |---|---|
 * | `k8s/add FILE...`, `k8s/update FILE...`, `k8s/delete FILE...` | Service/EndpointSlice YAML (multi-doc) through the k8s source |
 * | `k8s/forget FILE...` | remove from the fake API server without an event (deleted while down) |
 * | `k8s/synced` | the k8s source finished its initial sync (pruning may start) |
 * | `file/load FILE` | load a file-source config |
 * | `source/backends SOURCE SERVICE FILE` | set SOURCE's backends of SERVICE (YAML list) |
 * | `source/service SOURCE FILE` | upsert a service (YAML ServiceInput) as SOURCE |
 * | `source/delete SOURCE` | remove every row of SOURCE |
 * | `redirect/set SERVICE TARGET`, `redirect/remove SERVICE` | local-redirect override |
 * | `db/insert TABLE FILE`, `db/delete TABLE FILE` | raw rows (YAML list), bypassing the Writer |
 * | `db/show TABLE` | print a table to stdout |
 * | `db/cmp TABLE FILE` | compare a printed table with FILE (cells, ignoring alignment) |
 * | `maps/dump` | print the maps to stdout |
 * | `maps/summary` | services with backend addresses and slot counts (ID-independent) |
 * | `maps/faults RATE` | fail RATE (0..1) of map operations |
 * | `maps/delete service ADDR`, `maps/delete maglev ID`, `maps/delete backend ID` | delete an entry behind the reconciler's back |
 * | `maps/set backend ID IP:PORT` | change a backend entry behind the reconciler's back |
 * | `maps/check` | no ordering-invariant breach so far |
 * | `reconciled` | wait until the reconciler is idle |
 * | `reconcile/full` | trigger a full reconciliation (prune, verify, repair) |
 * | `clock/advance SECONDS` | advance the test clock that stamps statuses (the `Since` column) |
 * | `restart` | new control plane over the same maps; sources resync from their inputs |
 * | `metrics` | print reconciler metrics to stdout |
 * | `cmp stdout FILE` | last stdout equals FILE |
 * | `stdout REGEX` | last stdout matches REGEX |
 * | `log REGEX` | some log line (JSON) since the script started matches REGEX |
 *
 * Statuses are stamped by a test clock that stands still unless `clock/advance` moves it, so
 * printed ages are stable.
 *
 * @module
 */

import { parse as parseYaml, parseAllDocuments } from "yaml";
import { captureLogs, type LogRecord } from "../../lib/log.ts";
import { type ControlPlane, createControlPlane } from "../control_plane.ts";
import { backendHeader, backendToRow } from "../lb/backend.ts";
import { frontendHeader, frontendToRow } from "../lb/frontend.ts";
import { formatTable, parseTable } from "../lb/print.ts";
import { redirectHeader, redirectToRow } from "../lb/redirect.ts";
import { selectBackends } from "../lb/select.ts";
import { serviceHeader, serviceToRow } from "../lb/service.ts";
import type { BackendInput, ServiceInput } from "../lb/writer.ts";
import { FaultyLBMaps, MemoryLBMaps } from "../lbmaps_memory.ts";
import { FileSource } from "../sources/file_source.ts";
import type { K8sEndpointSlice, K8sService } from "../sources/k8s_convert.ts";
import { K8sSource } from "../sources/k8s_source.ts";
import { pendingStatus } from "../reconciler/status.ts";
import type { Table } from "../statedb/mod.ts";
import { dumpMaps, summarizeMaps, tamperMaps } from "./_maps_text.ts";
import { parseTxtar } from "./txtar.ts";

/** Options of {@linkcode runScript}. */
export interface ScriptOptions {
  /** Maglev size used by the script's control plane (small, so dumps stay readable). */
  maglevSize?: number;
  /** Seed of the fault injector. */
  seed?: number;
  /** Update mode: called with (file, actual) instead of failing a comparison. */
  update?: (file: string, actual: string) => void;
}

class ScriptError extends Error {
  override name = "ScriptError";
}

type K8sObject = K8sService | K8sEndpointSlice;

/** Runs one txtar script; throws a ScriptError naming the failing line. */
export async function runScript(text: string, options: ScriptOptions = {}): Promise<void> {
  const ar = parseTxtar(text);
  using logs = captureLogs();
  const env = new ScriptEnv(ar.files, options, logs.records);
  await env.start();
  try {
    const lines = ar.comment.split("\n");
    for (let n = 0; n < lines.length; n++) {
      const raw = lines[n]!.trim();
      if (raw === "" || raw.startsWith("#")) continue;
      let line = raw, retry = false, negate = false;
      if (line.startsWith("* ")) (retry = true), (line = line.slice(2).trim());
      if (line.startsWith("! ")) (negate = true), (line = line.slice(2).trim());
      const args = line.split(/\s+/);
      const deadline = Date.now() + (retry && options.update ? 1000 : 5000);
      for (;;) {
        let err: unknown = null;
        env.lastChance = !retry || Date.now() + 20 >= deadline;
        try {
          await env.run(args);
        } catch (e) {
          err = e;
        }
        const ok = negate ? err !== null : err === null;
        if (ok) break;
        if (retry && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 10));
          continue;
        }
        const why = negate
          ? "expected failure, but it succeeded"
          : (err instanceof Error ? err.message : String(err));
        throw new ScriptError(`line ${n + 1}: ${raw}\n${why}\n--- last stdout ---\n${env.stdout}`);
      }
    }
  } finally {
    await env.stop();
  }
}

class ScriptEnv {
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

  file_(name: string | undefined): string {
    if (name === undefined) throw new Error("missing file argument");
    const f = this.files.get(name);
    if (f === undefined) throw new Error(`no file "${name}" in the archive`);
    return f;
  }

  table(name: string | undefined): Table<unknown> {
    const t = this.cp.tables as unknown as Record<string, Table<unknown>>;
    const tb = name === undefined ? undefined : t[name];
    if (tb === undefined || !("insert" in tb)) throw new Error(`unknown table "${name}"`);
    return tb;
  }

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

  k8sObjects(files: string[]): K8sObject[] {
    const objs: K8sObject[] = [];
    for (const f of files) {
      for (const doc of parseAllDocuments(this.file_(f))) {
        const o = doc.toJS() as K8sObject | null;
        if (o !== null) objs.push(o);
      }
    }
    return objs;
  }

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

  async run(args: string[]): Promise<void> {
    const [cmd, ...rest] = args;
    const w = this.cp.writer;
    switch (cmd) {
      case "k8s/add":
      case "k8s/update":
      case "k8s/delete": {
        const type = cmd.slice(4) as "add" | "update" | "delete";
        const objs = this.k8sObjects(rest);
        for (const o of objs) {
          const key = `${o.kind}/${o.metadata?.namespace ?? "default"}/${o.metadata?.name}`;
          if (type === "delete") this.apiserver.delete(key);
          else this.apiserver.set(key, o);
        }
        this.k8s.apply(objs.map((object) => ({ type, object })));
        return;
      }
      case "k8s/forget":
        // Deleted while the controller was down: gone from the API server, no event seen.
        for (const o of this.k8sObjects(rest)) {
          this.apiserver.delete(
            `${o.kind}/${o.metadata?.namespace ?? "default"}/${o.metadata?.name}`,
          );
        }
        return;
      case "k8s/synced":
        this.k8sSynced = true;
        this.k8s.synced();
        return;
      case "file/load":
        this.lastFileConfig = this.file_(rest[0]);
        this.file.load(this.lastFileConfig);
        return;
      case "source/backends": {
        const [source, service, f] = rest;
        const src = w.source(source!);
        const txn = src.txn();
        src.setBackends(txn, {
          service: service!,
          backends: (parseYaml(this.file_(f)) ?? []) as BackendInput[],
        });
        txn.commit();
        return;
      }
      case "source/service": {
        const src = w.source(rest[0]!);
        const txn = src.txn();
        const ok = src.upsertService(txn, parseYaml(this.file_(rest[1])) as ServiceInput);
        txn.commit();
        if (!ok) throw new Error("service rejected by the writer");
        return;
      }
      case "source/delete": {
        const src = w.source(rest[0]!);
        const txn = src.txn();
        src.deleteAll(txn);
        txn.commit();
        return;
      }
      case "redirect/set":
      case "redirect/remove": {
        const src = w.source("local-redirect");
        const txn = src.txn();
        if (cmd === "redirect/set") {
          src.setLocalRedirect(txn, { service: rest[0]!, target: rest[1]! });
        } else src.removeLocalRedirect(txn, rest[0]!);
        txn.commit();
        return;
      }
      case "db/insert":
      case "db/delete": {
        const t = this.table(rest[0]);
        const rows = parseYaml(this.file_(rest[1])) as Record<string, unknown>[];
        const txn = this.cp.db.writeTxn(t);
        for (const r of rows) {
          const row = rest[0] === "frontends"
            ? { portName: "", redirectTo: null, status: pendingStatus(this.now), ...r }
            : rest[0] === "services"
            ? { source: "test", flowKeyMode: "five-tuple", maglevSize: 0, ...r }
            : r;
          if (cmd === "db/insert") t.insert(txn, row);
          else t.delete(txn, row);
        }
        txn.commit();
        return;
      }
      case "db/show":
        this.stdout = this.show(rest[0]);
        return;
      case "db/cmp": {
        const got = this.show(rest[0]);
        this.stdout = got;
        const want = this.file_(rest[1]);
        if (JSON.stringify(parseTable(got)) !== JSON.stringify(parseTable(want))) {
          if (this.options.update && this.lastChance) return this.options.update(rest[1]!, got);
          throw new Error(
            `table "${rest[0]}" differs from ${rest[1]}:\n--- got ---\n${got}--- want ---\n${want}`,
          );
        }
        return;
      }
      case "maps/dump":
        this.stdout = await dumpMaps(this.maps);
        return;
      case "maps/summary":
        this.stdout = await summarizeMaps(this.maps);
        return;
      case "maps/faults":
        this.faulty.failRate = Number(rest[0]);
        return;
      case "maps/delete":
      case "maps/set":
        tamperMaps(this.maps, cmd === "maps/set" ? "set" : "delete", rest);
        return;
      case "maps/check":
        if (this.maps.violations.length > 0) {
          throw new Error(`violations:\n${this.maps.violations.join("\n")}`);
        }
        return;
      case "reconciled": {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const timeout = new Promise<"timeout">((
          r,
        ) => (timer = setTimeout(() => r("timeout"), 5000)));
        const r = await Promise.race([
          this.cp.reconciler.waitIdle().then(() => "idle" as const),
          timeout,
        ]);
        clearTimeout(timer);
        if (r === "timeout") throw new Error("reconciler not idle after 5 s");
        return;
      }
      case "reconcile/full":
        this.cp.reconciler.triggerFullReconcile();
        return;
      case "clock/advance": {
        const s = Number(rest[0]);
        if (!(s >= 0)) throw new Error(`clock/advance: expected seconds, got "${rest[0]}"`);
        this.now += s * 1000;
        return;
      }
      case "restart":
        await this.restart();
        return;
      case "metrics":
        this.stdout =
          Object.entries({ ...this.cp.reconciler.metrics, injected_faults: this.faulty.injected })
            .map(([k, v]) => `${k} ${v}`).join("\n") + "\n";
        return;
      case "cmp": {
        if (rest[0] !== "stdout") {
          throw new Error(`cmp: only "stdout" is supported, got "${rest[0]}"`);
        }
        const want = this.file_(rest[1]);
        const norm = (s: string) => s.split("\n").map((l) => l.trimEnd()).join("\n").trim();
        if (norm(this.stdout) !== norm(want)) {
          if (this.options.update && this.lastChance) {
            return this.options.update(rest[1]!, this.stdout);
          }
          throw new Error(
            `stdout differs from ${rest[1]}:\n--- got ---\n${this.stdout}--- want ---\n${want}`,
          );
        }
        return;
      }
      case "log": {
        const re = new RegExp(rest.join(" "));
        if (!this.logs.some((r) => re.test(JSON.stringify(r)))) {
          throw new Error(`no log line matches /${rest.join(" ")}/`);
        }
        return;
      }
      case "stdout":
        if (!new RegExp(rest.join(" "), "m").test(this.stdout)) {
          throw new Error(`stdout does not match /${rest.join(" ")}/`);
        }
        return;
    }
    throw new Error(`unknown command "${cmd}"`);
  }
}
