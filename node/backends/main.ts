/**
 * `main.ts node`: the node agent, one per node on the host network (k8s/node.yaml,
 * docs/backends.md). For every pod on the node that backs a frontend of the LB model it makes the
 * LB nodes' encapsulated packets reach the pod at its own address and target port, client
 * address kept, and its replies leave from the LB IP and port straight to the client (DSR):
 *
 * 1. Datapath: bpf/node_tc.o with its maps pinned in `--pin-dir` (default
 *    /sys/fs/bpf/holdfast-node): a restarted agent adopts the frontends and flows the last one
 *    left, and replaces the programs on the uplinks atomically (hf_node_in on tc ingress,
 *    hf_node_out on egress; `--uplink`, or the interfaces holding `--node-address`).
 * 2. The LB model: from Redis (`--model redis`, as LB agents follow it) or a services file
 *    (`--config`, the lab and the demo); its settings' encap port unless `--encap-port`.
 * 3. The pods on the node: the Kubernetes API (`--kube`: pods with spec.nodeName = this node) or
 *    a pods file (`--pods`). With both known, the maps are made equal to what they say
 *    (node/backends/reconcile.ts): entries of pods gone go, with their flows.
 *
 * `GET /readyz` is 200 once attached and the state applied; `GET /metrics` has
 * `holdfast_node_packets_total{reason}` and the gauges of the reconciler. SIGTERM/SIGINT stop it
 * with exit 0; programs and maps stay.
 *
 * @module
 */

import { readCommandLine } from "../../lib/args.ts";
import { log, type Logger } from "../../lib/log.ts";
import { type Registry, registry } from "../../lib/metrics.ts";
import { Lifecycle } from "../../lib/lifecycle.ts";
import { serveOps } from "../../lib/ops_http.ts";
import { DB } from "../../lib/statedb/db.ts";
import { createLBTables } from "../lb/tables/tables.ts";
import { Writer } from "../lb/tables/writer.ts";
import { type FileConfig, parseConfig } from "../lb/sources/file_source.ts";
import { RedisModelSource } from "../lb/sources/redis_source.ts";
import { connectModelStore } from "../../controller/model/mod.ts";
import { NODE_PIN_DIR, NodeDatapath } from "../bpf/node_datapath.ts";
import { exportPinMetrics } from "../bpf/metrics.ts";
import { monotonicNs } from "../bpf/_ffi.ts";
import { watchFile } from "../anycast/watch_file.ts";
import { NODE_COMMAND, type NodeArgs, readNodeArgs } from "./args.ts";
import { NodeBackends } from "./reconcile.ts";
import { filePodSource, type PodSource } from "./pods.ts";
import { kubePodSource } from "./kube_pods.ts";
import { nodeUplinks } from "./uplink.ts";
import { startEgressSteer } from "../egress_steer/mod.ts";

/** How often idle recorded flows are swept (with `--flow-idle-s` > 0). */
const SWEEP_MS = 60_000;

/** Counts of bpf/node_tc.c's outcomes, read from the per-CPU map at scrape time. */
function exportNodeMetrics(dp: NodeDatapath, reg: Registry): void {
  const packets = reg.counter(
    "holdfast_node_packets_total",
    "Packets the node programs acted on, by outcome (bpf/consts.h enum hf_node_reason)",
    { labelNames: ["reason"] },
  );
  const flows = reg.gauge("holdfast_node_flows", "Recorded flows (hf_node_flows + hf_node_flows6)");
  const last = new Map<string, bigint>();
  flows.onCollect(() => {
    for (const [reason, n] of Object.entries(dp.stats())) {
      const prev = last.get(reason) ?? 0n;
      const delta = n >= prev ? n - prev : n;
      if (delta > 0n) packets.inc({ reason }, Number(delta));
      last.set(reason, n);
    }
    flows.set(undefined, dp.maps.flows.keys().length + dp.maps.flows6.keys().length);
  });
}

/** Follows the LB model; resolves once started (the model applies through `onModel`). */
function followModel(
  a: NodeArgs,
  onModel: (m: FileConfig) => void,
  onEncapPort: (port: number) => void,
  nlog: Logger,
  signal: AbortSignal,
): Promise<() => Promise<void>> {
  if ("file" in a.model) {
    const file = a.model.file;
    return watchFile(file, (text) => {
      try {
        onModel(parseConfig(text));
      } catch (err) {
        nlog.error("config rejected, keeping the last good one", { file, err });
      }
    }, {
      signal,
      onError: (err) => nlog.warn("cannot read the config", { file, err }),
    }).then(() => () => Promise.resolve());
  }
  const store = connectModelStore({ ...a.model.redis, logComponent: "model-store" });
  const writer = new Writer(createLBTables(new DB()), { logger: nlog });
  const source = new RedisModelSource(writer, store, {
    initializer: false,
    onApplied: (_prev, next) => onModel(next),
    onSettings: (s) => {
      if (s.encapPort !== undefined) onEncapPort(s.encapPort);
    },
  });
  source.start();
  return Promise.resolve(async () => {
    await source.stop();
    await store.close();
  });
}

