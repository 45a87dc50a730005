/**
 * `main.ts node` command line (docs/backends.md):
 *
 * ```
 * main.ts node --node-name NAME (--kube [--kubeconfig FILE] | --pods FILE)
 *              (--model redis --redis URL | --config FILE)
 *              (--uplink IF[,IF…] | --node-address IP[,IP…]) [--netns NS]
 *              [--encap-port N] [--mss N] [--pin-dir DIR] [--flow-idle-s N] [--listen HOST:PORT]
 * ```
 *
 * @module
 */

import {
  applyTable,
  type CommandLine,
  intOption,
  listOption,
  stringOption,
  UsageError,
} from "../../lib/args.ts";
import type { RedisStoreOptions } from "../../lib/redis_connection.ts";
import { defineCommand } from "../../lib/flags.ts";
import {
  listenFlag,
  nodeNameFlag,
  readListen,
  readRedis as readRedis_,
  redisFlags,
} from "../../lib/flag_groups.ts";
import { canonicalIp } from "./plan.ts";

const ATTACH = "attach";

/** The `node` command for lib/args.ts: its flag table, options and usage. */
export const NODE_COMMAND = defineCommand({
  command: "node",
  synopsis: "main.ts node --node-name NAME (--kube [--kubeconfig FILE] | --pods FILE)\n" +
    "             (--model redis --redis URL | --config FILE)\n" +
    "             (--uplink IF[,IF...] | --node-address IP[,IP...]) [OPTIONS]",
  about:
    "The node side of Holdfast: for every pod on this node that backs a frontend, the LB nodes'\n" +
    "encapsulated packets reach the pod at its own address and target port, and its replies leave\n" +
    "from the LB IP and port straight to the client. Runs until SIGTERM; the programs and pinned\n" +
    "maps stay, so traffic continues across a restart.",
  flags: {
    kube: { type: "boolean", help: "the pods from the Kubernetes API" },
    kubeconfig: { arg: "FILE", help: "with --kube", defaultText: "in-cluster, else $KUBECONFIG" },
    pods: { arg: "FILE", help: "instead of --kube: the pods from a file" },
    model: { arg: "redis", help: "the LB model from Redis (--redis)" },
    config: { arg: "FILE", help: "instead of --model redis: the LB model from a services file" },
    "encap-port": {
      arg: "N",
      help: "encapsulation UDP port",
      defaultText: "the model's settings.encapPort, else 6080",
    },
    mss: { arg: "N", help: "clamp the TCP MSS of replies (0 = off)", default: "1432" },
    "pin-dir": { arg: "DIR", help: "bpffs directory of the maps" },
    "object-dir": { arg: "DIR", help: "where the BPF objects are" },
    "flow-idle-s": { arg: "N", help: "idle flows expire (0 = LRU only)", default: "7200" },
    "egress-steer": {
      type: "boolean",
      help: "also steer this node's client pods of every EgressNAT to the NAT pod owning\n" +
        'their floating address (docs/egress.md "Steering client pods"; Redis from --redis,\n' +
        "which --model redis already gives)",
    },
    "egress-steer-cleanup": {
      type: "boolean",
      help: "with --egress-steer: detach the steering at stop (default: it stays, as the\n" +
        "other programs do, so traffic keeps its path across a restart)",
    },
    ...nodeNameFlag("this node's name", { defaultText: "the hostname, without --kube" }),
    ...listenFlag("127.0.0.1:9472"),
    ...redisFlags(["redis", "redis-user", "redis-password-file"]),
    uplink: {
      arg: "IF[,IF...]",
      multiple: true,
      help: "where encapsulated packets arrive and replies leave",
      group: ATTACH,
    },
    "node-address": {
      arg: "IP[,IP...]",
      multiple: true,
      help: "instead of --uplink: the interfaces holding the node's addresses\n" +
        "(in Kubernetes status.hostIPs)",
      group: ATTACH,
    },
    netns: { arg: "NS", help: "a network namespace to work in (the lab)", group: ATTACH },
  },
});

/** Usage text of `main.ts node`. */
export const NODE_USAGE = NODE_COMMAND.usage;

