/**
 * `main.ts agent`: everything one LB node runs, in one process.
 *
 * ```
 * main.ts agent --node-name lb1 --attach eth0 --src-addr 10.2.1.2 --pin-dir /sys/fs/bpf/holdfast
 *               --config services.yaml --redis redis://10.9.0.2:6379 [--vip 10.0.100.1]
 *               [--no-flow-sync] [--datapath bpf|memory] … (`main.ts agent --help`)
 * ```
 *
 * 1. Datapath: loads the XDP load balancer reusing the maps pinned in `--pin-dir` (a restart
 *    loses no flow and renumbers nothing; a map whose layout changed is migrated, finished after
 *    the attach: `bpf/_pin_migrate.ts`) and writes the node settings. `--datapath memory`
 *    uses in-memory maps instead, to run everything else without root.
 * 2. Control plane: tables + Writer + the BPF-maps reconciler over those maps, fed by the file
 *    source following `--config` (re-read when it changes; a bad file is logged and the last good
 *    one keeps serving), or with `--model redis` by the model the controller publishes in Redis
 *    (`RedisModelSource`: until its first snapshot nothing is pruned, and the agent gets ready
 *    after at most {@linkcode MODEL_WAIT_MS} serving from its pinned maps). Maglev tables come
 *    from the WASM policy module, with the TypeScript reference as fallback. A new module — the
 *    model's (`--model redis`) or the followed active file's (`--policy-follow PATH`) — is
 *    validated and swapped in, and every table rebuilt with it; a rejected one changes nothing
 *    (`node/policy_swap.ts`). The model's settings apply too: its encap port (unless `--encap-port`)
 *    and its lbNodeSelector — a node left out withdraws its frontends and is not ready
 *    (`node/_lb_node_role.ts`). Its BGP section (spec.bgp) runs bird once ready, as
 *    `--bgp-config` does (which wins over it): announce while ready, withdraw first on stop.
 * 3. Flow sync (unless `--no-flow-sync`): new-flow events from the ring buffer go to Redis;
 *    peers' flows are installed into the flow map — only those whose backend serves their
 *    frontend in the loaded config; every stored flow is restored before ready.
 *    The LB IPs followed are the config's (or the model's) frontend addresses (plus any `--vip`),
 *    updated after every successful reload or applied model change (`FlowSyncAgent.setVips`: an
 *    added one is restored and followed).
 * Health (unless `--health off`): backends of services with a `healthCheck` are probed from here,
 *    judged by the policy's `health_step`; a quarantine drops them from the tables (`node/health/`).
 * 4. Attach XDP to `--attach` (or the interface holding `--node-address`, found before the
 *    datapath loads), last, so the first packet finds programmed maps and flows: a program
 *    already there (the previous agent's) is replaced atomically (`XDP_FLAGS_REPLACE`).
 *
 * `GET /readyz` answers 503 until then and 200 after, together with a `{"msg":"ready"}` log
 * line, so a router never sends this node traffic it cannot place. `GET /metrics` serves
 * Prometheus text, `GET /healthz` 200 while running. SIGTERM/SIGINT (or `options.signal`) stop
 * it with exit 0; the datapath and pinned maps stay, so traffic continues.
 *
 * @module
 */
import { createControlPlane } from "../controller/control_plane.ts";
import { exportControlPlaneMetrics } from "../controller/metrics.ts";
import { ConfigError, type FileConfig, FileSource } from "../controller/sources/file_source.ts";
import { RedisModelSource } from "../controller/sources/redis_source.ts";
import { connectModelStore } from "../controller/model/mod.ts";
import { PolicyHost, TsMaglevBuilder, WasmMaglevBuilder } from "../policy-as/host/mod.ts";
import { followActivePolicy } from "../policy-as/host/active_file.ts";
import { policySwapper } from "./policy_swap.ts";
import { agentReporter } from "./reports.ts";
import { LbNodeRole } from "./_lb_node_role.ts";
import { openDatapath } from "./_node_datapath.ts";
import { MaglevMirror } from "./_maglev_mirror.ts";
import { startAgentHealth } from "./health/agent_health.ts";
import { AGENT_COMMAND, readAgentArgs } from "./agent_args.ts";
import { readCommandLine } from "../lib/args.ts";
import { FlowSyncAgent } from "./flows/agent.ts";
import { followedVips } from "./flows/config_vips.ts";
import { announcedLbIps, LbAnnouncer, LbModelBgp } from "./bgp/lb_announcer.ts";
import { backendsLeaving } from "./flows/frontends.ts";
import { purgeRemovedBackends } from "./flows/purge.ts";
import { connectRedisStore, redact } from "./flows/redis_store.ts";
import { log, setLogLevel } from "../lib/log.ts";
import { exportNodeInfo, registry } from "../lib/metrics.ts";
import { serveOps } from "../lib/ops_http.ts";
import { watchConfigFile } from "./_config_watch.ts";

