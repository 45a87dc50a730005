/**
 * The arguments of `main.ts egress` (node/egress/agent.ts), through lib/args.ts.
 *
 * ```
 * main.ts egress --config egress.json --name nat1 [--redis redis://host:port]
 *                [--metrics-addr HOST:PORT] [--no-sync] [--lease-ttl-ms N] [--log-level L]
 * main.ts egress --egress NS/NAME --name POD --redis redis://host:port [--config-wait-ms N] …
 * ```
 *
 * @module
 */

import type { LogLevel } from "../../lib/log.ts";
import {
  choiceOption,
  type CommandLine,
  intOption,
  stringOption,
  UsageError,
} from "../../lib/args.ts";
import { redisUrlProblem } from "../../lib/redis_cluster.ts";

/** Usage text of `main.ts egress`. */
export const EGRESS_USAGE = `usage: main.ts egress --config FILE --name POD [OPTIONS]
       main.ts egress --egress NS/NAME --name POD --redis URL [OPTIONS]

Runs one NAT pod of an egress NAT, inside the pod's network namespace: SNAT rules (nftables
table ip holdfast_egress), heartbeats with the other NAT pods, a Redis lease per floating address,
conntrack sync to the standbys, and the floating addresses of the addresses it owns. SIGTERM
hands every owned address to its standby (planned handover, no resets) and exits.

  --config FILE         the egress NAT config (JSON; see controller/egress/config.ts)
  --egress NS/NAME      instead of --config: the config the controller publishes to Redis
                        for EgressNAT NS/NAME (key hf:egress:{NS/NAME}:config); waits for
                        it, follows its changes (peers live; other fields need a restart)
  --config-wait-ms N    with --egress: how long to wait for the config (default 120000)
  --name POD            this pod's name among the config's peers                      required
  --redis URL           Redis of the leases (default: the config's "redis"; required
                        with --egress); redis+cluster://HOST:PORT[,…] for a Redis Cluster
  --metrics-addr H:P    serve /metrics /healthz /readyz there (default: none)
  --no-sync             do not sync conntrack (the baseline: a takeover resets connections)
  --lease-ttl-ms N      lease time to live (default: the ownership's)
  --announce MODE       how routers and neighbours on the external side find the owner:
                        garp (gratuitous ARP), bgp (announce the /32 to the config's "bgp"
                        peers through the pod's bird), both, or auto (default: both when the
                        config has a "bgp" section, else garp)
  --bgp-dir DIR         bird's config, socket, pid file and log (default
                        /run/holdfast/bird-egress-POD)
  --log-level L         debug | info | warn | error (default info)
  -h, --help            this text`;

/** The `egress` command's options table. */
export const EGRESS_COMMAND = {
  command: "egress",
  usage: EGRESS_USAGE,
  options: {
    config: { type: "string" },
    egress: { type: "string" },
    "config-wait-ms": { type: "string" },
    name: { type: "string" },
    redis: { type: "string" },
    "metrics-addr": { type: "string" },
    "no-sync": { type: "boolean" },
    "lease-ttl-ms": { type: "string" },
    announce: { type: "string" },
    "bgp-dir": { type: "string" },
    "log-level": { type: "string" },
  },
} as const;

/** How the owner of a floating address draws the external side's traffic. */
export type AnnounceMode = "garp" | "bgp" | "both";

/** Parsed `egress` arguments. */
export interface EgressArgs {
  /** The config file (`--config`), or undefined with `--egress`. */
  config?: string;
  /** `namespace/name` of the EgressNAT whose config is read from Redis (`--egress`). */
  egress?: string;
  /** With `--egress`: how long to wait for the config, ms. */
  configWaitMs: number;
  name: string;
  redis?: string;
  metrics: { hostname: string; port: number } | null;
  noSync: boolean;
  leaseTtlMs?: number;
  /** `--announce` (`auto`: decided by the config's `bgp` section). */
  announce: AnnounceMode | "auto";
  bgpDir?: string;
  logLevel: LogLevel;
}

/** Reads `egress` arguments; throws {@link UsageError} naming the bad one. */
export function readEgressArgs(line: CommandLine): EgressArgs {
  const v = line.values;
  const metricsText = stringOption(v, "metrics-addr");
  let metrics: EgressArgs["metrics"] = null;
  if (metricsText !== undefined) {
    const m = /^(.+):(\d{1,5})$/.exec(metricsText);
    if (!m || Number(m[2]) > 65535) {
      throw new UsageError(`Cannot use --metrics-addr "${metricsText}": expected HOST:PORT`);
    }
    metrics = { hostname: m[1]!, port: Number(m[2]) };
  }
  const redis = stringOption(v, "redis");
  const redisProblem = redis === undefined ? null : redisUrlProblem(redis);
  if (redisProblem) throw new UsageError(`Cannot use --redis "${redis}": ${redisProblem}`);
  const config = stringOption(v, "config"), egress = stringOption(v, "egress");
  if ((config === undefined) === (egress === undefined)) {
    throw new UsageError("Pass exactly one of --config FILE and --egress NS/NAME");
  }
  if (egress !== undefined && !/^[a-z0-9][a-z0-9.-]*\/[a-z0-9][a-z0-9.-]*$/.test(egress)) {
    throw new UsageError(`Cannot use --egress "${egress}": expected NAMESPACE/NAME`);
  }
  if (egress !== undefined && redis === undefined) {
    throw new UsageError("--egress needs --redis (the config and the leases live there)");
  }
  return {
    config,
    egress,
    configWaitMs: intOption(v, "config-wait-ms", { default: 120_000, min: 0, max: 3_600_000 }),
    name: stringOption(v, "name", { required: true }),
    redis,
    metrics,
    noSync: v["no-sync"] === true,
    leaseTtlMs: intOption(v, "lease-ttl-ms", { min: 50, max: 600_000 }),
    announce: choiceOption(v, "announce", ["auto", "garp", "bgp", "both"]),
    bgpDir: stringOption(v, "bgp-dir"),
    logLevel: choiceOption(v, "log-level", ["info", "debug", "warn", "error"]),
  };
}