/** Runs the node agent until SIGTERM/SIGINT or `options.signal`; exit 0, 1 (failed), 2 (usage). */
export async function main(
  args: string[],
  options: { signal?: AbortSignal } = {},
): Promise<number> {
  const read = readCommandLine(
    args,
    NODE_COMMAND,
    (line) => readNodeArgs(line, { password: Deno.env.get("HOLDFAST_REDIS_PASSWORD") }),
  );
  if ("exit" in read) return read.exit;
  const a = read.options;
  const nlog = log.with({ component: "node", node: a.nodeName });
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  for (const s of ["SIGTERM", "SIGINT"] as const) Deno.addSignalListener(s, onSignal);
  options.signal?.addEventListener("abort", onSignal);
  const life = new Lifecycle(nlog);
  life.onStop("signal", () => stop.abort());
  let ready = false;
  let backends: NodeBackends | null = null;
  try {
    if (a.listen) {
      const server = serveOps(a.listen, () => ready && (backends?.applied ?? false), {
        logger: nlog,
      });
      life.onStop("ops", () => server.shutdown());
    }
    // 1. Datapath, adopting what a previous agent pinned.
    const dp = await NodeDatapath.open({
      objectDir: a.objectDir,
      pinDir: a.pinDir ?? NODE_PIN_DIR,
    });
    life.onStop("datapath", () => dp[Symbol.dispose]());
    nlog.info("starting", {
      pinDir: a.pinDir ?? NODE_PIN_DIR,
      adopted: { frontends: dp.frontends().length, flows: dp.flows().length },
      pods: "file" in a.pods ? a.pods.file : "kubernetes",
      model: "file" in a.model ? a.model.file : "redis",
    });
    let encapPort = a.encapPort ?? 6080;
    dp.configure({ encapPort, mssMax: a.mssMax });
    backends = new NodeBackends(dp, nlog, registry);
    exportNodeMetrics(dp, registry);
    exportPinMetrics(dp.object.migrations, registry);
    const uplinks = a.uplinks.length > 0 ? [...a.uplinks] : nodeUplinks(a.nodeAddresses, a.netns);
    for (const ifname of uplinks) dp.attach(ifname, { netns: a.netns });
    dp.finishMigrations(); // every uplink has the new programs: the old maps go
    // 2. The LB model and 3. the pods: each change reconciles.
    const b = backends;
    const stopModel = await followModel(
      a,
      (m) => void b.setModel(m),
      (port) => {
        if (a.encapPort !== undefined || port === encapPort) return;
        encapPort = port;
        dp.configure({ encapPort, mssMax: a.mssMax });
        nlog.info(`encap port set to ${port} (from the model)`);
      },
      nlog,
      stop.signal,
    );
    life.onStop("model", stopModel);
    const pods: PodSource = "file" in a.pods
      ? filePodSource(a.pods.file, nlog)
      : kubePodSource(a.pods.kubeconfig, a.nodeName, nlog);
    life.onStop("pods", () => pods.stop());
    await pods.start((list) => {
      b.setPods(list);
      return Promise.resolve();
    });
    if (a.egressSteer) {
      // Client pods of EgressNATs to their floating address's owner (docs/egress.md).
      life.onStop(
        "egress-steer",
        await startEgressSteer({
          nodeName: a.nodeName,
          ...a.egressSteer,
          ...(a.netns ? { netns: a.netns } : {}),
          ...(a.objectDir ? { objectDir: a.objectDir } : {}),
          log: nlog,
          registry,
        }),
      );
    }
    if (a.flowIdleS > 0) {
      const timer = setInterval(() => {
        const n = b.sweepIdle(monotonicNs() - BigInt(a.flowIdleS) * 1_000_000_000n);
        if (n > 0) nlog.info("idle flows removed", { flows: n, idleS: a.flowIdleS });
      }, SWEEP_MS);
      life.onStop("idle-sweep", () => clearInterval(timer));
    }
    ready = true;
    nlog.info("ready", { uplinks, netns: a.netns ?? null, encapPort, applied: b.applied });
    await new Promise<void>((resolve) => {
      if (stop.signal.aborted) resolve();
      stop.signal.addEventListener("abort", () => resolve());
    });
    ready = false;
    nlog.info("stopping: programs and pinned maps stay, traffic continues");
    return 0;
  } catch (err) {
    if (stop.signal.aborted) return 0;
    nlog.error("node agent failed", { err, stack: (err as Error).stack });
    return 1;
  } finally {
    for (const s of ["SIGTERM", "SIGINT"] as const) Deno.removeSignalListener(s, onSignal);
    options.signal?.removeEventListener("abort", onSignal);
    await life.stop();
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
