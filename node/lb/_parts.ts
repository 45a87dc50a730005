/**
 * The parts of `main.ts agent` (node/lb/main.ts runs them in order; each registers its stop hook
 * with the run's {@link Lifecycle}, which stops them last first): the control plane with its
 * policy, the LB model (a services file or the model in Redis), flow sync, the config watch.
 * What they share — ready or not, the loaded model, the flow agent, the node's role — is one
 * {@link AgentRun}.
 *
 * @module
 */

import { MaglevMirror } from "./_maglev_mirror.ts";
import { createControlPlane } from "./control_plane.ts";
import { exportControlPlaneMetrics } from "./metrics.ts";
import { ConfigError, type FileConfig, FileSource } from "./sources/file_source.ts";
import { RedisModelSource } from "./sources/redis_source.ts";
import { connectModelStore } from "../../controller/model/mod.ts";
import { PolicyHost, TsMaglevBuilder, WasmMaglevBuilder } from "../../policy-as/host/mod.ts";
import { followActivePolicy } from "../../policy-as/host/active_file.ts";
import { policySwapper } from "./policy_swap.ts";
import { agentReporter } from "./reports.ts";
import { LbNodeRole } from "./_node_role.ts";
import type { NodeDatapath } from "./_datapath.ts";
import type { AgentArgs } from "./args.ts";
import { FlowSyncAgent } from "./flows/sync_agent.ts";
import { followedVips } from "./flows/config_vips.ts";
import { announcedLbIps, LbModelBgp } from "../bgp/lb_announcer.ts";
import { backendsLeaving } from "./flows/frontends.ts";
import { purgeRemovedBackends } from "./flows/purge.ts";
import { connectRedisStore } from "./flows/redis_store.ts";
import type { Logger } from "../../lib/log.ts";
import type { Lifecycle } from "../../lib/lifecycle.ts";
import { exportNodeInfo, registry } from "../../lib/metrics.ts";
import { watchConfigFile } from "./_config_watch.ts";

const RELEASE_WASM = new URL("../../policy-as/build/release.wasm", import.meta.url);

/** With `--model redis`: longest wait for the model before serving from the pinned maps. */
export const MODEL_WAIT_MS = 10_000;

/** Longest wait, after a reload, for the maps to carry it before flows are purged. */
const APPLY_WAIT_MS = 5_000;

/** What the agent's parts share while it runs. */
export class AgentRun {
  /** Set once XDP is attached, cleared at stop. */
  ready = false;
  /** The flow agent (flow sync on). */
  flows: FlowSyncAgent | null = null;
  /** `--model redis`: the model's lbNodeSelector and encap port. */
  role: LbNodeRole | null = null;
  /** The LB model loaded now (the services file's or the model's). */
  current: FileConfig | null = null;
  /** Set by flow sync: follows each new model (LB IPs, trusted flows, purges). */
  onReload: ((prev: FileConfig | null, next: FileConfig) => Promise<void>) | null = null;

  constructor(
    readonly a: AgentArgs,
    readonly log: Logger,
    readonly life: Lifecycle,
    /** Aborted on SIGTERM/SIGINT (or the caller's signal). */
    readonly signal: AbortSignal,
  ) {}

  /** Not ready while flows are restored, or while the lbNodeSelector leaves this node out. */
  readonly isReady = (): boolean =>
    this.ready && (this.flows?.ready ?? true) && (this.role?.serving ?? true);

  /** The LB IPs announced (both families): the model's while ready, none otherwise. */
  readonly announced = (): string[] =>
    this.isReady() ? announcedLbIps(this.current, this.a.vips) : [];

  /** bird's directory: `--bgp-dir`, else /run/holdfast/bird-NODE. */
  get bgpDir(): string {
    return this.a.bgpDir ?? `/run/holdfast/bird-${this.a.nodeName}`;
  }
}

