/**
 * `main.ts controller`: the Kubernetes controller process (k8s/controller.yaml runs it; the
 * operator's guide is docs/operators.md). It watches Services, EndpointSlices, AddressPools and
 * the LoadBalancerConfig `default`, allocates addresses, writes status and Events while it holds
 * the Lease, and publishes the LB model to Redis (`--redis`) for the agents; EgressNATs get their
 * NAT pods' config published there and `status.owners` from the leases (controller/k8s/egress.ts).
 *
 * HTTP (`--listen`): `/metrics` (Prometheus text), `/healthz` (200 while running), `/readyz`
 * (200 once the informers listed everything and one pass built the tables: the leader can publish,
 * a follower is warm and can take over at once), and with `--redis` the dashboard `/dashboard`
 * (controller/status/dashboard.ts; `--agents` adds nodes' `/metrics` to it).
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 1 cannot start, 2 bad command line.
 *
 * @module
 */

import * as k8s from "@kubernetes/client-node";
import {
  applyTable,
  choiceOption,
  intOption,
  listOption,
  readCommandLine,
  stringOption,
  UsageError,
} from "../../lib/args.ts";
import { defineCommand } from "../../lib/flags.ts";
import { listenFlag, readListen, readRedis, redisFlags } from "../../lib/flag_groups.ts";
import { log, type LogLevel, setLogLevel } from "../../lib/log.ts";
import { serveOps } from "../../lib/ops_http.ts";
import { RedisConnection, type RedisStoreOptions } from "../../lib/redis_connection.ts";
import {
  connectModelStore,
  type RunningModelPublisher,
  startModelPublisher,
} from "../model/mod.ts";
import { startLeaderElection } from "./leader.ts";
import { startController } from "./run.ts";
import { metricsUrl, readStatus } from "../status/collect.ts";
import { dashboardHandler, StatusFeed } from "../status/dashboard.ts";
import { RedisStatusStore } from "../status/redis_status_store.ts";
import { redisUrlProblem } from "../../lib/redis_cluster.ts";
import { defaultImage, type EgressWorkloadOptions } from "./_egress_workload.ts";

/** The parsed command line. */
export interface ControllerArgs {
  kubeconfig?: string;
  namespace: string;
  identity: string;
  lease: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  redis?: RedisStoreOptions;
  policyConfigMap: string;
  listen: { hostname: string; port: number } | null;
  /** How NAT pods are made (undefined: not at all). */
  egressWorkload?: EgressWorkloadOptions;
  /** `/metrics` URLs the dashboard reads besides Redis. */
  agents: string[];
  logLevel: LogLevel;
}

const EGRESS = "egress NAT pods";

/** The `controller` command for lib/args.ts: its flag table, options and usage. */
export const CONTROLLER_COMMAND = defineCommand({
  command: "controller",
  synopsis: "main.ts controller [OPTIONS]",
  flags: {
    kubeconfig: {
      arg: "FILE",
      help: "the cluster",
      defaultText: "in-cluster, else $KUBECONFIG or ~/.kube/config",
    },
    namespace: { arg: "NS", help: "namespace of the Lease", default: "holdfast-system" },
    identity: { arg: "ID", help: "this replica's name", defaultText: "the hostname" },
    lease: { arg: "NAME", help: "Lease for leader election", default: "holdfast-controller" },
    "lease-duration-ms": { arg: "N", help: "leader election timing", default: "15000" },
    "renew-deadline-ms": { arg: "N", help: "leader election timing", default: "10000" },
    "retry-period-ms": { arg: "N", help: "leader election timing", default: "2000" },
    "policy-configmap": {
      arg: "NAME",
      help: "ConfigMap with the WASM policy, validated on every change\n" +
        "(Events PolicyValidated / PolicyRejected)",
      default: "holdfast-policy",
    },
    agents: {
      arg: "URL,...",
      multiple: true,
      help: "the dashboard also reads these nodes' /metrics (http://HOST:PORT)",
    },
    "log-level": { arg: "info|debug|warn|error", help: "lowest level logged", default: "info" },
    ...listenFlag("0.0.0.0:9480", {
      help: '/metrics, /healthz, /readyz, and with --redis /dashboard ("none": not served)',
    }),
    ...redisFlags(["redis", "redis-user", "redis-password-file"], {
      help: "publish the LB model and the EgressNAT configs here, read the\n" +
        "egress leases (redis:// or rediss://; a Redis Cluster:\n" +
        "redis+cluster://HOST:PORT[,HOST:PORT…])",
      defaultText: "none",
    }),
    "egress-nat-pods": {
      arg: "on|off",
      help: "make each EgressNAT's NAT pods: a Deployment and a\n" +
        "PodDisruptionBudget it owns (needs --redis)",
      default: "on",
      group: EGRESS,
    },
    "egress-image": {
      arg: "REF",
      help: "their image",
      defaultText: "holdfast:<this version>",
      group: EGRESS,
    },
    "egress-redis": {
      arg: "URL",
      help: "Redis as the NAT pods reach it",
      defaultText: "--redis, no password",
      group: EGRESS,
    },
    "egress-redis-secret": {
      arg: "NAME",
      help: 'Secret in the EgressNAT\'s namespace with key "password" ("none": no password)',
      defaultText: "holdfast-redis with --redis-password-file",
      group: EGRESS,
    },
  },
});

