/**
 * The arguments of `main.ts agent` (node/agent.ts), parsed in one place.
 *
 * ```
 * main.ts agent --node-name lb1 --config services.yaml --redis redis://[user@]host:port
 *               [--vip IP[,IP...]] [--attach IFACE --src-addr IP] [--pin-dir DIR] …
 * ```
 *
 * The Redis password may come from `--redis-password-file` or the `HOLDFAST_REDIS_PASSWORD`
 * environment variable instead of the URL, to keep it out of the process list. `--vip` adds LB
 * IPs to follow beyond the config's frontends. `--redis` is required unless `--no-flow-sync`.
 *
 * @module
 */

import type { RedisStoreOptions } from "./flows/redis_store.ts";
import type { LogLevel } from "../lib/log.ts";
import { parseIpv4 } from "../lib/ipv4.ts";

/** Parsed `agent` arguments. */
export interface AgentArgs {
  /** The services file the control plane follows. */
  config: string;
  /** Share flows through Redis (default true; false = Maglev only). */
  flowSync: boolean;
  redis: RedisStoreOptions;
  /** LB IPs to follow in addition to the config's frontends. */
  vips: string[];
  nodeName: string;
  listen: { hostname: string; port: number } | null;
  /** `bpf` (the real XDP datapath) or `memory` (in-memory maps, for tests without root). */
  datapath: "bpf" | "memory";
  pinDir?: string;
  objectDir?: string;
  maxFlows?: number;
  /** Datapath capacity: services (service IDs) and backends (backend IDs) the maps hold. */
  maxServices?: number;
  maxBackends?: number;
  /** XDP attach: interface (and namespace) — optional, the datapath may be attached elsewhere. */
  attach?: { ifname: string; netns?: string };
  /** Datapath node settings — optional, written when given. */
  configure?: { srcAddr: string; encapPort: number; seed: number };
  /** Default Maglev table size (prime). */
  maglevSize?: number;
  /** The WASM policy module (default: the release build). */
  policy?: string;
  /** How often the services file is checked for changes (default 200 ms). */
  configPollMs: number;
  /** How often the BPF maps are compared with the tables and repaired (default 30 000 ms; 0 = never). */
  fullReconcileIntervalMs: number;
  idleTimeoutMs?: number;
  sweepIntervalMs?: number;
  queueCapacity?: number;
  logLevel: LogLevel;
}

/** One-screen usage of `main.ts agent`. */
export const USAGE = `usage: agent --node-name NAME --config FILE --redis URL
  [--vip IP[,IP...]] [--no-flow-sync] [--maglev-size M] [--policy FILE.wasm] [--config-poll-ms MS]
  [--redis-user USER] [--redis-password-file FILE] [--redis-tls] [--redis-ca FILE]
  [--listen HOST:PORT (default 127.0.0.1:9470; "none" to disable)]
  [--datapath bpf|memory (default bpf)] [--pin-dir DIR] [--object-dir DIR]
  [--max-flows N] [--max-services N] [--max-backends N] [--attach IFACE] [--netns NS] [--src-addr IP --encap-port PORT --seed N]
  [--idle-timeout-ms MS] [--sweep-interval-ms MS] [--queue-capacity N]
  [--full-reconcile-interval-ms MS (default 30000; 0 = never)]
  [--log-level debug|info|warn|error]`;

/** Parses `agent` arguments; throws a `TypeError` naming the bad argument. */
export function parseAgentArgs(
  args: readonly string[],
  env: {
    password?: string;
    readFile?: (path: string) => string;
  } = {},
): AgentArgs {
  const values = new Map<string, string[]>();
  const flags = new Set<string>();
  const boolean = new Set(["--redis-tls", "--no-flow-sync"]);
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!a.startsWith("--")) throw new TypeError(`Cannot parse agent arguments: unexpected "${a}"`);
    const eq = a.indexOf("=");
    const name = eq > 0 ? a.slice(0, eq) : a;
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
    "--config",
    "--maglev-size",
    "--policy",
    "--config-poll-ms",
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
    "--max-services",
    "--max-backends",
    "--attach",
    "--netns",
    "--src-addr",
    "--encap-port",
    "--seed",
    "--idle-timeout-ms",
    "--sweep-interval-ms",
    "--queue-capacity",
    "--full-reconcile-interval-ms",
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

  const flowSync = !flags.has("--no-flow-sync");
  const url = flowSync ? need("--redis") : one("--redis") ?? "redis://127.0.0.1:6379";
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

  const out: AgentArgs = {
    config: need("--config"),
    flowSync,
    redis,
    vips,
    nodeName: need("--node-name"),
    listen,
    datapath,
    configPollMs: int("--config-poll-ms") ?? 200,
    fullReconcileIntervalMs: int("--full-reconcile-interval-ms") ?? 30_000,
    logLevel,
  };
  const maglevSize = int("--maglev-size");
  if (maglevSize !== undefined) out.maglevSize = maglevSize;
  const policy = one("--policy");
  if (policy) out.policy = policy;
  const pinDir = one("--pin-dir");
  if (pinDir) out.pinDir = pinDir;
  const objectDir = one("--object-dir");
  if (objectDir) out.objectDir = objectDir;
  const maxFlows = int("--max-flows");
  if (maxFlows !== undefined) out.maxFlows = maxFlows;
  const maxServices = int("--max-services");
  if (maxServices !== undefined) out.maxServices = maxServices;
  const maxBackends = int("--max-backends");
  if (maxBackends !== undefined) out.maxBackends = maxBackends;
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
