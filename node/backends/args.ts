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
  type CommandLine,
  intOption,
  listOption,
  stringOption,
  UsageError,
} from "../../lib/args.ts";
import type { RedisStoreOptions } from "../../lib/redis_connection.ts";
import { redisUrlProblem } from "../../lib/redis_cluster.ts";
import { canonicalIp } from "./plan.ts";

export const NODE_USAGE =
  `usage: main.ts node --node-name NAME (--kube [--kubeconfig FILE] | --pods FILE)
                    (--model redis --redis URL | --config FILE)
                    (--uplink IF[,IF...] | --node-address IP[,IP...]) [--netns NS]
                    [--encap-port N] [--mss N (0 = off)]
                    [--pin-dir DIR] [--object-dir DIR] [--flow-idle-s N (0 = LRU only)]
                    [--redis-user USER] [--redis-password-file FILE]
                    [--listen HOST:PORT (default 127.0.0.1:9472; "none")]
                    [--egress-steer [--redis URL] [--egress-steer-cleanup]]
  The node side of Holdfast: for every pod on this node that backs a frontend, the LB nodes'
  encapsulated packets reach the pod at its own address and target port, and its replies leave
  from the LB IP and port straight to the client. Runs until SIGTERM; the programs and pinned
  maps stay, so traffic continues across a restart.
  --uplink: where encapsulated packets arrive and replies leave; or --node-address: the
  interfaces holding the node's addresses (in Kubernetes status.hostIPs). --netns: a network
  namespace to work in (the lab).
  --egress-steer: also steer this node's client pods of every EgressNAT to the NAT pod owning
  their floating address (docs/egress.md "Steering client pods"; Redis from --redis, which
  --model redis already gives). --egress-steer-cleanup: detach the steering at stop (default:
  it stays, as the other programs do, so traffic keeps its path across a restart).`;

export const NODE_COMMAND = {
  command: "node",
  usage: NODE_USAGE,
  options: {
    "node-name": { type: "string" },
    kube: { type: "boolean" },
    kubeconfig: { type: "string" },
    pods: { type: "string" },
    model: { type: "string" },
    config: { type: "string" },
    redis: { type: "string" },
    "redis-user": { type: "string" },
    "redis-password-file": { type: "string" },
    uplink: { type: "string", multiple: true },
    "node-address": { type: "string", multiple: true },
    netns: { type: "string" },
    "encap-port": { type: "string" },
    mss: { type: "string" },
    "pin-dir": { type: "string" },
    "object-dir": { type: "string" },
    "flow-idle-s": { type: "string" },
    listen: { type: "string" },
    "egress-steer": { type: "boolean" },
    "egress-steer-cleanup": { type: "boolean" },
  },
} as const;

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
  { values }: CommandLine,
  env: { password?: string; readFile?: (path: string) => string } = {},
): NodeArgs {
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
  const readRedis = (): RedisStoreOptions => {
    const url = stringOption(values, "redis", { required: true });
    // One Redis or a Redis Cluster, as every Redis user takes (docs/operators.md).
    const problem = redisUrlProblem(url);
    if (problem) throw new UsageError(`Cannot use --redis "${url}": ${problem}`);
    const redis: RedisStoreOptions = { url };
    const user = str("redis-user");
    if (user) redis.username = user;
    const pwFile = str("redis-password-file");
    if (pwFile) {
      try {
        redis.password = (env.readFile ?? Deno.readTextFileSync)(pwFile).trim();
      } catch (err) {
        throw new UsageError(`Cannot read --redis-password-file "${pwFile}": ${err}`);
      }
    } else if (env.password) redis.password = env.password;
    return redis;
  };
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
  const listenText = stringOption(values, "listen", { default: "127.0.0.1:9472" });
  let listen: NodeArgs["listen"] = null;
  if (listenText !== "none") {
    const m = /^(.+):(\d+)$/.exec(listenText);
    if (!m || Number(m[2]) > 65535) {
      throw new UsageError(`Cannot use --listen "${listenText}": expected HOST:PORT or none`);
    }
    listen = { hostname: m[1]!, port: Number(m[2]) };
  }
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
    mssMax: intOption(values, "mss", { default: 1432, max: 65535 }),
    pinDir: str("pin-dir"),
    objectDir: str("object-dir"),
    flowIdleS: intOption(values, "flow-idle-s", { default: 7200 }),
    listen,
    ...(egressSteer ? { egressSteer } : {}),
  };
  return out;
}
