/**
 * The arguments of `main.ts egress` (node/egress/agent.ts), through lib/args.ts.
 *
 * ```
 * main.ts egress --config egress.json --node-name nat1 [--redis redis://host:port]
 *                [--listen HOST:PORT] [--no-sync] [--lease-ttl-ms N] [--log-level L]
 * main.ts egress --egress NS/NAME --node-name POD --redis redis://host:port [--config-wait-ms N] …
 * ```
 *
 * @module
 */

import type { LogLevel } from "../../lib/log.ts";
import {
  applyTable,
  choiceOption,
  type CommandLine,
  intOption,
  stringOption,
  UsageError,
} from "../../lib/args.ts";
import { defineCommand } from "../../lib/flags.ts";
import {
  bgpFlags,
  listenFlag,
  nodeNameFlag,
  readListen,
  readRedis,
  redisFlags,
} from "../../lib/flag_groups.ts";

/** The `egress` command for lib/args.ts: its flag table, options and usage. */
export const EGRESS_COMMAND = defineCommand({
  command: "egress",
  synopsis: "main.ts egress --config FILE --node-name POD [OPTIONS]\n" +
    "main.ts egress --egress NS/NAME --node-name POD --redis URL [OPTIONS]",
  about:
    "Runs one NAT pod of an egress NAT, inside the pod's network namespace: SNAT rules (nftables\n" +
    "table ip holdfast_egress), heartbeats with the other NAT pods, a Redis lease per floating address,\n" +
    "conntrack sync to the standbys, and the floating addresses of the addresses it owns. SIGTERM\n" +
    "hands every owned address to its standby (planned handover, no resets) and exits.",
  flags: {
    config: { arg: "FILE", help: "the egress NAT config (JSON; see controller/egress/config.ts)" },
    egress: {
      arg: "NS/NAME",
      help: "instead of --config: the config the controller publishes to Redis\n" +
        "for EgressNAT NS/NAME (key hf:egress:{NS/NAME}:config); waits for\n" +
        "it, follows its changes (peers live; other fields need a restart)",
    },
    "config-wait-ms": {
      arg: "N",
      help: "with --egress: how long to wait for the config",
      default: "120000",
    },
    "no-sync": {
      type: "boolean",
      help: "do not sync conntrack (the baseline: a takeover resets connections)",
    },
    "lease-ttl-ms": { arg: "N", help: "lease time to live", defaultText: "the ownership's" },
    announce: {
      arg: "MODE",
      help: "how routers and neighbours on the external side find the owner:\n" +
        'garp (gratuitous ARP), bgp (announce the /32 to the config\'s "bgp"\n' +
        "peers through the pod's bird), both, or auto (both when the\n" +
        'config has a "bgp" section, else garp)',
      default: "auto",
    },
    "log-level": { arg: "L", help: "debug | info | warn | error", default: "info" },
    ...nodeNameFlag("this pod's name among the config's peers", {
      required: true,
      aliases: ["name"],
    }),
    ...listenFlag("none", { aliases: ["metrics-addr"] }),
    ...redisFlags(["redis"], {
      help: 'Redis of the leases (default: the config\'s "redis"; required\n' +
        "with --egress); redis+cluster://HOST:PORT[,…] for a Redis Cluster",
    }),
    "bgp-dir": { ...bgpFlags("", "/run/holdfast/bird-egress-POD")["bgp-dir"] },
  },
});

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
  const v = applyTable(line.values, EGRESS_COMMAND);
  const metrics = readListen(v);
  const redis = readRedis(v)?.url;
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
    configWaitMs: intOption(v, "config-wait-ms", { min: 0, max: 3_600_000 })!,
    name: stringOption(v, "node-name", { required: true }),
    redis,
    metrics,
    noSync: v["no-sync"] === true,
    leaseTtlMs: intOption(v, "lease-ttl-ms", { min: 50, max: 600_000 }),
    announce: choiceOption(v, "announce", ["auto", "garp", "bgp", "both"]),
    bgpDir: stringOption(v, "bgp-dir"),
    logLevel: choiceOption(v, "log-level", ["info", "debug", "warn", "error"]),
  };
}