/** The control plane over the datapath's maps, Maglev from the WASM policy. */
export async function startControlPlane(run: AgentRun, dp: NodeDatapath) {
  const { a, log, life } = run;
  const policy = await PolicyHost.create();
  const swap = await policy.swap(await Deno.readFile(a.policy ?? RELEASE_WASM));
  if (!swap.ok) {
    log.warn("policy module rejected, using the TypeScript Maglev", { reason: swap });
  }
  // --flow-sharing exceptions: the flow agent asks what the tables pick, and exchanges the
  // flows a table change moves before the datapath gets the new table (_maglev_mirror.ts).
  const mirror = a.flowSync && a.flowSharing === "exceptions"
    ? new MaglevMirror(dp.lbMaps, { seed: a.configure?.seed ?? 0, logger: log })
    : null;
  const cp = await createControlPlane(mirror ?? dp.lbMaps, {
    // While no module serves (the one given at start was rejected), the fallback builds.
    maglev: new WasmMaglevBuilder(policy, { fallback: new TsMaglevBuilder() }),
    ...(a.maglevSize ? { maglevSize: a.maglevSize } : {}),
    logger: log,
    fullReconcileIntervalMs: a.fullReconcileIntervalMs,
  });
  exportControlPlaneMetrics(cp, registry);
  // New policy modules (the model's, the followed file's): validated, swapped, tables rebuilt.
  const reporter = agentReporter(a, log, { push: (stop) => life.onStop("reporter", stop) });
  const swapPolicy = policySwapper(policy, cp, log, reporter);
  if (a.policyFollow) {
    const following = new AbortController();
    life.onStop("policy-follow", () => following.abort());
    await followActivePolicy(policy, a.policyFollow, {
      signal: following.signal,
      swap: swapPolicy,
    });
  }
  return { policy, swap, cp, reporter, swapPolicy, mirror };
}

type ControlPlane = Awaited<ReturnType<typeof startControlPlane>>;

async function mtimeOf(path: string): Promise<number> {
  try {
    return (await Deno.stat(path)).mtime?.getTime() ?? 0;
  } catch {
    return -1;
  }
}

/**
 * The LB model: the services file, or the model the controller publishes in Redis (with the
 * node's role and the model's BGP section). Loaded, and its frontends programmed, on return.
 */