const RELEASE_WASM = new URL("../policy-as/build/release.wasm", import.meta.url);

/** With `--model redis`: longest wait for the model before serving from the pinned maps. */
export const MODEL_WAIT_MS = 10_000;

/** Longest wait, after a reload, for the maps to carry it before flows are purged. */
const APPLY_WAIT_MS = 5_000;

async function mtimeOf(path: string): Promise<number> {
  try {
    return (await Deno.stat(path)).mtime?.getTime() ?? 0;
  } catch {
    return -1;
  }
}

/**
 * Runs the agent until SIGTERM/SIGINT or `options.signal`. Exit codes: 0 clean stop, 1 cannot
 * start, 2 bad arguments.
 */
export async function main(
  args: string[],
  options: { signal?: AbortSignal } = {},
): Promise<number> {
  const read = readCommandLine(
    args,
    AGENT_COMMAND,
    (line) => readAgentArgs(line, { password: Deno.env.get("HOLDFAST_REDIS_PASSWORD") }),
  );
  if ("exit" in read) return read.exit;
  const a = read.options;
  setLogLevel(a.logLevel);
  const agentLog = log.with({ component: "agent", node: a.nodeName });
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  for (const s of ["SIGTERM", "SIGINT"] as const) Deno.addSignalListener(s, onSignal);
  options.signal?.addEventListener("abort", onSignal);

  const cleanup: (() => Promise<void> | void)[] = [];
  let ready = false;
  let flows: FlowSyncAgent | null = null;
  let role: LbNodeRole | null = null; // --model redis: the model's lbNodeSelector and encap port
  try {
    agentLog.info("starting", {
      datapath: a.datapath,
      config: a.config ?? null,
      model: a.model ?? null,
      flow_sync: a.flowSync,
      flow_buckets: a.redis.buckets ?? 1,
      flow_sharing: a.flowSharing,
      redis: a.flowSync || a.model ? redact(a.redis.url) : null,
    });
    // Not ready while flows are restored, or while the lbNodeSelector leaves this node out.
    const isReady = () => ready && (flows?.ready ?? true) && (role?.serving ?? true);
    if (a.listen) {
      const server = serveOps(a.listen, isReady, { logger: agentLog });
      cleanup.push(() => server.shutdown());
    }

    // 1. Datapath.
    const dp = await openDatapath(a);
    cleanup.push(() => dp.close());

    // 2. Control plane over the maps, Maglev from the WASM policy.
    const policy = await PolicyHost.create();
    const swap = await policy.swap(await Deno.readFile(a.policy ?? RELEASE_WASM));
    if (!swap.ok) {
      agentLog.warn("policy module rejected, using the TypeScript Maglev", { reason: swap });
    }
    // --flow-sharing exceptions: the flow agent asks what the tables pick, and exchanges the
    // flows a table change moves before the datapath gets the new table (node/_maglev_mirror.ts).
    const mirror = a.flowSync && a.flowSharing === "exceptions"
      ? new MaglevMirror(dp.lbMaps, { seed: a.configure?.seed ?? 0, logger: agentLog })
      : null;
    const cp = await createControlPlane(mirror ?? dp.lbMaps, {
      // While no module serves (the one given at start was rejected), the fallback builds.
      maglev: new WasmMaglevBuilder(policy, { fallback: new TsMaglevBuilder() }),
      ...(a.maglevSize ? { maglevSize: a.maglevSize } : {}),
      logger: agentLog,
      fullReconcileIntervalMs: a.fullReconcileIntervalMs,
    });
    exportControlPlaneMetrics(cp, registry);
    // New policy modules (the model's, the followed file's): validated, swapped, tables rebuilt.
    const reporter = agentReporter(a, agentLog, cleanup); // --model redis: verdicts, rejections
    const swapPolicy = policySwapper(policy, cp, agentLog, reporter);
    if (a.policyFollow) {
      const following = new AbortController();
      cleanup.push(() => following.abort());
      await followActivePolicy(policy, a.policyFollow, {
        signal: following.signal,
        swap: swapPolicy,
      });
    }
    // The LB model: the services file, or the model the controller publishes in Redis. Flow
    // sync (3.) sets onReload to follow each new one.
    let onReload: ((prev: FileConfig | null, next: FileConfig) => Promise<void>) | null = null;
    let current: FileConfig | null = null;
    const config = a.config ?? "";
    const file = a.model === undefined ? new FileSource(cp.writer) : null;
    const modelStore = a.model === "redis"
      ? connectModelStore({ ...a.redis, logComponent: "model-store" })
      : null;
    if (modelStore) {
      const { nodeName, encapPortFlag } = a;
      const at = { encapPort: dp.encapPort, configureEncap: dp.configureEncap };
      role = new LbNodeRole({ nodeName, encapPortFlag, ...at, logger: agentLog });
    }
    // Who this is and which LB IPs it serves now (announced while BGP runs): `main.ts status`.
    exportNodeInfo("lb", a.nodeName, registry);
    const lbIps = registry.gauge(
      "holdfast_agent_lb_ip",
      "1 for each LB IP this node serves while ready (what it announces with BGP), 0 for one it served before.",
      { labelNames: ["address"] },
    );
    const everServed = new Set<string>();
    lbIps.onCollect(() => {
      const now = new Set(isReady() ? announcedLbIps(current, a.vips) : []);
      for (const ip of now) everServed.add(ip);
      for (const ip of everServed) lbIps.set({ address: ip }, now.has(ip) ? 1 : 0);
    });
    // The model's BGP section (spec.bgp): bird once ready, unless --bgp-config (it wins).
    const modelBgp = modelStore
      ? new LbModelBgp({
        nodeName: a.nodeName,
        routerId: a.configure?.srcAddr,
        fileWins: a.bgpConfig !== undefined,
        wanted: () => isReady() ? announcedLbIps(current, a.vips) : [],
        dir: a.bgpDir ?? `/run/holdfast/bird-${a.nodeName}`,
        log: agentLog,
      })
      : null;
    const model = modelStore
      ? new RedisModelSource(cp.writer, modelStore, {
        nodeName: a.nodeName,
        onSettings: (settings, serving) => {
          role?.apply(settings, serving);
          modelBgp?.set(settings.bgp);
        },
        onApplied: async (prev, next) => {
          current = next;
          await onReload?.(prev, next);
        },
        onPolicy: async (p) => void await swapPolicy(p.wasm, `model:${p.sha256.slice(0, 16)}`),
      })
      : null;
    cp.start();
    cleanup.push(() => cp.stop());
    const loadConfig = async () => {
      if (file === null) return null;
      try {
        const config = await file.loadFile(a.config!);
        agentLog.info("config loaded", { file: a.config, services: config.services.length });
        return config;
      } catch (err) {
        const msg = err instanceof ConfigError || err instanceof Deno.errors.NotFound
          ? "config rejected, keeping the last good one"
          : "config load failed";
        agentLog.error(msg, { file: a.config, err });
        return null;
      }
    };
    let seen = file ? await mtimeOf(config) : 0;
    if (model) {
      model.start();
      cleanup.push(async () => {
        await model.stop();
        await modelStore!.close();
      });
      let timer: ReturnType<typeof setTimeout> | undefined;
      const got = await Promise.race([
        model.ready().then(() => true),
        new Promise<false>((r) => timer = setTimeout(() => r(false), MODEL_WAIT_MS)),
      ]);
      clearTimeout(timer);
      if (!got) {
        agentLog.warn("no model yet: serving from the pinned maps", { waitedMs: MODEL_WAIT_MS });
      }
      current = model.view;
    } else {
      current = await loadConfig();
    }
    // A node the lbNodeSelector leaves out loaded no frontends: none to wait for.
    for (const svc of model?.serving === false ? [] : current?.services ?? []) {
      for (const fe of svc.frontends) await cp.waitFrontend(fe.address, { timeoutMs: 10_000 });
    }

    // 3. Flow sync. Set once it runs: follows each loaded config's LB IPs, and purges the flows
    // of backends a reload removed so their clients get a clean new choice.
    if (a.flowSync) {
      const store = connectRedisStore(a.redis);
      cleanup.push(() => store.close());
      // Flows from Redis are installed only if their backend serves their frontend in the
      // config the control plane was given (the trust boundary): kept current on every reload.
      const agent = flows = new FlowSyncAgent(dp.flows, store, {
        node: a.nodeName,
        vips: [],
        services: current,
        ...(a.idleTimeoutMs !== undefined ? { idleTimeoutMs: a.idleTimeoutMs } : {}),
        ...(a.sweepIntervalMs !== undefined ? { sweepIntervalMs: a.sweepIntervalMs } : {}),
        ...(a.queueCapacity !== undefined ? { queueCapacity: a.queueCapacity } : {}),
        ...(mirror ? { sharing: "exceptions" as const, picker: mirror } : {}),
      });
      if (mirror) mirror.beforeTableChange = (changes) => agent.tableChanging(changes);
      // Events are taken from the start and queue in the agent until it is ready.
      const unsubscribe = dp.subscribe((ev) => agent.learn(ev));
      cleanup.push(async () => {
        await agent.stop();
        await unsubscribe();
      });
      onReload = async (prev, next) => {
        // A reload that removes a backend purges once the maps carry it (the datapath picks it
        // no more), so a packet between the purge and the Maglev update cannot learn it again.
        // Reloads that only add do not wait.
        const removes = prev !== null && backendsLeaving(prev, next).size > 0;
        if (removes && !await cp.reconciler.waitIdleWithin(APPLY_WAIT_MS)) {
          agentLog.warn("maps not in step with the reload yet; purging anyway", {
            waitedMs: APPLY_WAIT_MS,
          });
        }
        agent.setServices(next);
        await agent.setVips(followedVips(next, a.vips))
          .catch((err) => agentLog.warn("cannot follow LB IPs", { err }));
        if (prev) {
          await purgeRemovedBackends(prev, next, { store, node: a.nodeName })
            .catch((err) => agentLog.warn("flow purge failed", { err }));
        }
      };
      // The first config's LB IPs: recorded now, restored by start() before ready.
      await agent.setVips(followedVips(current, a.vips));
      agentLog.info("restoring flows", { vips: agent.vips });
      await agent.start({ signal: stop.signal });
    } else {
      agentLog.info("flow sync disabled: Maglev only", { vips: a.vips });
    }

    // Health probes of the services with a healthCheck: verdicts through the Writer (node/health/).
    const health = { cp, policy, flows: dp.flows, config: () => current, reporter };
    if (a.health) cleanup.push(startAgentHealth(a, { ...health, logger: agentLog }));

    // Reloads on file events (a slow safety poll besides), one at a time: a slow one (restoring a
    // new LB IP's flows) must not interleave with the next. No file (a model from Redis): none.
    if (file !== null) {
      const check = async () => {
        const m = await mtimeOf(config);
        if (m === seen) return;
        seen = m;
        const next = await loadConfig();
        if (next === null) return;
        const prev = current;
        current = next;
        await onReload?.(prev, next);
      };
      cleanup.push(watchConfigFile(config, check, { pollMs: a.configPollMs, log: agentLog }));
    }

    // 4. Attach last: the maps are programmed and flows restored before the first packet.
    dp.attach();
    ready = true;
    agentLog.info("ready", {
      vips: flows?.vips ?? a.vips,
      datapath: dp.kind,
      flow_sync: a.flowSync,
      attached: dp.attachTo,
      src_addr6: dp.srcAddr6 ?? null,
      policy_ok: swap.ok,
      policy: policy.ready ? policy.current.digest : null,
    });
    if (a.bgpConfig) {
      // Announced only while ready; on stop this cleanup runs first: withdraw, wait, stop bird.
      const bgp = await LbAnnouncer.start(
        a.bgpConfig,
        () => isReady() ? announcedLbIps(current, a.vips) : [], // both families
        { dir: a.bgpDir ?? `/run/holdfast/bird-${a.nodeName}`, log: agentLog },
      );
      cleanup.push(() => bgp.withdrawAndStop());
    }
    if (modelBgp) {
      modelBgp.arm(); // as with --bgp-config: announced while ready, withdrawn first on stop
      cleanup.push(() => modelBgp.stop());
    }
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
    options.signal?.removeEventListener("abort", onSignal);
    for (const fn of cleanup.reverse()) {
      try {
        await fn();
      } catch (err) {
        agentLog.warn("cleanup step failed", { err });
      }
    }
  }
}
