/**
 * The flow-sync agent of one LB node as a process, and the argument parser `node/agent.ts` (the
 * full LB-node composition behind `main.ts agent`) uses for its flow-sync options.
 *
 * ```
 * main.ts agent --redis redis://[user:pass@]host:port --vip 10.0.100.1[,10.0.100.2…]
 *               --node-name lb-a [--listen 127.0.0.1:9470] [--datapath bpf|memory] …
 * ```
 *
 * It opens the datapath (pinned maps reused, so an agent restart loses no flow), starts taking
 * new-flow events from the ring buffer (queued until ready), restores every stored flow of its
 * LB IPs into the flow map, then reports ready: a JSON log line `{"msg":"ready",…}` on stdout and
 * `GET /readyz` → 200 on the listen address (503 before). `GET /metrics` serves Prometheus text,
 * `GET /healthz` 200 while running. SIGTERM/SIGINT stop it (exit 0); maps stay pinned.
 *
 * The Redis password may come from `--redis-password-file` or the `HOLDFAST_REDIS_PASSWORD`
 * environment variable instead of the URL, to keep it out of the process list. Aliases:
 * `--node` = `--node-name`, `--bpffs` = `--pin-dir`, `--iface` = `--attach`, `--address` =
 * `--src-addr`.
 *
 * @module
 */

import { FlowSyncAgent } from "./agent.ts";
import { connectRedisStore, redact, type RedisStoreOptions } from "./redis_store.ts";
import { MemoryFlowTable } from "./table.ts";
import type { FlowTable } from "./table.ts";
import { parseIpv4 } from "./flow.ts";
import { log, type Logger, type LogLevel, setLogLevel } from "../log.ts";
import { CONTENT_TYPE, registry } from "../metrics.ts";

/** Parsed `agent` arguments. */
export interface AgentArgs {
  redis: RedisStoreOptions;
  vips: string[];
  nodeName: string;
  listen: { hostname: string; port: number } | null;
  datapath: "bpf" | "memory";
  pinDir?: string;
  objectDir?: string;
  maxFlows?: number;
  /** XDP attach: interface (and namespace) — optional, the datapath may be attached elsewhere. */
  attach?: { ifname: string; netns?: string };
  /** Datapath node settings — optional, written when given. */
  configure?: { srcAddr: string; encapPort: number; seed: number };
  idleTimeoutMs?: number;
  sweepIntervalMs?: number;
  queueCapacity?: number;
  logLevel: LogLevel;
}

const USAGE = `usage: agent --redis URL --vip IP[,IP...] --node-name NAME (alias --node)
  [--redis-user USER] [--redis-password-file FILE] [--redis-tls] [--redis-ca FILE]
  [--listen HOST:PORT (default 127.0.0.1:9470; "none" to disable)]
  [--datapath bpf|memory (default bpf)] [--pin-dir DIR (alias --bpffs)] [--object-dir DIR]
  [--max-flows N] [--attach IFACE (alias --iface)] [--netns NS]
  [--src-addr IP (alias --address) --encap-port PORT --seed N]
  [--idle-timeout-ms MS] [--sweep-interval-ms MS] [--queue-capacity N]
  [--log-level debug|info|warn|error]`;

