/**
 * The chaos scenarios of the stateful load balancer: real long-lived TCP connections (data every
 * 100 ms) through a virtual cluster while LB nodes die, join, restart, backends are added and
 * Redis restarts. Each scenario runs twice: with flow sharing (Holdfast) and without (Maglev
 * only, as Cilium or Katran without shared state) — the baseline.
 *
 * `deno task chaos` prints one JSON line per run and, last, one JSON object with the totals.
 *
 * @module
 */
import { Cluster } from "./cluster.ts";

/** What one run of a scenario measured. */
export interface RunResult {
  readonly scenario: string;
  readonly mode: "holdfast" | "baseline";
  readonly connections: number;
  readonly survived: number;
  readonly max_stall_ms: number;
  readonly deaths: ReadonlyArray<{ port: number; reason: string }>;
}

/** A scenario: cluster shape and what happens while connections are held. */
export interface Scenario {
  readonly name: string;
  readonly description: string;
  readonly lbNodes: number;
  readonly backends: number;
  readonly chaos: (cluster: Cluster) => Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The five scenarios of the stateful-flows issue. */
export const SCENARIOS: readonly Scenario[] = [
  {
    name: "lb-node-dies",
    description: "LB node 1 of 3: link down and agent killed; the router withdraws it",
    lbNodes: 3,
    backends: 3,
    chaos: async (c) => {
      await c.killLbNode(1);
    },
  },
  {
    name: "lb-node-joins",
    description: "LB node 3 joins 2; ECMP rehashes flows onto it",
    lbNodes: 2,
    backends: 3,
    chaos: async (c) => {
      await c.addLbNode(3);
    },
  },
  {
    name: "backends-added-during-lb-changes",
    description: "2 backends added to 3, then LB node 1 dies and LB node 4 joins",
    lbNodes: 3,
    backends: 3,
    chaos: async (c) => {
      await c.addBackend(4);
      await c.addBackend(5);
      await sleep(500); // every agent has the new Maglev table
      await c.killLbNode(1);
      await c.addLbNode(4);
    },
  },
  {
    name: "agent-restarts",
    description: "the agent of LB node 1 is killed and started again (pinned maps stay)",
    lbNodes: 2,
    backends: 3,
    chaos: async (c) => {
      await c.killAgent(1);
      await sleep(500);
      await c.startAgent(1);
    },
  },
  {
    name: "redis-restarts",
    description:
      "Redis is killed and started empty during traffic; then backends scale 3 → 5 and LB node 3 joins, restoring from the refilled Redis",
    lbNodes: 2,
    backends: 3,
    chaos: async (c) => {
      await c.redis.restart();
      await sleep(1_500); // agents notice the empty store and write their flows again
      await c.addBackend(4);
      await c.addBackend(5);
      await sleep(500);
      await c.addLbNode(3);
    },
  },
];

/** Options for {@linkcode runScenario}. */
export interface RunOptions {
  /** Connections held open (default 60). */
  readonly connections?: number;
  /** How long the client holds them (default 8,000 ms); chaos starts 1.5 s in. */
  readonly durationMs?: number;
  readonly verbose?: boolean;
}

/** Runs one scenario in one mode on a fresh cluster and returns what the client measured. */
export async function runScenario(
  scenario: Scenario,
  mode: "holdfast" | "baseline",
  options: RunOptions = {},
): Promise<RunResult> {
  await using cluster = await Cluster.create({
    lbNodes: scenario.lbNodes,
    backends: scenario.backends,
    flowSync: mode === "holdfast",
    verbose: options.verbose,
  });
  const client = await cluster.startClient(options.connections ?? 60, options.durationMs ?? 8_000);
  await sleep(1_500); // flows learned and shared before anything changes
  await scenario.chaos(cluster);
  const line = await client.waitForLine((l) => l.includes('"msg":"summary"'), {
    timeoutMs: (options.durationMs ?? 8_000) + 20_000,
  });
  const summary = JSON.parse(line);
  return {
    scenario: scenario.name,
    mode,
    connections: summary.connections,
    survived: summary.survived,
    max_stall_ms: summary.max_stall_ms,
    deaths: summary.deaths,
  };
}

/** `deno task chaos`: every scenario in both modes; the last line is the JSON totals. */
export async function main(args: string[]): Promise<number> {
  const only = args.filter((a) => !a.startsWith("--"));
  const verbose = args.includes("--verbose");
  const results: RunResult[] = [];
  for (const scenario of SCENARIOS) {
    if (only.length && !only.includes(scenario.name)) continue;
    for (const mode of ["holdfast", "baseline"] as const) {
      const r = await runScenario(scenario, mode, { verbose });
      results.push(r);
      console.log(JSON.stringify({ ...r, deaths: r.deaths.length }));
    }
  }
  const ours = results.filter((r) => r.mode === "holdfast");
  const base = results.filter((r) => r.mode === "baseline");
  const sum = (rs: RunResult[], k: "connections" | "survived") => rs.reduce((a, r) => a + r[k], 0);
  console.log(JSON.stringify({
    connections: sum(ours, "connections"),
    survived: sum(ours, "survived"),
    max_stall_ms: Math.max(0, ...ours.map((r) => r.max_stall_ms)),
    baseline_connections: sum(base, "connections"),
    baseline_survived: sum(base, "survived"),
    baseline_max_stall_ms: Math.max(0, ...base.map((r) => r.max_stall_ms)),
    scenarios: ours.length,
  }));
  return sum(ours, "connections") === sum(ours, "survived") ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