/** Reads the command line (throws {@linkcode UsageError} naming a bad argument). */
export function readControllerArgs(
  values: Record<string, string | boolean | (string | boolean)[] | undefined>,
): ControllerArgs {
  values = applyTable(values, CONTROLLER_COMMAND);
  const flags = readRedis(values);
  const redis: RedisStoreOptions | undefined = flags && { ...flags, logComponent: "model-store" };
  const listen = readListen(values);
  return {
    egressWorkload: readEgressWorkload(values, redis),
    kubeconfig: stringOption(values, "kubeconfig"),
    namespace: stringOption(values, "namespace")!,
    identity: stringOption(values, "identity", { default: Deno.hostname() }),
    lease: stringOption(values, "lease")!,
    leaseDurationMs: intOption(values, "lease-duration-ms", { min: 1 })!,
    renewDeadlineMs: intOption(values, "renew-deadline-ms", { min: 1 })!,
    retryPeriodMs: intOption(values, "retry-period-ms", { min: 1 })!,
    redis,
    policyConfigMap: stringOption(values, "policy-configmap")!,
    listen,
    agents: listOption(values, "agents").map((a) => {
      try {
        return metricsUrl(a);
      } catch (err) {
        throw new UsageError(`--agents: ${(err as Error).message}`);
      }
    }),
    logLevel: choiceOption<LogLevel>(values, "log-level", ["info", "debug", "warn", "error"]),
  };
}

function readEgressWorkload(
  values: Record<string, string | boolean | (string | boolean)[] | undefined>,
  redis: RedisStoreOptions | undefined,
): EgressWorkloadOptions | undefined {
  if (choiceOption(values, "egress-nat-pods", ["on", "off"]) === "off" || !redis) return undefined;
  const url = stringOption(values, "egress-redis", {
    default: redis.url.replace(/\/\/[^@/]*@/, "//"),
  });
  const problem = redisUrlProblem(url);
  if (problem) throw new UsageError(`Cannot use --egress-redis "${url}": ${problem}`);
  const secret = stringOption(values, "egress-redis-secret", {
    default: redis.password !== undefined ? "holdfast-redis" : "none",
  });
  return {
    image: stringOption(values, "egress-image", { default: defaultImage() }),
    redisUrl: url,
    ...(redis.username !== undefined ? { redisUser: redis.username } : {}),
    ...(secret !== "none" ? { redisPasswordSecret: secret } : {}),
  };
}

/** `--kubeconfig`, else in-cluster (service account), else $KUBECONFIG / ~/.kube/config. */
export function loadKubeConfig(file: string | undefined): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  if (file !== undefined) kc.loadFromFile(file);
  else if (Deno.env.get("KUBERNETES_SERVICE_HOST")) kc.loadFromCluster();
  else kc.loadFromDefault();
  return kc;
}

