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
 *    (`node/lb/policy_swap.ts`). The model's settings apply too: its encap port (unless `--encap-port`)
 *    and its lbNodeSelector — a node left out withdraws its frontends and is not ready
 *    (`node/lb/_node_role.ts`). Its BGP section (spec.bgp) runs bird once ready, as
 *    `--bgp-config` does (which wins over it): announce while ready, withdraw first on stop.
 * 3. Flow sync (unless `--no-flow-sync`): new-flow events from the ring buffer go to Redis;
 *    peers' flows are installed into the flow map — only those whose backend serves their
 *    frontend in the loaded config; every stored flow is restored before ready.
 *    The LB IPs followed are the config's (or the model's) frontend addresses (plus any `--vip`),
 *    updated after every successful reload or applied model change (`FlowSyncAgent.setVips`: an
 *    added one is restored and followed).
 * Health (unless `--health off`): backends of services with a `healthCheck` are probed from here,
 *    judged by the policy's `health_step`; a quarantine drops them from the tables (`node/lb/health/`).
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
import { startAgentHealth } from "./health/agent_health.ts";
import { AGENT_COMMAND, readAgentArgs } from "./args.ts";
import { readCommandLine } from "../../lib/args.ts";
import { LbAnnouncer } from "../bgp/lb_announcer.ts";
import { redact } from "./flows/redis_store.ts";
import { log, setLogLevel } from "../../lib/log.ts";
import { Lifecycle } from "../../lib/lifecycle.ts";
import { serveOps } from "../../lib/ops_http.ts";
import { openDatapath } from "./_datapath.ts";
import {
  AgentRun,
  startControlPlane,
  startFlowSync,
  startModel,
  watchServicesFile,
} from "./_parts.ts";

export { MODEL_WAIT_MS } from "./_parts.ts";

/**
 * Runs the agent until SIGTERM/SIGINT or `options.signal`. Exit codes: 0 clean stop, 1 cannot
 * start, 2 bad arguments. Its parts start in order and stop in reverse (lib/lifecycle.ts).
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

  const life = new Lifecycle(agentLog);
  const run = new AgentRun(a, agentLog, life, stop.signal);
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
    if (a.listen) {
      const server = serveOps(a.listen, run.isReady, { logger: agentLog });
      life.onStop("ops", () => server.shutdown());
    }
    // 1. Datapath.
    const dp = await life.start("datapath", async () => {
      const dp = await openDatapath(a);
      return { value: dp, stop: () => dp.close() };
    });
    // 2. Control plane over the maps, Maglev from the WASM policy; the LB model.
    const cp = await startControlPlane(run, dp);
    const source = await startModel(run, dp, cp);
    // 3. Flow sync.
    if (a.flowSync) await startFlowSync(run, dp, cp);
    else agentLog.info("flow sync disabled: Maglev only", { vips: a.vips });
    // Health probes of the services with a healthCheck: verdicts through the Writer (node/lb/health/).
    if (a.health) {
      const { policy, reporter } = cp;
      const parts = { cp: cp.cp, policy, flows: dp.flows, config: () => run.current, reporter };
      life.onStop("health", startAgentHealth(a, { ...parts, logger: agentLog }));
    }
    watchServicesFile(run, source);

    // 4. Attach last: the maps are programmed and flows restored before the first packet.
    dp.attach();
    run.ready = true;
    agentLog.info("ready", {
      vips: run.flows?.vips ?? a.vips,
      datapath: dp.kind,
      flow_sync: a.flowSync,
      attached: dp.attachTo,
      src_addr6: dp.srcAddr6 ?? null,
      policy_ok: cp.swap.ok,
      policy: cp.policy.ready ? cp.policy.current.digest : null,
    });
    if (a.bgpConfig) {
      // Announced only while ready; on stop this part stops first: withdraw, wait, stop bird.
      const bgp = await LbAnnouncer.start(a.bgpConfig, run.announced, {
        dir: run.bgpDir,
        log: agentLog,
      });
      life.onStop("bgp", () => bgp.withdrawAndStop());
    }
    const { modelBgp } = source;
    if (modelBgp) {
      modelBgp.arm(); // as with --bgp-config: announced while ready, withdrawn first on stop
      life.onStop("model-bgp", () => modelBgp.stop());
    }
    await new Promise<void>((resolve) => {
      if (stop.signal.aborted) resolve();
      stop.signal.addEventListener("abort", () => resolve());
    });
    run.ready = false;
    agentLog.info("stopping: datapath and pinned maps stay, traffic continues");
    return 0;
  } catch (err) {
    if (stop.signal.aborted) return 0;
    agentLog.error("agent failed", { err, stack: (err as Error).stack });
    return 1;
  } finally {
    for (const s of ["SIGTERM", "SIGINT"] as const) Deno.removeSignalListener(s, onSignal);
    options.signal?.removeEventListener("abort", onSignal);
    await life.stop();
  }
}