export async function startModel(
  run: AgentRun,
  dp: NodeDatapath,
  { cp, swapPolicy }: ControlPlane,
) {
  const { a, log, life } = run;
  const config = a.config ?? "";
  const file = a.model === undefined ? new FileSource(cp.writer) : null;
  const modelStore = a.model === "redis"
    ? connectModelStore({ ...a.redis, logComponent: "model-store" })
    : null;
  if (modelStore) {
    const { nodeName, encapPortFlag } = a;
    const at = { encapPort: dp.encapPort, configureEncap: dp.configureEncap };
    run.role = new LbNodeRole({ nodeName, encapPortFlag, ...at, logger: log });
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
    const now = new Set(run.announced());
    for (const ip of now) everServed.add(ip);
    for (const ip of everServed) lbIps.set({ address: ip }, now.has(ip) ? 1 : 0);
  });
  // The model's BGP section (spec.bgp): bird once ready, unless --bgp-config (it wins).
  const modelBgp = modelStore
    ? new LbModelBgp({
      nodeName: a.nodeName,
      routerId: a.configure?.srcAddr,
      fileWins: a.bgpConfig !== undefined,
      wanted: run.announced,
      dir: run.bgpDir,
      log,
    })
    : null;
  const model = modelStore
    ? new RedisModelSource(cp.writer, modelStore, {
      nodeName: a.nodeName,
      onSettings: (settings, serving) => {
        run.role?.apply(settings, serving);
        modelBgp?.set(settings.bgp);
      },
      onApplied: async (prev, next) => {
        run.current = next;
        await run.onReload?.(prev, next);
      },
      onPolicy: async (p) => void await swapPolicy(p.wasm, `model:${p.sha256.slice(0, 16)}`),
    })
    : null;
  cp.start();
  life.onStop("control-plane", () => cp.stop());
  const loadConfig = async () => {
    if (file === null) return null;
    try {
      const config = await file.loadFile(a.config!);
      log.info("config loaded", { file: a.config, services: config.services.length });
      return config;
    } catch (err) {
      const msg = err instanceof ConfigError || err instanceof Deno.errors.NotFound
        ? "config rejected, keeping the last good one"
        : "config load failed";
      log.error(msg, { file: a.config, err });
      return null;
    }
  };
  const source = {
    file,
    model,
    modelBgp,
    loadConfig,
    config,
    seen: file ? await mtimeOf(config) : 0,
  };
  if (model) {
    model.start();
    life.onStop("model", async () => {
      await model.stop();
      await modelStore!.close();
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const got = await Promise.race([
      model.ready().then(() => true),
      new Promise<false>((r) => timer = setTimeout(() => r(false), MODEL_WAIT_MS)),
    ]);
    clearTimeout(timer);
    if (!got) log.warn("no model yet: serving from the pinned maps", { waitedMs: MODEL_WAIT_MS });
    run.current = model.view;
  } else {
    run.current = await loadConfig();
  }
  // A node the lbNodeSelector leaves out loaded no frontends: none to wait for.
  for (const svc of model?.serving === false ? [] : run.current?.services ?? []) {
    for (const fe of svc.frontends) await cp.waitFrontend(fe.address, { timeoutMs: 10_000 });
  }
  return source;
}

type ModelSource = Awaited<ReturnType<typeof startModel>>;

/**
 * Flow sync: new flows to Redis, peers' flows into the flow map (only those whose backend serves
 * their frontend in the loaded model: the trust boundary), every stored flow restored before
 * this returns. Sets `run.onReload`: follows each model's LB IPs, and purges the flows of
 * backends a reload removed so their clients get a clean new choice.
 */
export async function startFlowSync(
  run: AgentRun,
  dp: NodeDatapath,
  { cp, mirror }: ControlPlane,
) {
  const { a, log, life } = run;
  const store = connectRedisStore(a.redis);
  life.onStop("flow-store", () => store.close());
  const agent = run.flows = new FlowSyncAgent(dp.flows, store, {
    node: a.nodeName,
    vips: [],
    services: run.current,
    ...(a.idleTimeoutMs !== undefined ? { idleTimeoutMs: a.idleTimeoutMs } : {}),
    ...(a.sweepIntervalMs !== undefined ? { sweepIntervalMs: a.sweepIntervalMs } : {}),
    ...(a.queueCapacity !== undefined ? { queueCapacity: a.queueCapacity } : {}),
    ...(mirror ? { sharing: "exceptions" as const, picker: mirror } : {}),
  });
  if (mirror) mirror.beforeTableChange = (changes) => agent.tableChanging(changes);
  // Events are taken from the start and queue in the agent until it is ready.
  const unsubscribe = dp.subscribe((ev) => agent.learn(ev));
  life.onStop("flow-sync", async () => {
    await agent.stop();
    await unsubscribe();
  });
  run.onReload = async (prev, next) => {
    // A reload that removes a backend purges once the maps carry it (the datapath picks it
    // no more), so a packet between the purge and the Maglev update cannot learn it again.
    // Reloads that only add do not wait.
    const removes = prev !== null && backendsLeaving(prev, next).size > 0;
    if (removes && !await cp.reconciler.waitIdleWithin(APPLY_WAIT_MS)) {
      log.warn("maps not in step with the reload yet; purging anyway", {
        waitedMs: APPLY_WAIT_MS,
      });
    }
    agent.setServices(next);
    await agent.setVips(followedVips(next, a.vips))
      .catch((err) => log.warn("cannot follow LB IPs", { err }));
    if (prev) {
      await purgeRemovedBackends(prev, next, { store, node: a.nodeName })
        .catch((err) => log.warn("flow purge failed", { err }));
    }
  };
  // The first config's LB IPs: recorded now, restored by start() before ready.
  await agent.setVips(followedVips(run.current, a.vips));
  log.info("restoring flows", { vips: agent.vips });
  await agent.start({ signal: run.signal });
}

/**
 * Reloads on file events (a slow safety poll besides), one at a time: a slow one (restoring a
 * new LB IP's flows) must not interleave with the next. No file (a model from Redis): none.
 */
export function watchServicesFile(run: AgentRun, source: ModelSource): void {
  if (source.file === null) return;
  const check = async () => {
    const m = await mtimeOf(source.config);
    if (m === source.seen) return;
    source.seen = m;
    const next = await source.loadConfig();
    if (next === null) return;
    const prev = run.current;
    run.current = next;
    await run.onReload?.(prev, next);
  };
  run.life.onStop(
    "config-watch",
    watchConfigFile(source.config, check, { pollMs: run.a.configPollMs, log: run.log }),
  );
}
