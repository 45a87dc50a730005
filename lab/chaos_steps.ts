/**
 * The disturbances of the chaos scenarios, each followed by checks that it really happened: a
 * chaos step that silently did nothing would otherwise pass as "every connection survived".
 *
 * The evidence comes from where an operator would look: the router's route (next hops), the
 * agents' processes, logs, `/metrics` and pinned maps, the services file, Redis's `INFO`.
 *
 * @module
 */
import { processAlive } from "./command.ts";
import { installAtomically } from "../policy-as/host/cli.ts";
import { moduleDigest } from "../policy-as/host/policy_module.ts";
import { backendAddress, backendAddress6, type Cluster, lbAddress, lbAddress6 } from "./cluster.ts";
import {
  backendsOf,
  configuredBackends,
  forwardedBy,
  maglevBackendsOf,
  routeVias,
} from "./cluster_probe.ts";
import { checkFailoverWritten } from "./_chaos_shard.ts";

/** One piece of evidence that a disturbance happened as described. */
export interface Check {
  /** What should be true, e.g. `lb1 withdrawn from the router's route`. */
  readonly what: string;
  /** Whether it was seen. */
  readonly ok: boolean;
  /** What was seen. */
  readonly seen: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Disturbs a virtual cluster and records, for each step, whether it happened. */
export class Disturbances {
  /** Checks recorded so far, in order; complete after {@linkcode settle}. */
  readonly checks: Check[] = [];
  readonly #later: Array<() => void | Promise<void>> = [];
  readonly #killedPids = new Map<number, number>();

  readonly #ipv6Shared: boolean;

  /**
   * Disturbs `cluster`. `ipv6Shared`: IPv6 flows are shared too, so a joining or restarted agent
   * must restore those of the IPv6 LB IP as well.
   */
  constructor(readonly cluster: Cluster, options: { ipv6Shared?: boolean } = {}) {
    this.#ipv6Shared = options.ipv6Shared ?? false;
  }

  /** LB node i dies: link down, agent killed; checks the routes (both families) and the process. */
  async killLbNode(i: number): Promise<void> {
    const pid = this.#agentPid(i);
    await this.cluster.killLbNode(i);
    await this.#checkRoutes(i, false);
    await this.#checkDead(i, pid);
  }

