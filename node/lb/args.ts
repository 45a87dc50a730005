/**
 * The arguments of `main.ts agent` (node/lb/main.ts), parsed in one place, through lib/args.ts.
 *
 * ```
 * main.ts agent --node-name lb1 --config services.yaml --redis redis://[user@]host:port
 *               [--vip IP[,IP...]] [--node-address IP | --attach IFACE --src-addr IP] …
 * main.ts agent --node-name lb1 --model redis --redis redis://[user@]host:port …
 * ```
 *
 * The Redis password may come from `--redis-password-file` or the `HOLDFAST_REDIS_PASSWORD`
 * environment variable instead of the URL, to keep it out of the process list. `--vip` adds LB
 * IPs (IPv4 or IPv6) to follow beyond the config's frontends. `--redis` is required unless `--no-flow-sync`.
 * The LB model comes from exactly one of `--config FILE` or `--model redis` (the model the
 * controller publishes, read from the same Redis as flows: `--redis` is required then, even with
 * `--no-flow-sync`).
 * `--node-address IP` attaches XDP to the interface holding IP (looked up at start, in `--netns`
 * if given: {@link interfaceHolding}) and is the default `--src-addr`; with `--attach` too,
 * `--attach` names the interface and the address is only the source address.
 * `--src-addr6 IP|auto` is this node's IPv6 address (the outer source to IPv6 backends, written
 * to `hf_config6`; docs/contracts.md "IPv6"): `auto` takes the one global-scope IPv6 address of
 * the attach interface (`--attach` or the one holding `--node-address`: {@link globalIpv6Of}).
 * `--node-address IPV4,IPV6` (a dual-stack node's `status.hostIPs`) makes the IPv6 one the default
 * `--src-addr6`. The IPv4 address is required: the IPv4 source address and the encap port/seed
 * in `hf_config` serve both families, so `--src-addr6` needs `--src-addr` or `--node-address`.
 *
 * @module
 */

import type { FlowStoreOptions } from "./flows/redis_store.ts";
import { MAX_FLOW_BUCKETS } from "./flows/buckets.ts";
import { AGENT_COMMAND, USAGE } from "./_usage.ts";

export { AGENT_COMMAND, USAGE };
import { flowAddress } from "./flows/field.ts";
import { formatFlowAddress } from "../bpf/flow.ts";
import type { LogLevel } from "../../lib/log.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { isGlobalUnicastIpv6 } from "../../lib/ipv6.ts";
import {
  applyTable,
  choiceOption,
  type CommandLine,
  intOption,
  listOption,
  parseCommandLine,
  stringOption,
  UsageError,
} from "../../lib/args.ts";
import { readListen, readRedis } from "../../lib/flag_groups.ts";

export { globalIpv6Of, interfaceHolding } from "./_interfaces.ts";

/** Parsed `agent` arguments. */
export interface AgentArgs {
  /** The services file the control plane follows (absent with `model`). */
  config?: string;
  /** `redis`: the control plane follows the model in Redis instead of a file. */
  model?: "redis";
  /** Share flows through Redis (default true; false = Maglev only). */
  flowSync: boolean;
  /** `--flow-sharing`: every flow to every node (`all`), or exceptions only (flows/exceptions.ts). */
  flowSharing: "all" | "exceptions";
  /** Connection and flow layout (`buckets`: `--flow-buckets`, node/lb/flows/buckets.ts). */
  redis: FlowStoreOptions;
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
  /**
   * XDP attach (optional, the datapath may be attached elsewhere): the interface `--attach`
   * names, or else the one holding `--node-address` (`address`, looked up at start); `netns`
   * is the namespace of either.
   */
  attach?: { ifname: string; netns?: string } | { address: string; netns?: string };
  /** Datapath node settings — optional, written when given. */
  configure?: { srcAddr: string; encapPort: number; seed: number; eventBudget?: number };
  /**
   * This node's IPv6 address for `hf_config6` (`--src-addr6`), or `auto`: the attach interface's
   * one global IPv6 address, looked up at start. Absent: `hf_config6` is not written (IPv6
   * backends stay unreachable: `drop_no_config`).
   */
  srcAddr6?: string;
  /** `--encap-port` when given: it wins over the model's `encapPort` (`node/lb/_node_role.ts`). */
  encapPortFlag?: number;
  /** Default Maglev table size (prime). */
  maglevSize?: number;
  /** The WASM policy module (default: the release build). */
  policy?: string;
  /**
   * The active policy file to follow (`main.ts policy swap FILE --active PATH` installs it):
   * loaded at start if present, and swapped in on every change.
   */
  policyFollow?: string;
  /** How often the services file is checked for changes (default 200 ms). */
  configPollMs: number;
  /**
   * BGP settings (node/bgp): announce the LB IPs through bird while ready (docs/anycast.md). With
   * `--model redis` the model's `bgp` section (spec.bgp) does the same; this file wins over it.
   */
  bgpConfig?: string;
  /** bird's directory, with `bgpConfig` or the model's BGP (default /run/holdfast/bird-NODE). */
  bgpDir?: string;
  /** How often the BPF maps are compared with the tables and repaired (default 30 000 ms; 0 = never). */
  fullReconcileIntervalMs: number;
  idleTimeoutMs?: number;
  sweepIntervalMs?: number;
  queueCapacity?: number;
  /** Longest wait gathering new flows into one burst (node/lb/flows/burst_timing.ts; default 200). */
  learnWindowMs?: number;
  logLevel: LogLevel;
  /** Probe the backends of services with a `healthCheck` (default true; `--health off`). */
  health: boolean;
}

