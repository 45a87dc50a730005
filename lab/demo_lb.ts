/**
 * The demo's load-balancer story (`demo.ts` runs it twice: with flow sharing, then without): the
 * dual-stack virtual cluster (`cluster.ts`) with health probing on, long-lived TCP connections to
 * the IPv4 and the IPv6 LB IP exchanging data every 100 ms, and the steps — backends scale 3 → 5,
 * LB node 1 dies, LB node 4 joins, the policy module is swapped, backend 3's server dies (its
 * health probes fail, it is quarantined). Each change is checked to have happened
 * (`chaos_steps.ts`).
 *
 * The connections backend 3 held when it died end with it in every design: the story counts them
 * apart (`ended`), as the clients' `died` lines after the kill on the ports backend 3 accepted, so
 * "lost" is what the load balancer lost.
 *
 * @module
 */
import { Disturbances } from "./chaos_steps.ts";
import { BACKEND_HEALTH_PORT, Cluster } from "./cluster.ts";
import { acceptedBy, forwardedBy } from "./cluster_probe.ts";
import { clientSummary } from "./clients/summary.ts";
import type { HostProcess } from "./host_process.ts";
import type { DemoView, ModeRow } from "./demo_view.ts";
import type { ModeReport, Sample } from "./demo_report.ts";
import { AGENT_LISTEN_ARGS, type DemoDashboard } from "./demo_dashboard.ts";

/** A policy module with the same flow hash and another Maglev table fill (a valid module). */
const OTHER_FILL = new URL("../policy-as/build/fixtures/rotated_fill.wasm", import.meta.url);

/** The backend whose server dies in the health step. */
const DYING_BACKEND = 3;

/**
 * The service's health check: a probe a second, generous timeouts (a loaded machine must not
 * quarantine a live backend), quarantine after 3 failures — a dead server refuses at once, so it
 * is out within about 3 s.
 */
const HEALTH_CHECK = {
  kind: "http",
  port: BACKEND_HEALTH_PORT,
  path: "/healthz",
  intervalMs: 1_000,
  timeoutMs: 1_000,
  rise: 2,
  fall: 3,
};

/** Thrown out of a story when the person pressed Ctrl-C; disposal then cleans up. */
export class Interrupted extends Error {
  override name = "Interrupted";
}

/** What a story needs from the demo. */
export interface StoryContext {
  view: DemoView;
  rows: ModeRow[];
  connections: number;
  verbose: boolean;
  quick: boolean;
  signal: AbortSignal;
  /** Where the dashboard is served; it follows each story's cluster. */
  dashboard?: DemoDashboard;
}

/** Waits `ms`, or rejects with {@link Interrupted} as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new Interrupted("interrupted"));
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", stop);
      resolve();
    }, ms);
    function stop() {
      clearTimeout(timer);
      reject(new Interrupted("interrupted"));
    }
    signal.addEventListener("abort", stop, { once: true });
  });
}

/** `p`, or an {@link Interrupted} rejection as soon as `signal` aborts. */
export function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(new Interrupted("interrupted"));
    const stop = () => reject(new Interrupted("interrupted"));
    signal.addEventListener("abort", stop, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", stop));
  });
}

/** The newest `progress` line of a hold client, parsed. */
export function latestProgress(proc: HostProcess): Omit<Sample, "family" | "t"> | undefined {
  for (let i = proc.lines.length - 1; i >= 0; i--) {
    const line = proc.lines[i]!;
    if (!line.includes('"msg":"progress"')) continue;
    const p = JSON.parse(line);
    return {
      connections: p.connections,
      alive: p.alive,
      stalled: p.stalled,
      maxStallMs: p.max_stall_ms,
    };
  }
  return undefined;
}

/**
 * The connections of a backend that died, as its clients see them: the ports it accepted from
 * each family's client, and the deaths on those ports since it died.
 */
class EndedWithBackend {
  #ports: Array<Set<number>> = [new Set(), new Set()];
  #since = Infinity;

  /** Records backend j's peers (IPv4 ones for client 0, IPv6 for client 1) as it dies. */
  dying(cluster: Cluster, j: number): void {
    for (const peer of acceptedBy(cluster, j)) {
      const port = Number(peer.slice(peer.lastIndexOf(":") + 1));
      this.#ports[peer.startsWith("[") ? 1 : 0]!.add(port);
    }
    this.#since = Date.now();
  }