  /** Whether LB node i is (`wanted`) in the router's route to each LB IP. */
  async #checkRoutes(i: number, wanted: boolean): Promise<void> {
    const families = this.cluster.vip6 === null ? [4] as const : [4, 6] as const;
    for (const family of families) {
      const vias = await routeVias(this.cluster, family);
      const address = family === 6 ? lbAddress6(i) : lbAddress(i);
      const route = family === 6 ? "IPv6 route" : "route";
      this.#check(
        wanted ? `lb${i} in the router's ${route}` : `lb${i} withdrawn from the router's ${route}`,
        vias.includes(address) === wanted,
        `next hops ${JSON.stringify(vias)}`,
      );
    }
  }

  /**
   * LB node i joins (or returns): checks that the router sends to it, that with flow sharing its
   * agent restored stored flows before reporting ready, and (at {@linkcode settle}) that its
   * datapath forwarded packets afterwards.
   */
  async addLbNode(i: number): Promise<void> {
    const returning = this.cluster.lbNodes.has(i);
    const oldPid = this.#killedPids.get(i);
    // Counted before it joins: by the time addLbNode returns (both routes in) the traffic may be
    // over, and what it forwarded while joining is what this checks.
    const before = returning ? forwardedBy(this.cluster, i) : 0;
    await this.cluster.addLbNode(i);
    await this.#checkRoutes(i, true);
    if (returning) this.#checkNewProcess(i, oldPid);
    this.#checkRestoredBeforeReady(i);
    this.#later.push(() => {
      const after = forwardedBy(this.cluster, i);
      this.#check(
        `lb${i} forwards packets after joining`,
        after > before,
        `${before} → ${after} packets`,
      );
    });
  }

  /**
   * Backend j joins the service: checks the services file (both families) and every live agent's
   * backend map.
   */
  async addBackend(j: number): Promise<void> {
    await this.cluster.addBackend(j);
    const address = backendAddress(j);
    const configured = await configuredBackends(this.cluster);
    const addresses = [address, ...(this.cluster.vip6 === null ? [] : [backendAddress6(j)])];
    this.#check(
      `be${j} in the services file`,
      addresses.every((a) => configured.includes(a)),
      JSON.stringify(configured),
    );
    for (const [i, node] of this.cluster.lbNodes) {
      if (!node.agent) continue;
      let mapped: string[] = [];
      for (let k = 0; k < 50; k++) { // the agents poll the file: bounded wait, 5 s
        mapped = backendsOf(this.cluster, i);
        if (mapped.includes(address)) break;
        await sleep(100);
      }
      this.#check(
        `be${j} in lb${i}'s backend map`,
        mapped.includes(address),
        JSON.stringify(mapped),
      );
    }
  }

  /**
   * Backend j's server dies (SIGKILL; it stays in the services file): the agents' health probes
   * fail. Needs a cluster with a `healthCheck`. Checks (bounded by `timeoutMs`) that it left
   * every live LB node's Maglev tables (both families) and that every agent logged it unhealthy.
   */
  async killBackend(j: number, timeoutMs = 30_000): Promise<void> {
    const server = this.cluster.backends.get(j);
    if (!server) throw new Error(`No backend ${j}`);
    const gone = [backendAddress(j), ...(this.cluster.vip6 === null ? [] : [backendAddress6(j)])];
    const live = [...this.cluster.lbNodes].filter(([, n]) => n.agent);
    const from = live.map(([, n]) => n.agent!.lineCount);
    await server.stop("SIGKILL");
    const deadline = Date.now() + timeoutMs;
    for (const [i] of live) {
      let mapped: string[] = [];
      for (let k = 0; k < 1_000; k++) { // bounded: count and time
        mapped = maglevBackendsOf(this.cluster, i);
        if (!gone.some((a) => mapped.includes(a)) || Date.now() > deadline) break;
        await sleep(50);
      }
      this.#check(
        `be${j} out of lb${i}'s Maglev tables`,
        !gone.some((a) => mapped.includes(a)),
        JSON.stringify(mapped),
      );
    }
    const unhealthy = `backend ${backendAddress(j)}:`;
    const logged = await Promise.all(
      live.map(([, n], k) =>
        n.agent!.waitForLine((l) => l.includes(unhealthy) && l.includes(" unhealthy: "), {
          fromLine: from[k],
          timeoutMs: Math.max(1_000, deadline - Date.now()),
        }).then(() => true, () => false)
      ),
    );
    this.#check(
      `every live LB node's health probes found be${j} unhealthy`,
      live.length > 0 && logged.every(Boolean),
      `${logged.filter(Boolean).length} of ${live.length} agents logged it`,
    );
  }

  /** The agent of LB node i is killed (the datapath stays); checks the process is gone. */
  async killAgent(i: number): Promise<void> {
    const pid = this.#agentPid(i);
    await this.cluster.killAgent(i);
    await this.#checkDead(i, pid);
  }

  /** The agent of LB node i starts again; checks it is a new process that restored its flows. */
  async startAgent(i: number): Promise<void> {
    await this.cluster.startAgent(i);
    this.#checkNewProcess(i, this.#killedPids.get(i));
    this.#checkRestoredBeforeReady(i);
  }

  /**
   * Redis is killed and started again: checks it is a new process that loaded no key, that it
   * held flows before (with flow sharing), and (at {@linkcode settle}) that every live agent
   * noticed the empty store.
   */
  async restartRedis(): Promise<void> {
    const redis = this.cluster.redis;
    const runIdBefore = info(await redis.cli("info", "server"), "run_id");
    const keysBefore = Number((await redis.cli("dbsize")).trim());
    if (this.cluster.flowSync) {
      this.#check("Redis held flows before the restart", keysBefore > 0, `${keysBefore} keys`);
    }
    // Line counts before the restart: an agent may notice it before restart() returns.
    const from = new Map([...this.cluster.lbNodes].map(([i, n]) => [i, n.agent?.lineCount ?? 0]));
    await redis.restart();
    const runIdAfter = info(await redis.cli("info", "server"), "run_id");
    const loaded = info(await redis.cli("info", "persistence"), "rdb_last_load_keys_loaded");
    this.#check(
      "Redis restarted as a new process",
      runIdAfter !== "" && runIdAfter !== runIdBefore,
      `run_id ${runIdBefore} → ${runIdAfter}`,
    );
    this.#check("Redis restarted empty", loaded === "0", `keys loaded at start: ${loaded}`);
    if (!this.cluster.flowSync) return;
    this.#later.push(async () => {
      for (const [i, node] of this.cluster.lbNodes) {
        if (!node.agent || !from.has(i)) continue;
        const noticed = await node.agent.waitForLine(
          (l) => l.includes('"msg":"flow store restarted empty'),
          { fromLine: from.get(i), timeoutMs: 3_000 },
        ).then(() => true, () => false);
        // Not noticed: what the agent said about its store since the restart, for whoever looks.
        const since = node.agent.lineCount - from.get(i)!;
        const said = node.agent.lines.slice(Math.max(0, node.agent.lines.length - since))
          .map((l) => /"msg":"([^"]*)"/.exec(l)?.[1] ?? "")
          .filter((m) => /store|recover|restor/.test(m)).slice(0, 8);
        this.#check(
          `lb${i}'s agent noticed the empty store`,
          noticed,
          noticed ? "logged" : `no log; its store lines since: ${JSON.stringify(said)}`,
        );
      }
    });
  }

  /**
   * The Redis Cluster master holding the IPv4 LB IP's first flow bucket is SIGKILLed: checks
   * that its process died and that its replica took the slots over, and (at
   * {@linkcode settle}) that live agents noticed the failover, came back in sync, counted the
   * flows they wrote back, and that every flow they learned is in the store (lab/_chaos_shard.ts).
   */
  async killFlowMaster(): Promise<void> {
    const { store, vip } = this.cluster;
    const rc = store.cluster;
    if (!rc) throw new Error("killFlowMaster needs a cluster with redisCluster");
    const victim = await store.masterOf(vip);
    const pid = victim.pid;
    const from = new Map([...this.cluster.lbNodes].map(([i, n]) => [i, n.agent?.lineCount ?? 0]));
    await victim.stop("SIGKILL");
    const alive = pid !== null && await processAlive(pid);
    this.#check(
      `the master of ${store.flowsKey(vip)} (port ${victim.port}) killed`,
      pid !== null && !alive,
      `pid ${pid}`,
    );
    let promoted = "";
    try {
      await rc.waitHealthy();
      promoted = String((await store.masterOf(vip)).port);
    } catch (err) {
      promoted = (err as Error).message;
    }
    this.#check(
      `a replica took ${store.flowsKey(vip)} over from port ${victim.port}`,
      /^\d+$/.test(promoted) && promoted !== String(victim.port),
      `master now ${promoted}`,
    );
    this.#later.push(async () => {
      for (const c of await checkFailoverWritten(this.cluster, from)) {
        this.#check(c.what, c.ok, c.seen);
      }
    });
  }

  /** Runs the checks that need time to pass (call once the traffic is over). */
  async settle(): Promise<void> {
    for (const check of this.#later.splice(0)) await check();
  }

  /**
   * Installs the policy module at `module` where every agent follows its policy (`active`, as
   * `main.ts policy swap` would after validating it) and checks that each running agent logged
   * the swap to that module's digest.
   */
  async swapPolicy(active: string, module: URL | string): Promise<void> {
    const bytes = await Deno.readFile(module);
    const digest = await moduleDigest(bytes);
    const agents = [...this.cluster.lbNodes.values()].flatMap((n) => n.agent ? [n.agent] : []);
    const since = agents.map((a) => a.lineCount);
    await installAtomically(active, bytes);
    const swapped = await Promise.all(agents.map((a, k) =>
      a.waitForLine((l) => {
        if (!l.includes('"policy module swapped"')) return false;
        const d = String(JSON.parse(l).digest ?? "");
        return d.length > 0 && digest.startsWith(d);
      }, { fromLine: since[k], timeoutMs: 20_000 }).then(() => true, () => false)
    ));
    this.#check(
      `every LB node swapped to policy module ${digest.slice(0, 16)}`,
      agents.length > 0 && swapped.every(Boolean),
      `${swapped.filter(Boolean).length} of ${agents.length} agents logged the swap`,
    );
  }

  #check(what: string, ok: boolean, seen: string): void {
    this.checks.push({ what, ok, seen });
  }

  #agentPid(i: number): number | undefined {
    return this.cluster.lbNodes.get(i)?.agent?.pid;
  }

  async #checkDead(i: number, pid: number | undefined): Promise<void> {
    const alive = pid !== undefined && await processAlive(pid);
    this.#check(`lb${i}'s agent process killed`, pid !== undefined && !alive, `pid ${pid}`);
    if (pid !== undefined) this.#killedPids.set(i, pid);
  }

  #checkNewProcess(i: number, oldPid: number | undefined): void {
    const pid = this.#agentPid(i);
    this.#check(
      `lb${i}'s agent is a new process`,
      pid !== undefined && oldPid !== undefined && pid !== oldPid,
      `pid ${oldPid} → ${pid}`,
    );
  }

  /**
   * With flow sharing, the agent's log has "flows restored" for the VIP (and the IPv6 one when
   * IPv6 flows are shared) before "ready".
   */
  #checkRestoredBeforeReady(i: number): void {
    if (!this.cluster.flowSync) return;
    const lines = this.cluster.lbNodes.get(i)?.agent?.lines ?? [];
    const ready = lines.findIndex((l) => l.includes('"msg":"ready"'));
    const vips = [this.cluster.vip, ...(this.#ipv6Shared ? [this.cluster.vip6!] : [])];
    for (const vip of vips) {
      const restored = lines.slice(0, Math.max(ready, 0)).find((l) =>
        l.includes('"msg":"flows restored"') && l.includes(`"vip":"${vip}"`)
      );
      const stored = restored ? Number(JSON.parse(restored).stored) : 0;
      this.#check(
        `lb${i}'s agent restored stored flows of ${vip} before ready`,
        ready >= 0 && stored > 0,
        restored ?? `no "flows restored" line before ready (ready at line ${ready})`,
      );
    }
  }
}

/** One field of `redis-cli info` output (`name:value` lines). */
function info(text: string, name: string): string {
  const line = text.split("\n").find((l) => l.startsWith(`${name}:`));
  return line?.slice(name.length + 1).trim() ?? "";
}
