/**
 * `main.ts agent`: everything one LB node runs, in one process.
 *
 * ```
 * main.ts agent --node-name lb1 --attach eth0 --src-addr 10.2.1.2 --pin-dir /sys/fs/bpf/holdfast
 *               --config services.yaml --redis redis://10.9.0.2:6379 [--vip 10.0.100.1]
 *               [--no-flow-sync] [--maglev-size 1021] [--policy FILE] [--config-poll-ms 200]
 *               [flow-sync options: see node/flows/main.ts]
 * ```
 *
 * 1. Datapath: loads the XDP load balancer reusing the maps pinned in `--pin-dir` (a restart
 *    loses no flow and renumbers nothing), writes the node settings, attaches to `--attach`.
 * 2. Control plane: tables + Writer + the BPF-maps reconciler over the real maps, fed by the
 *    file source following `--config` (re-read when it changes; a bad file is logged and the
 *    last good one keeps serving). Maglev tables come from the WASM policy module, with the
 *    TypeScript reference as fallback.
 * 3. Flow sync (unless `--no-flow-sync`): new-flow events from the ring buffer go to Redis;
 *    peers' flows are installed into the flow map; every stored flow is restored before ready.
 *    The LB IPs followed are the config's frontend addresses (plus any `--vip`), updated after
 *    every successful reload (`FlowSyncAgent.setVips`: an added one is restored and followed).
 *
 * Ready — a `{"msg":"ready"}` log line and `GET /readyz` 200 — only once the first config is
 * reconciled into the maps and the flows are restored, so a router never sends this node
 * traffic it cannot place.
 *
 * @module
 */
import { createControlPlane } from "../controller/control_plane.ts";
import { referenceMaglev } from "../controller/maglev.ts";
import { ConfigError, type FileConfig, FileSource } from "../controller/sources/file_source.ts";
import { PolicyHost, WasmMaglevBuilder } from "../policy-as/host/mod.ts";
import { Datapath, exportDatapathMetrics } from "./bpf/mod.ts";
import { exportControlPlaneMetrics } from "../controller/metrics.ts";
import { FlowSyncAgent } from "./flows/agent.ts";
import { followedVips } from "./flows/config_vips.ts";
import { BpfFlowTable, fromDatapathEvent } from "./flows/bpf_table.ts";
import { parseAgentArgs } from "./flows/main.ts";
import { purgeRemovedBackends } from "./flows/purge.ts";
import { connectRedisStore, redact } from "./flows/redis_store.ts";
import { log, setLogLevel } from "./log.ts";
import { CONTENT_TYPE, registry } from "./metrics.ts";

const RELEASE_WASM = new URL("../policy-as/build/release.wasm", import.meta.url);

/** Options only this composition takes; the rest go to the flow-sync parser. */
interface CompositionArgs {
  config: string;
  flowSync: boolean;
  maglevSize?: number;
  policy: URL | string;
  configPollMs: number;
}

function splitArgs(args: readonly string[]): { own: CompositionArgs; rest: string[] } {
  const rest: string[] = [];
  let config: string | undefined;
  let flowSync = true;
  let maglevSize: number | undefined;
  let policy: URL | string = RELEASE_WASM;
  let configPollMs = 200;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const value = () => {
      const v = args[++i];
      if (v === undefined) {
        throw new TypeError(`Cannot parse agent arguments: "${a}" needs a value`);
      }
      return v;
    };
    if (a === "--config") config = value();
    else if (a === "--no-flow-sync") flowSync = false;
    else if (a === "--maglev-size") maglevSize = Number(value());
    else if (a === "--policy") policy = value();
    else if (a === "--config-poll-ms") configPollMs = Number(value());
    else rest.push(a);
  }
  if (config === undefined) {
    throw new TypeError(`Cannot parse agent arguments: "--config" is required`);
  }
  return { own: { config, flowSync, maglevSize, policy, configPollMs }, rest };
}

async function mtimeOf(path: string): Promise<number> {
  try {
    return (await Deno.stat(path)).mtime?.getTime() ?? 0;
  } catch {
    return -1;
  }
}