  /** How many of client k's connections ended with the backend so far. */
  count(client: HostProcess, k: number): number {
    let n = 0;
    for (const line of client.lines) {
      if (!line.includes('"msg":"died"')) continue;
      const d = JSON.parse(line) as { port: number; at: number };
      if (d.at >= this.#since && this.#ports[k]!.has(d.port)) n++;
    }
    return n;
  }
}

/** Runs the LB story with flow sharing (`flowSync`) or without; fills its row and returns it. */
export async function lbStory(flowSync: boolean, ctx: StoryContext): Promise<ModeReport> {
  const { view, signal } = ctx;
  const mode = flowSync ? "holdfast" : "maglev-only";
  const row = ctx.rows.find((r) => r.mode === mode)!;
  const report: ModeReport = {
    mode,
    samples: [],
    steps: [],
    families: [],
    checks: [],
    lbNodes: [],
  };
  let t0 = Date.now(); // from the moment the clients are connected: both modes on one time axis
  const step = async (what: string, why: string, act: () => Promise<void>) => {
    if (signal.aborted) throw new Interrupted("interrupted");
    report.steps.push({ t: Date.now() - t0, what, why });
    view.step(mode, what, why);
    await act(); // a step runs to its end (seconds): cut short, it could leave a namespace behind
  };
  view.say(`[${mode}] building the virtual cluster: router, 3 LB nodes, 3 backends, Redis`, {
    mode,
    lb_nodes: 3,
    backends: 3,
    vip: "10.0.100.1:8080",
    vip6: "[2001:db8:100::1]:8080",
  });
  const policyDir = await Deno.makeTempDir({ prefix: "holdfast-demo-policy-" });
  await using _policyDir = {
    [Symbol.asyncDispose]: () => Deno.remove(policyDir, { recursive: true }),
  };
  const activePolicy = `${policyDir}/active.wasm`;
  await using cluster = await Cluster.create({
    lbNodes: 3,
    backends: 3,
    flowSync,
    verbose: ctx.verbose,
    healthCheck: HEALTH_CHECK,
    agentArgs: ["--policy-follow", activePolicy, ...(ctx.dashboard ? AGENT_LISTEN_ARGS : [])],
  });
  if (signal.aborted) throw new Interrupted("interrupted");
  if (ctx.dashboard && !await ctx.dashboard.follow(cluster, 4)) {
    view.say(`[${mode}] the dashboard could not start for this cluster; the story goes on`);
  }
  view.say(
    `[${mode}] cluster ready: lb1, lb2, lb3 announce 10.0.100.1 and 2001:db8:100::1 over BGP; ` +
      "the router spreads connections over them (ECMP)",
    { mode, namespaces: cluster.topo.hosts.map((h) => cluster.topo.ns(h)) },
  );
  const clients = await Promise.all(
    ([4, 6] as const).map((family) =>
      cluster.startClient(ctx.connections, ctx.quick ? 14_000 : 18_000, { family, progressMs: 250 })
    ),
  );
  row.state = "running";
  t0 = Date.now();
  const ended = new EndedWithBackend();
  const forwarded: Record<string, number> = {};
  // Packets each LB node sent on to backends so far, from its pinned counters (readable after its
  // agent died); a node whose read fails keeps its last reading.
  const readLbNodes = () => {
    for (const i of cluster.lbNodes.keys()) {
      try {
        forwarded[`lb${i}`] = forwardedBy(cluster, i);
      } catch { /* gone or not started: the last reading stands */ }
    }
    report.lbNodes!.push({ t: Date.now() - t0, forwarded: { ...forwarded } });
  };
  readLbNodes();
  const sample = () => {
    const t = Date.now() - t0;
    let alive = 0, connections = 0, stalled = 0, maxStallMs = 0, gone = 0;
    for (const [k, family] of ([4, 6] as const).entries()) {
      const p = latestProgress(clients[k]!);
      if (!p) continue;
      report.samples.push({ t, family, ...p });
      alive += p.alive;
      connections += p.connections;
      stalled += p.stalled;
      maxStallMs = Math.max(maxStallMs, p.maxStallMs);
      gone += ended.count(clients[k]!, k);
    }
    Object.assign(row, { alive, connections, stalled, maxStallMs, ended: gone });
    view.rows(ctx.rows);
    readLbNodes();
  };
  const sampler = setInterval(sample, 500);
  try {
    view.say(
      `[${mode}] ${ctx.connections} IPv4 and ${ctx.connections} IPv6 connections open, each ` +
        "exchanging a message every 100 ms",
    );
    await sleep(ctx.quick ? 1_000 : 1_500, signal);
    const disturb = new Disturbances(cluster); // each step checks that it happened
    await step(
      "backends scale 3 → 5",
      "Every LB node's Maglev table changes; a stateless LB re-hashes some live flows to new " +
        "backends, which answer them with resets.",
      async () => {
        await disturb.addBackend(4);
        await disturb.addBackend(5);
      },
    );
    await sleep(500, signal);
    await step(
      "LB node lb1 dies (link down, agent killed)",
      "The router moves lb1's flows to lb2 and lb3; they know those flows only if flow state is " +
        "shared, else the new table sends some to other backends.",
      () => disturb.killLbNode(1),
    );
    await sleep(ctx.quick ? 500 : 1_000, signal);
    await step(
      "LB node lb4 joins",
      "A new ECMP next hop moves about half of all flows between LB nodes; lb4 restores every " +
        "flow from Redis before it announces the LB IPs.",
      () => disturb.addLbNode(4),
    );
    await sleep(ctx.quick ? 500 : 1_000, signal);
    await step(
      "the policy module is swapped for one with another Maglev fill",
      "Every LB node rebuilds its tables and most slots change: a stateless LB moves most live " +
        "flows at once; stored flows keep each on its backend.",
      () => disturb.swapPolicy(activePolicy, OTHER_FILL),
    );
    await sleep(500, signal);
    await step(
      `backend be${DYING_BACKEND} dies: its health probes fail, it is quarantined`,
      `Its own connections end with it (counted apart); every LB node takes it out of its ` +
        "tables and purges its flows. Without probes an LB keeps sending new connections to " +
        "it; a stateless one's rebuilt table also moves some live flows of other backends.",
      () => {
        ended.dying(cluster, DYING_BACKEND);
        return disturb.killBackend(DYING_BACKEND);
      },
    );
    const summaries = await abortable(
      Promise.all(clients.map((c) => clientSummary(c, 40_000))),
      signal,
    );
    readLbNodes();
    await disturb.settle();
    report.checks = disturb.checks.map((c) => ({ what: c.what, ok: c.ok }));
    report.families = summaries.map((s, k) => ({
      family: k === 0 ? 4 as const : 6 as const,
      connections: s.connections,
      survived: s.survived,
      ended: ended.count(clients[k]!, k),
      maxStallMs: s.max_stall_ms,
      stallsMs: s.stalls_ms ?? [],
    }));
  } finally {
    clearInterval(sampler);
  }
  const failed = report.checks.filter((c) => !c.ok);
  view.say(
    `[${mode}] ${report.checks.length - failed.length} of ${report.checks.length} checks saw the ` +
      "changes happen",
    { mode, failed },
  );
  const [v4, v6] = report.families;
  const gone = v4!.ended + v6!.ended;
  Object.assign(row, {
    state: "done",
    connections: v4!.connections + v6!.connections,
    alive: v4!.survived + v6!.survived,
    ended: gone,
    stalled: 0,
    maxStallMs: Math.max(v4!.maxStallMs, v6!.maxStallMs),
    families: `IPv4 ${v4!.survived}/${v4!.connections}, IPv6 ${v6!.survived}/${v6!.connections}`,
  });
  view.rows(ctx.rows);
  view.say(
    `[${mode}] ${v4!.survived} of ${v4!.connections} IPv4 and ${v6!.survived} of ` +
      `${v6!.connections} IPv6 connections survived; ${gone} ended with be${DYING_BACKEND}`,
    {
      mode,
      connections: row.connections,
      survived: row.alive,
      ended_with_backend: gone,
      max_stall_ms: row.maxStallMs,
      ipv4_survived: v4!.survived,
      ipv6_survived: v6!.survived,
    },
  );
  view.flush();
  return report;
}