/** The node agent's options. */
export interface NodeArgs {
  readonly nodeName: string;
  readonly pods: { readonly kube: true; readonly kubeconfig?: string } | { readonly file: string };
  readonly model: { readonly redis: RedisStoreOptions } | { readonly file: string };
  /** The uplinks by name; empty: the interfaces holding `nodeAddresses`. */
  readonly uplinks: readonly string[];
  readonly nodeAddresses: readonly string[];
  readonly netns?: string;
  /** Absent: the model's (settings.encapPort), else 6080. */
  readonly encapPort?: number;
  readonly mssMax: number;
  readonly pinDir?: string;
  readonly objectDir?: string;
  readonly flowIdleS: number;
  readonly listen: { readonly hostname: string; readonly port: number } | null;
  /** `--egress-steer`: steer local client pods of EgressNATs (Redis, cleanup at stop). */
  readonly egressSteer?: { readonly redis: RedisStoreOptions; readonly cleanup: boolean };
}

/** Reads a parsed `node` command line; throws {@link UsageError} naming the bad option. */
export function readNodeArgs(
  line: CommandLine,
  env: { password?: string; readFile?: (path: string) => string } = {},
): NodeArgs {
  const values = applyTable(line.values, NODE_COMMAND);
  const str = (name: string) => stringOption(values, name) || undefined;
  const kube = values.kube === true;
  const podsFile = str("pods");
  if (kube === (podsFile !== undefined)) {
    throw new UsageError('Need exactly one of "--kube" or "--pods FILE": where the pods come from');
  }
  if (!kube && values.kubeconfig !== undefined) {
    throw new UsageError("--kubeconfig goes with --kube");
  }
  const config = str("config");
  const model = str("model");
  if (model !== undefined && model !== "redis") {
    throw new UsageError(`Cannot use --model "${model}": the only model source is "redis"`);
  }
  if ((model === "redis") === (config !== undefined)) {
    throw new UsageError('Need exactly one of "--model redis" or "--config FILE": the LB model');
  }
  const readRedis = (): RedisStoreOptions =>
    // One Redis or a Redis Cluster, as every Redis user takes (docs/operators.md).
    readRedis_(values, { required: true, password: env.password, readFile: env.readFile })!;
  const modelSource: NodeArgs["model"] = model === "redis"
    ? { redis: readRedis() }
    : { file: config! };
  if (values["egress-steer-cleanup"] === true && values["egress-steer"] !== true) {
    throw new UsageError("--egress-steer-cleanup goes with --egress-steer");
  }
  const egressSteer = values["egress-steer"] === true
    ? {
      redis: "redis" in modelSource ? modelSource.redis : readRedis(),
      cleanup: values["egress-steer-cleanup"] === true,
    }
    : undefined;
  const listen = readListen(values);
  const uplinks = listOption(values, "uplink");
  const nodeAddresses = listOption(values, "node-address");
  for (const a of nodeAddresses) {
    if (canonicalIp(a) === "") {
      throw new UsageError(`Cannot use --node-address "${a}": not an IP address`);
    }
  }
  if ((uplinks.length > 0) === (nodeAddresses.length > 0)) {
    throw new UsageError(
      'Need exactly one of "--uplink IF" or "--node-address IP": where to attach',
    );
  }
  const nodeName = str("node-name") ?? (kube ? undefined : Deno.hostname());
  if (nodeName === undefined) throw new UsageError('Missing required option "--node-name"');
  const out: NodeArgs = {
    nodeName,
    pods: kube ? { kube: true, kubeconfig: str("kubeconfig") } : { file: podsFile! },
    model: modelSource,
    uplinks,
    nodeAddresses,
    netns: str("netns"),
    encapPort: values["encap-port"] === undefined
      ? undefined
      : intOption(values, "encap-port", { min: 1, max: 65535 }),
    mssMax: intOption(values, "mss", { max: 65535 })!,
    pinDir: str("pin-dir"),
    objectDir: str("object-dir"),
    flowIdleS: intOption(values, "flow-idle-s")!,
    listen,
    ...(egressSteer ? { egressSteer } : {}),
  };
  return out;
}