/** Runs the agent until SIGTERM/SIGINT. Exit codes: 0 clean stop, 1 cannot start, 2 bad arguments. */
export async function main(args: string[]): Promise<number> {
  let own: CompositionArgs;
  let a: ReturnType<typeof parseAgentArgs>;
  try {
    const split = splitArgs(args);
    own = split.own;
    a = parseAgentArgs(split.rest, {
      password: Deno.env.get("HOLDFAST_REDIS_PASSWORD"),
      vipsOptional: true,
    });
  } catch (err) {
    console.error((err as Error).message);
    return 2;
  }
  setLogLevel(a.logLevel);
  const agentLog = log.with({ component: "agent", node: a.nodeName });
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  for (const s of ["SIGTERM", "SIGINT"] as const) Deno.addSignalListener(s, onSignal);

  const cleanup: (() => Promise<void> | void)[] = [];
  try {
    // 1. Datapath.
    const dp = await Datapath.open({
      ...(a.pinDir ? { pinDir: a.pinDir } : {}),
      ...(a.objectDir ? { objectDir: a.objectDir } : {}),
      ...(a.maxFlows ? { maxFlows: a.maxFlows } : {}),
    });
    cleanup.push(() => dp[Symbol.dispose]());
    if (a.configure) dp.configure(a.configure);

    // 2. Control plane over the real maps, Maglev from the WASM policy.
    const policy = await PolicyHost.create();
    const swap = await policy.swap(await Deno.readFile(own.policy));
    if (!swap.ok) {
      agentLog.warn("policy module rejected, using the TypeScript Maglev", { reason: swap });
    }
    const cp = await createControlPlane(dp.lbMaps(), {
      maglev: new WasmMaglevBuilder(policy, { fallback: referenceMaglev }),
      ...(own.maglevSize ? { maglevSize: own.maglevSize } : {}),
      log: (level, msg, fields) => agentLog[level](msg, fields),
    });
    exportControlPlaneMetrics(cp, registry);
    exportDatapathMetrics(dp, registry);
    const file = new FileSource(cp.writer);
    cp.start();
    cleanup.push(() => cp.stop());
    let seen = await mtimeOf(own.config);
    const loadConfig = async () => {
      try {
        const config = await file.loadFile(own.config);
        agentLog.info("config loaded", { file: own.config, services: config.services.length });
        return config;
      } catch (err) {
        const msg = err instanceof ConfigError || err instanceof Deno.errors.NotFound
          ? "config rejected, keeping the last good one"
          : "config load failed";
        agentLog.error(msg, { file: own.config, err });
        return null;
      }
    };
    let current = await loadConfig();
    const first = current;
    for (const svc of first?.services ?? []) {
      for (const fe of svc.frontends) {
        await cp.waitFrontend(fe.address, { timeoutMs: 10_000 });
      }
    }
    // Set once flow sync runs: flows of backends a reload removed are purged everywhere, so
    // their clients get a clean new choice while every other flow keeps its backend.
    let purge: ((prev: FileConfig, next: FileConfig) => Promise<unknown>) | null = null;
    // Set once flow sync runs: follows the LB IPs of each loaded config (its frontends).
    let follow: ((config: FileConfig) => Promise<void>) | null = null;
    // One reload at a time: a slow one (restoring a new LB IP's flows) must not interleave with
    // the next tick's.
    let reloading = false;
    const poll = setInterval(async () => {
      if (reloading) return;
      reloading = true;
      try {
        const m = await mtimeOf(own.config);
        if (m === seen) return;
        seen = m;
        const next = await loadConfig();
        if (next === null) return;
        const prev = current;
        current = next;
        await follow?.(next).catch((err) => agentLog.warn("cannot follow LB IPs", { err }));
        if (prev && purge) {
          await purge(prev, next).catch((err) => agentLog.warn("flow purge failed", { err }));
        }
      } finally {
        reloading = false;
      }
    }, own.configPollMs);
    cleanup.push(() => clearInterval(poll));

    // 3. Flow sync.
    let flows: FlowSyncAgent | null = null;
    if (own.flowSync) {
      const store = connectRedisStore(a.redis);
      cleanup.push(() => store.close());
      const agent = flows = new FlowSyncAgent(new BpfFlowTable(dp.maps.flows), store, {
        node: a.nodeName,
        vips: [],
        ...(a.idleTimeoutMs !== undefined ? { idleTimeoutMs: a.idleTimeoutMs } : {}),
        ...(a.sweepIntervalMs !== undefined ? { sweepIntervalMs: a.sweepIntervalMs } : {}),
        ...(a.queueCapacity !== undefined ? { queueCapacity: a.queueCapacity } : {}),
      });
      const sub = dp.subscribe((ev) => agent.learn(fromDatapathEvent(ev)));
      purge = (prev, next) => purgeRemovedBackends(prev, next, { store, node: a.nodeName });
      follow = (config) => agent.setVips(followedVips(config, a.vips));
      // The first config's LB IPs: recorded now, restored by start() before ready.
      await agent.setVips(followedVips(current, a.vips));
      cleanup.push(async () => {
        await agent.stop();
        await sub.close();
      });
      agentLog.info("restoring flows", { redis: redact(a.redis.url), vips: agent.vips });
      await agent.start({ signal: stop.signal });
    } else {
      agentLog.info("flow sync disabled: Maglev only", { vips: a.vips });
    }

    // Attach last: the maps are programmed and flows restored before the first packet.
    if (a.attach) dp.attach(a.attach.ifname, a.attach.netns ? { netns: a.attach.netns } : {});

    let ready = true;
    if (a.listen) {
      const server = Deno.serve({ ...a.listen, onListen: () => {} }, (req) => {
        const path = new URL(req.url).pathname;
        if (path === "/metrics") {
          return new Response(registry.expose(), { headers: { "content-type": CONTENT_TYPE } });
        }
        if (path === "/readyz") {
          const ok = ready && (flows?.ready ?? true);
          return new Response(ok ? "ready\n" : "not ready\n", { status: ok ? 200 : 503 });
        }
        if (path === "/healthz") return new Response("ok\n");
        return new Response("not found\n", { status: 404 });
      });
      cleanup.push(() => server.shutdown());
    }
    agentLog.info("ready", {
      vips: flows?.vips ?? a.vips,
      flow_sync: own.flowSync,
      attached: a.attach?.ifname ?? null,
      policy_ok: swap.ok,
    });
    await new Promise<void>((resolve) => {
      if (stop.signal.aborted) resolve();
      stop.signal.addEventListener("abort", () => resolve());
    });
    ready = false;
    agentLog.info("stopping: datapath and pinned maps stay, traffic continues");
    return 0;
  } catch (err) {
    if (stop.signal.aborted) return 0;
    agentLog.error("agent failed", { err, stack: (err as Error).stack });
    return 1;
  } finally {
    for (const s of ["SIGTERM", "SIGINT"] as const) Deno.removeSignalListener(s, onSignal);
    for (const fn of cleanup.reverse()) {
      try {
        await fn();
      } catch (err) {
        agentLog.warn("cleanup step failed", { err });
      }
    }
  }
}