/** Runs the controller until SIGTERM/SIGINT; returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const read = readCommandLine(
    argv,
    CONTROLLER_COMMAND,
    ({ values }) => readControllerArgs(values),
  );
  if ("exit" in read) return read.exit;
  const args = read.options;
  setLogLevel(args.logLevel);
  const logger = log.with({ identity: args.identity });
  let kc: k8s.KubeConfig;
  try {
    kc = loadKubeConfig(args.kubeconfig);
  } catch (err) {
    logger.error("cannot load a kubeconfig", { file: args.kubeconfig, error: String(err) });
    return 1;
  }
  logger.info("starting", {
    server: kc.getCurrentCluster()?.server,
    lease: `${args.namespace}/${args.lease}`,
    redis: args.redis?.url ?? null,
  });
  // Assigned below; the controller asks only after its first list, never before.
  // deno-lint-ignore prefer-const
  let election: ReturnType<typeof startLeaderElection> | undefined;
  const isLeader = () => election?.isLeader() ?? false;
  // EgressNAT configs and leases (controller/k8s/egress.ts) live in the same Redis.
  const egressRedis = args.redis
    ? new RedisConnection({ ...args.redis, logComponent: "egress-store" })
    : undefined;
  const running = startController(kc, {
    identity: args.identity,
    isLeader,
    egressRedis,
    egressWorkload: args.egressWorkload,
    reportsRedis: egressRedis, // its blocking connection follows the LB nodes' reports
    logger,
    policyConfigMap: { namespace: args.namespace, name: args.policyConfigMap },
  });
  const store = args.redis ? connectModelStore(args.redis) : undefined;
  if (!store) logger.warn("no --redis: the LB model is not published", {});
  let publisher: RunningModelPublisher | undefined;
  // The accepted policy module goes into the model, so agents swap to it (issue 14).
  running.policy?.onAccepted((p) => publisher?.setPolicy(p));
  // The encap port and the LB nodes (LoadBalancerConfig + Nodes) go into the model too.
  running.onModelSettings((s) => publisher?.setSettings(s));
  election = startLeaderElection(kc.makeApiClient(k8s.CoordinationV1Api), {
    namespace: args.namespace,
    name: args.lease,
    identity: args.identity,
    leaseDurationMs: args.leaseDurationMs,
    renewDeadlineMs: args.renewDeadlineMs,
    retryPeriodMs: args.retryPeriodMs,
    logger,
  }, {
    onStartedLeading: (signal) => {
      logger.info("leading: allocating and writing status", {});
      running.controller.resetAllocator();
      const fed = running.controller.leaderFed();
      running.controller.trigger(0);
      // Publish once the tables hold this leader's decisions, not the follower's view.
      if (store) {
        fed.then(() => {
          if (signal.aborted) return;
          const pub = startModelPublisher(running.cp, store, { logger, canWrite: isLeader });
          publisher = pub;
          const active = running.policy?.activeModule();
          if (active) pub.setPolicy(active);
          pub.setSettings(running.modelSettings());
          signal.addEventListener("abort", () => {
            if (publisher === pub) publisher = undefined;
            pub.stop().catch(() => {});
          }, { once: true });
        });
      }
    },
    onStoppedLeading: () => logger.warn("stopped leading: writes stop", {}),
  });
  // The dashboard (/dashboard): Redis and --agents, read only while someone watches.
  const statusStore = args.redis && args.listen ? new RedisStatusStore(args.redis) : null;
  const feed = statusStore
    ? new StatusFeed(() => readStatus(statusStore, args.agents), { lazy: true, logger })
    : undefined;
  feed?.start();
  const server = args.listen
    ? serveOps(args.listen, running.isSynced, feed ? { routes: dashboardHandler(feed) } : {})
    : undefined;
  const stopped = Promise.withResolvers<void>();
  const onSignal = () => stopped.resolve();
  for (const s of ["SIGTERM", "SIGINT"] as const) Deno.addSignalListener(s, onSignal);
  await stopped.promise;
  for (const s of ["SIGTERM", "SIGINT"] as const) Deno.removeSignalListener(s, onSignal);
  logger.info("stopping", {});
  await publisher?.stop();
  await election.stop(); // releases the Lease: a follower takes over at its next try
  await running.stop();
  await egressRedis?.close();
  await store?.close();
  await feed?.stop(); // ends the dashboard's event streams, so the server can shut down
  await statusStore?.close();
  await server?.shutdown();
  return 0;
}
