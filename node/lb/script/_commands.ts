/**
 * The script runner's commands (the table in `runner.ts` says what each does), one function per
 * command family, each acting on a {@linkcode ScriptEnv}.
 *
 * @module
 */

import { parse as parseYaml } from "yaml";
import { parseTable } from "../tables/print.ts";
import type { BackendInput, ServiceInput } from "../tables/writer.ts";
import { pendingStatus } from "../reconciler/status.ts";
import { dumpMaps, summarizeMaps, tamperMaps } from "./_maps_text.ts";
import { objectKey, type ScriptEnv } from "./_env.ts";

/** A command: `cmd` is its name (families share one function), `args` what follows it. */
type Command = (env: ScriptEnv, args: string[], cmd: string) => void | Promise<void>;

function k8sEvents(env: ScriptEnv, args: string[], cmd: string): void {
  const type = cmd.slice("k8s/".length) as "add" | "update" | "delete";
  const objs = env.k8sObjects(args);
  for (const o of objs) {
    if (type === "delete") env.apiserver.delete(objectKey(o));
    else env.apiserver.set(objectKey(o), o);
  }
  env.k8s.apply(objs.map((object) => ({ type, object })));
}

function k8sForget(env: ScriptEnv, args: string[]): void {
  // Deleted while the controller was down: gone from the API server, no event seen.
  for (const o of env.k8sObjects(args)) env.apiserver.delete(objectKey(o));
}

function k8sSynced(env: ScriptEnv): void {
  env.k8sSynced = true;
  env.k8s.synced();
}

function fileLoad(env: ScriptEnv, [file]: string[]): void {
  env.lastFileConfig = env.fileText(file);
  env.file.load(env.lastFileConfig);
}

function sourceBackends(env: ScriptEnv, [source, service, file]: string[]): void {
  const src = env.cp.writer.source(source!);
  const txn = src.txn();
  src.setBackends(txn, {
    service: service!,
    backends: (parseYaml(env.fileText(file)) ?? []) as BackendInput[],
  });
  txn.commit();
}

function sourceService(env: ScriptEnv, [source, file]: string[]): void {
  const src = env.cp.writer.source(source!);
  const txn = src.txn();
  const ok = src.upsertService(txn, parseYaml(env.fileText(file)) as ServiceInput);
  txn.commit();
  if (!ok) throw new Error("service rejected by the writer");
}

function sourceDelete(env: ScriptEnv, [source]: string[]): void {
  const src = env.cp.writer.source(source!);
  const txn = src.txn();
  src.deleteAll(txn);
  txn.commit();
}

function redirect(env: ScriptEnv, [service, target]: string[], cmd: string): void {
  const src = env.cp.writer.source("local-redirect");
  const txn = src.txn();
  if (cmd === "redirect/set") src.setLocalRedirect(txn, { service: service!, target: target! });
  else src.removeLocalRedirect(txn, service!);
  txn.commit();
}

function dbRows(env: ScriptEnv, [table, file]: string[], cmd: string): void {
  const t = env.table(table);
  const rows = parseYaml(env.fileText(file)) as Record<string, unknown>[];
  const txn = env.cp.db.writeTxn(t);
  for (const r of rows) {
    // Columns a row file may leave out, as the Writer would fill them.
    const row = table === "frontends"
      ? { portName: "", redirectTo: null, status: pendingStatus(env.now), ...r }
      : table === "services"
      ? { source: "test", flowKeyMode: "five-tuple", maglevSize: 0, ...r }
      : r;
    if (cmd === "db/insert") t.insert(txn, row);
    else t.delete(txn, row);
  }
  txn.commit();
}

function dbCmp(env: ScriptEnv, [table, file]: string[]): void {
  const got = env.stdout = env.show(table);
  const want = env.fileText(file);
  if (JSON.stringify(parseTable(got)) === JSON.stringify(parseTable(want))) return;
  env.mismatch(
    file!,
    got,
    `table "${table}" differs from ${file}:\n--- got ---\n${got}--- want ---\n${want}`,
  );
}