/** Parses `agent` arguments; throws a `TypeError` naming the bad argument. */
export function parseAgentArgs(
  args: readonly string[],
  env: {
    password?: string;
    readFile?: (path: string) => string;
    /** `--vip` may be absent (`main.ts agent` derives LB IPs from its config's frontends). */
    vipsOptional?: boolean;
  } = {},
): AgentArgs {
  const values = new Map<string, string[]>();
  const flags = new Set<string>();
  const boolean = new Set(["--redis-tls"]);
  // Spellings the e2e cluster (tests/e2e/cluster.ts) uses.
  const aliases: Record<string, string> = {
    "--node": "--node-name",
    "--bpffs": "--pin-dir",
    "--iface": "--attach",
    "--address": "--src-addr",
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!a.startsWith("--")) throw new TypeError(`Cannot parse agent arguments: unexpected "${a}"`);
    const eq = a.indexOf("=");
    const given = eq > 0 ? a.slice(0, eq) : a;
    const name = aliases[given] ?? given;
    if (boolean.has(name)) {
      flags.add(name);
      continue;
    }
    const value = eq > 0 ? a.slice(eq + 1) : args[++i];
    if (value === undefined) {
      throw new TypeError(`Cannot parse agent arguments: "${name}" needs a value`);
    }
    values.set(name, [...(values.get(name) ?? []), value]);
  }
  const known = new Set([
    "--redis",
    "--redis-user",
    "--redis-password-file",
    "--redis-ca",
    "--vip",
    "--node-name",
    "--listen",
    "--datapath",
    "--pin-dir",
    "--object-dir",
    "--max-flows",
    "--attach",
    "--netns",
    "--src-addr",
    "--encap-port",
    "--seed",
    "--idle-timeout-ms",
    "--sweep-interval-ms",
    "--queue-capacity",
    "--log-level",
  ]);
  for (const name of values.keys()) {
    if (!known.has(name)) throw new TypeError(`Cannot parse agent arguments: unknown "${name}"`);
  }
  const one = (name: string) => values.get(name)?.at(-1);
  const need = (name: string) => {
    const v = one(name);
    if (v === undefined || v === "") {
      throw new TypeError(`Cannot parse agent arguments: "${name}" is required`);
    }
    return v;
  };
  const int = (name: string) => {
    const v = one(name);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) {
      throw new TypeError(`Cannot parse agent arguments: "${name}" must be an integer, got "${v}"`);
    }
    return n;
  };

  const url = need("--redis");
  if (!/^rediss?:\/\//.test(url)) {
    throw new TypeError(`Cannot parse agent arguments: "--redis" must be redis:// or rediss://`);
  }
  const redis: RedisStoreOptions = { url };
  const user = one("--redis-user");
  if (user) redis.username = user;
  const pwFile = one("--redis-password-file");
  if (pwFile) redis.password = (env.readFile ?? Deno.readTextFileSync)(pwFile).trim();
  else if (env.password) redis.password = env.password;
  const ca = one("--redis-ca");
  if (flags.has("--redis-tls") || ca) {
    redis.tls = ca ? { ca: (env.readFile ?? Deno.readTextFileSync)(ca) } : {};
  }

  const vips = (values.get("--vip") ?? []).flatMap((v) => v.split(",")).map((v) => v.trim())
    .filter(Boolean);
  if (vips.length === 0 && !env.vipsOptional) {
    throw new TypeError(`Cannot parse agent arguments: "--vip" is required`);
  }
  for (const v of vips) parseIpv4(v);

  const listenText = one("--listen") ?? "127.0.0.1:9470";
  let listen: AgentArgs["listen"] = null;
  if (listenText !== "none") {
    const m = /^(.+):(\d+)$/.exec(listenText);
    if (!m) throw new TypeError(`Cannot parse agent arguments: "--listen" must be HOST:PORT`);
    listen = { hostname: m[1]!, port: Number(m[2]) };
  }
  const datapath = one("--datapath") ?? "bpf";
  if (datapath !== "bpf" && datapath !== "memory") {
    throw new TypeError(`Cannot parse agent arguments: "--datapath" must be bpf or memory`);
  }
  const logLevel = (one("--log-level") ?? "info") as LogLevel;
  if (!["debug", "info", "warn", "error"].includes(logLevel)) {
    throw new TypeError(`Cannot parse agent arguments: bad "--log-level" "${logLevel}"`);
  }

  const out: AgentArgs = { redis, vips, nodeName: need("--node-name"), listen, datapath, logLevel };
  const pinDir = one("--pin-dir");
  if (pinDir) out.pinDir = pinDir;
  const objectDir = one("--object-dir");
  if (objectDir) out.objectDir = objectDir;
  const maxFlows = int("--max-flows");
  if (maxFlows !== undefined) out.maxFlows = maxFlows;
  const attach = one("--attach");
  if (attach) {
    const netns = one("--netns");
    out.attach = netns ? { ifname: attach, netns } : { ifname: attach };
  }
  const srcAddr = one("--src-addr");
  if (srcAddr) {
    parseIpv4(srcAddr);
    out.configure = { srcAddr, encapPort: int("--encap-port") ?? 6080, seed: int("--seed") ?? 0 };
  }
  const idle = int("--idle-timeout-ms");
  if (idle !== undefined) out.idleTimeoutMs = idle;
  const sweep = int("--sweep-interval-ms");
  if (sweep !== undefined) out.sweepIntervalMs = sweep;
  const cap = int("--queue-capacity");
  if (cap !== undefined) out.queueCapacity = cap;
  return out;
}

/** A started datapath side: the flow table plus cleanup. */
interface Side {
  table: FlowTable;
  kind: string;
  close(): Promise<void>;
}