/** Where secrets come from besides the command line (tests pass stand-ins). */
export interface AgentArgsEnv {
  /** `HOLDFAST_REDIS_PASSWORD`, used when there is no `--redis-password-file`. */
  password?: string;
  readFile?: (path: string) => string;
}

/** Parses `agent` arguments; throws a {@link UsageError} naming the bad argument. */
export function parseAgentArgs(args: readonly string[], env: AgentArgsEnv = {}): AgentArgs {
  return readAgentArgs(parseCommandLine(args, AGENT_COMMAND), env);
}

/** Reads a parsed `agent` command line into {@link AgentArgs}; throws {@link UsageError}. */
export function readAgentArgs(line: CommandLine, env: AgentArgsEnv = {}): AgentArgs {
  const values = applyTable(line.values, AGENT_COMMAND);
  const str = (name: string) => stringOption(values, name) || undefined;
  const int = (name: string) => intOption(values, name);
  // An LB IP to follow: IPv4 or IPv6 (the flow agent's form: RFC 5952 for IPv6).
  const vipFlag = (text: string) => {
    try {
      return formatFlowAddress(flowAddress(text));
    } catch (err) {
      throw new UsageError(`Cannot use --vip "${text}": ${(err as Error).message}`, USAGE, {
        cause: err,
      });
    }
  };
  const ipv4 = (name: string, text: string) => {
    try {
      parseIpv4(text);
    } catch (err) {
      throw new UsageError(`Cannot use --${name} "${text}": ${(err as Error).message}`, USAGE, {
        cause: err,
      });
    }
    return text;
  };
  const flowSync = values["no-flow-sync"] !== true;
  const config = str("config");
  const model = values.model === undefined
    ? undefined
    : choiceOption<"redis">(values, "model", ["redis"]);
  if ((config === undefined) === (model === undefined)) {
    throw new UsageError(
      config === undefined
        ? 'Missing required option "--config" FILE or "--model redis": where the LB model comes from'
        : `Cannot use --config "${config}" with --model ${model}: choose one`,
      USAGE,
    );
  }
  const buckets = values["flow-buckets"] === undefined
    ? undefined
    : intOption(values, "flow-buckets", { max: MAX_FLOW_BUCKETS })!;
  if (buckets !== undefined && (buckets < 1 || (buckets & (buckets - 1)) !== 0)) {
    throw new UsageError(`Cannot use --flow-buckets ${buckets}: a power of two, 1 to 256`, USAGE);
  }
  const redis: FlowStoreOptions = {
    ...readRedis(values, {
      ...(flowSync || model === "redis"
        ? { required: true }
        : { default: "redis://127.0.0.1:6379" }),
      password: env.password,
      readFile: env.readFile,
    })!,
    ...(buckets === undefined ? {} : { buckets }),
  };
  const listen = readListen(values);

  const attach = str("attach");
  const netns = str("netns");
  // `--node-address IPV4[,IPV6]` (Kubernetes' `status.hostIPs`): the IPv6 one is the default
  // `--src-addr6`; the IPv4 one finds the interface and is the default `--src-addr`.
  const listed = listOption(values, "node-address");
  const nodeAddress = listed.find((a) => !a.includes(":")) ??
    (listed.length ? listed[0] : undefined);
  if (nodeAddress) ipv4("node-address", nodeAddress);
  const nodeAddress6 = listed.filter((a) => a.includes(":"));
  if (listed.length > 2 || nodeAddress6.length > 1) {
    throw new UsageError(`Cannot use --node-address "${listed}": one IPv4 and one IPv6 at most`);
  }
  const srcAddr = str("src-addr") ?? nodeAddress;
  const srcAddr6 = str("src-addr6") ?? nodeAddress6[0];
  if (srcAddr6) checkSrcAddr6(srcAddr6, { srcAddr, attach: attach ?? nodeAddress });
  const where = netns ? { netns } : {};
  const out: AgentArgs = {
    config,
    model,
    flowSync,
    flowSharing: choiceOption(values, "flow-sharing", ["all", "exceptions"]),
    redis,
    vips: listOption(values, "vip").map((v) => vipFlag(v)),
    nodeName: stringOption(values, "node-name", { required: true }),
    listen,
    datapath: choiceOption(values, "datapath", ["bpf", "memory"]),
    configPollMs: intOption(values, "config-poll-ms")!,
    fullReconcileIntervalMs: intOption(values, "full-reconcile-interval-ms")!,
    logLevel: choiceOption<LogLevel>(values, "log-level", ["info", "debug", "warn", "error"]),
    health: choiceOption(values, "health", ["on", "off"]) === "on",
    maglevSize: int("maglev-size"),
    policy: str("policy"),
    policyFollow: str("policy-follow"),
    bgpConfig: str("bgp-config"),
    bgpDir: str("bgp-dir"),
    pinDir: str("pin-dir"),
    objectDir: str("object-dir"),
    maxFlows: int("max-flows"),
    maxServices: int("max-services"),
    maxBackends: int("max-backends"),
    attach: attach
      ? { ifname: attach, ...where }
      : nodeAddress
      ? { address: nodeAddress, ...where }
      : undefined,
    configure: srcAddr
      ? {
        srcAddr: ipv4("src-addr", srcAddr),
        encapPort: intOption(values, "encap-port", { default: 6080, max: 65535 }),
        seed: intOption(values, "seed", { max: 0xffffffff })!,
        ...(values["event-budget"] === undefined
          ? {}
          : { eventBudget: intOption(values, "event-budget", { min: 1, max: 0xffffffff }) }),
      }
      : undefined,
    srcAddr6,
    encapPortFlag: values["encap-port"] === undefined
      ? undefined
      : intOption(values, "encap-port", { max: 65535 }),
    idleTimeoutMs: int("idle-timeout-ms"),
    sweepIntervalMs: int("sweep-interval-ms"),
    queueCapacity: int("queue-capacity"),
    learnWindowMs: intOption(values, "learn-window-ms", { max: 10_000 }),
  };
  if (out.flowSharing === "exceptions" && out.datapath === "bpf" && !out.configure) {
    throw new UsageError(
      "Cannot use --flow-sharing exceptions without --src-addr or --node-address: the flow hash " +
        "seed the agent places flows with must be the one it writes into the datapath",
      USAGE,
    );
  }
  // Absent options stay absent (callers spread these over their defaults).
  for (const key of Object.keys(out) as (keyof AgentArgs)[]) {
    if (out[key] === undefined) delete out[key];
  }
  return out;
}

/** `--src-addr6`: a global unicast IPv6 address, or `auto` with an attach interface to read. */
function checkSrcAddr6(text: string, has: { srcAddr?: string; attach?: string }): void {
  const bad = (why: string, cause?: unknown): never => {
    throw new UsageError(`Cannot use --src-addr6 "${text}": ${why}`, USAGE, { cause });
  };
  if (!has.srcAddr) {
    bad("it needs --src-addr or --node-address (the encap port and seed are IPv4's hf_config)");
  }
  if (text === "auto") {
    if (!has.attach) bad("auto reads the attach interface: give --attach or --node-address");
    return;
  }
  try {
    if (!isGlobalUnicastIpv6(text)) bad("not a global unicast IPv6 address");
  } catch (err) {
    if (err instanceof UsageError) throw err;
    bad((err as Error).message, err);
  }
}