function mapsCheck(env: ScriptEnv): void {
  if (env.maps.violations.length > 0) {
    throw new Error(`violations:\n${env.maps.violations.join("\n")}`);
  }
}

async function reconciled(env: ScriptEnv): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), 5000)));
  const r = await Promise.race([
    env.cp.reconciler.waitIdle().then(() => "idle" as const),
    timeout,
  ]);
  clearTimeout(timer);
  if (r === "timeout") throw new Error("reconciler not idle after 5 s");
}

function clockAdvance(env: ScriptEnv, [seconds]: string[]): void {
  const s = Number(seconds);
  if (!(s >= 0)) throw new Error(`clock/advance: expected seconds, got "${seconds}"`);
  env.now += s * 1000;
}

function metrics(env: ScriptEnv): void {
  const all = { ...env.cp.reconciler.metrics, injected_faults: env.faulty.injected };
  env.stdout = Object.entries(all).map(([k, v]) => `${k} ${v}`).join("\n") + "\n";
}

function cmp(env: ScriptEnv, [what, file]: string[]): void {
  if (what !== "stdout") throw new Error(`cmp: only "stdout" is supported, got "${what}"`);
  const want = env.fileText(file);
  const norm = (s: string) => s.split("\n").map((l) => l.trimEnd()).join("\n").trim();
  if (norm(env.stdout) === norm(want)) return;
  env.mismatch(
    file!,
    env.stdout,
    `stdout differs from ${file}:\n--- got ---\n${env.stdout}--- want ---\n${want}`,
  );
}

function log(env: ScriptEnv, args: string[]): void {
  const re = new RegExp(args.join(" "));
  if (!env.logs.some((r) => re.test(JSON.stringify(r)))) {
    throw new Error(`no log line matches /${args.join(" ")}/`);
  }
}

function stdout(env: ScriptEnv, args: string[]): void {
  if (!new RegExp(args.join(" "), "m").test(env.stdout)) {
    throw new Error(`stdout does not match /${args.join(" ")}/`);
  }
}

const COMMANDS: Readonly<Record<string, Command>> = {
  "k8s/add": k8sEvents,
  "k8s/update": k8sEvents,
  "k8s/delete": k8sEvents,
  "k8s/forget": k8sForget,
  "k8s/synced": k8sSynced,
  "file/load": fileLoad,
  "source/backends": sourceBackends,
  "source/service": sourceService,
  "source/delete": sourceDelete,
  "redirect/set": redirect,
  "redirect/remove": redirect,
  "db/insert": dbRows,
  "db/delete": dbRows,
  "db/show": (env, [table]) => void (env.stdout = env.show(table)),
  "db/cmp": dbCmp,
  "maps/dump": async (env) => void (env.stdout = await dumpMaps(env.maps)),
  "maps/summary": async (env) => void (env.stdout = await summarizeMaps(env.maps)),
  "maps/faults": (env, [rate]) => void (env.faulty.failRate = Number(rate)),
  "maps/delete": (env, args) => tamperMaps(env.maps, "delete", args),
  "maps/set": (env, args) => tamperMaps(env.maps, "set", args),
  "maps/check": mapsCheck,
  "reconciled": reconciled,
  "reconcile/full": (env) => env.cp.reconciler.triggerFullReconcile(),
  "clock/advance": clockAdvance,
  "restart": (env) => env.restart(),
  "metrics": metrics,
  "cmp": cmp,
  "log": log,
  "stdout": stdout,
};

/** Runs one command line (split into words); throws if it fails or is unknown. */
export async function runCommand(env: ScriptEnv, words: readonly string[]): Promise<void> {
  const [cmd = "", ...args] = words;
  const command = Object.hasOwn(COMMANDS, cmd) ? COMMANDS[cmd] : undefined;
  if (command === undefined) throw new Error(`unknown command "${cmd}"`);
  await command(env, args, cmd);
}