async function openDatapath(a: AgentArgs, agentRef: { agent?: FlowSyncAgent }): Promise<Side> {
  if (a.datapath === "memory") {
    return { table: new MemoryFlowTable(), kind: "memory", close: () => Promise.resolve() };
  }
  const { Datapath } = await import("../bpf/mod.ts");
  const { BpfFlowTable, fromDatapathEvent } = await import("./bpf_table.ts");
  const dp = await Datapath.open({
    ...(a.pinDir ? { pinDir: a.pinDir } : {}),
    ...(a.objectDir ? { objectDir: a.objectDir } : {}),
    ...(a.maxFlows ? { maxFlows: a.maxFlows } : {}),
  });
  if (a.configure) dp.configure(a.configure);
  if (a.attach) {
    dp.attach(a.attach.ifname, a.attach.netns ? { netns: a.attach.netns } : {});
  }
  // Events are taken from the start and queue in the agent until it is ready.
  const reader = dp.subscribe((ev) => agentRef.agent?.learn(fromDatapathEvent(ev)));
  return {
    table: new BpfFlowTable(dp.maps.flows),
    kind: "bpf",
    async close() {
      await reader.close();
      dp[Symbol.dispose]();
    },
  };
}

/**
 * Serves /readyz, /metrics and /healthz. A listen failure (e.g. `lo` down in a fresh network
 * namespace) is logged and the agent runs on without HTTP; stdout still carries the ready line.
 */
export function serveHttp(
  listen: { hostname: string; port: number },
  ready: () => boolean,
  agentLog: Logger,
): Deno.HttpServer | null {
  try {
    return Deno.serve({
      ...listen,
      onListen: (addr) => agentLog.info("listening", { addr: `${addr.hostname}:${addr.port}` }),
    }, (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/metrics") {
        return new Response(registry.expose(), { headers: { "content-type": CONTENT_TYPE } });
      }
      if (path === "/readyz") {
        const ok = ready();
        return new Response(ok ? "ready\n" : "restoring\n", { status: ok ? 200 : 503 });
      }
      if (path === "/healthz") return new Response("ok\n");
      return new Response("not found\n", { status: 404 });
    });
  } catch (err) {
    agentLog.warn("cannot serve HTTP, running without /readyz and /metrics", {
      addr: `${listen.hostname}:${listen.port}`,
      err,
    });
    return null;
  }
}

/**
 * Runs the agent until SIGTERM/SIGINT (or `options.signal`). Returns the exit code: 0 after a
 * clean stop, 2 for bad arguments, 1 when it cannot start.
 */
export async function main(
  args: string[],
  options: { signal?: AbortSignal } = {},
): Promise<number> {
  let a: AgentArgs;
  try {
    a = parseAgentArgs(args, { password: Deno.env.get("HOLDFAST_REDIS_PASSWORD") });
  } catch (err) {
    console.error(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  setLogLevel(a.logLevel);
  const agentLog = log.with({ component: "agent", node: a.nodeName });
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  const signals: Deno.Signal[] = ["SIGTERM", "SIGINT"];
  for (const s of signals) Deno.addSignalListener(s, onSignal);
  options.signal?.addEventListener("abort", onSignal);

  const ref: { agent?: FlowSyncAgent } = {};
  let side: Side | null = null;
  let server: Deno.HttpServer | null = null;
  const store = connectRedisStore(a.redis);
  try {
    side = await openDatapath(a, ref);
    const agent = ref.agent = new FlowSyncAgent(side.table, store, {
      node: a.nodeName,
      vips: a.vips,
      ...(a.idleTimeoutMs !== undefined ? { idleTimeoutMs: a.idleTimeoutMs } : {}),
      ...(a.sweepIntervalMs !== undefined ? { sweepIntervalMs: a.sweepIntervalMs } : {}),
      ...(a.queueCapacity !== undefined ? { queueCapacity: a.queueCapacity } : {}),
    });
    if (a.listen) server = serveHttp(a.listen, () => agent.ready, agentLog);
    agentLog.info("starting", {
      redis: redact(a.redis.url),
      vips: a.vips,
      datapath: side.kind,
      tls: a.redis.tls !== undefined || a.redis.url.startsWith("rediss://"),
    });
    await agent.start({ signal: stop.signal });
    agentLog.info("ready", { vips: a.vips, datapath: side.kind });
    await new Promise<void>((resolve) => {
      if (stop.signal.aborted) resolve();
      stop.signal.addEventListener("abort", () => resolve());
    });
    agentLog.info("stopping", { queued: agent.queued });
    await agent.stop();
    return 0;
  } catch (err) {
    if (stop.signal.aborted) return 0;
    agentLog.error("agent failed", { err });
    return 1;
  } finally {
    for (const s of signals) Deno.removeSignalListener(s, onSignal);
    await server?.shutdown();
    await side?.close();
    await store.close();
  }
}
