/**
 * The chaos scenarios of the stateful load balancer: real long-lived TCP connections (data every
 * 100 ms) through a virtual cluster while LB nodes die, join, restart, backends are added and
 * Redis restarts. Each scenario runs twice: with flow sharing (Holdfast) and without (Maglev
 * only, as Cilium or Katran without shared state) — the baseline. Every step checks that it
 * really happened (`chaos_steps.ts`), so a scenario that disturbed nothing cannot pass.
 *
 * `deno task chaos [SCENARIO…]` prints one JSON line per run (with any failed check) and, last,
 * one JSON object with the totals; it exits 1 when Holdfast lost a connection or a check failed.
 *
 * @module
 */
import { readCommandLine, UsageError } from "../lib/args.ts";
import { sleep } from "../lib/backoff.ts";
import { type Check, Disturbances } from "./chaos_steps.ts";
import { Cluster } from "./cluster.ts";
import { clientSummary } from "./clients/summary.ts";

/** What one run of a scenario measured. */
export interface RunResult {
  /** Scenario name. */
  readonly scenario: string;
  /** Holdfast (flow sharing) or the Maglev-only baseline. */
  readonly mode: "holdfast" | "baseline";
  /** Connections the client held. */
  readonly connections: number;
  /** Connections still echoing at the end. */
  readonly survived: number;
  /** Longest gap between two echoes on a surviving connection. */
  readonly max_stall_ms: number;
  /** Connections that died and why (the client lists at most 20). */
  readonly deaths: ReadonlyArray<{ port: number; reason: string }>;
  /** Evidence that each disturbance happened; every `ok` must be true. */
  readonly checks: readonly Check[];
}

/**
 * One step of a scenario: a disturbance of LB node `i` or backend `j` (a method of
 * {@linkcode Disturbances}, which also checks that it happened), Redis's restart, or a pause of
 * `ms` milliseconds.
 */
export type Step =
  | readonly ["killLbNode" | "addLbNode" | "killAgent" | "startAgent" | "addBackend", number]
  | readonly ["restartRedis"]
  | readonly ["sleep", number];

/** A scenario: cluster shape and what happens while connections are held. */
export interface Scenario {
  /** Short name, e.g. `lb-node-dies`. */
  readonly name: string;
  /** What happens, in a sentence. */
  readonly description: string;
  /** LB nodes and backends at the start. */
  readonly start: { readonly lbNodes: number; readonly backends: number };
  /**
   * The baseline must lose connections here: backends change (Maglev now disagrees for ~40 % of
   * flows) and then ECMP moves flows between LB nodes, which without shared state pick anew.
   */
  readonly baselineLoses?: boolean;
  /** The disturbances, in order, from 1.5 s after the connections opened. */
  readonly steps: readonly Step[];
}

/** The scenarios: the five of the stateful-flows issue and an LB node that comes back. */
export const SCENARIOS: readonly Scenario[] = [
  {
    name: "lb-node-dies",
    description: "LB node 1 of 3: link down and agent killed; the router withdraws it",
    start: { lbNodes: 3, backends: 3 },
    steps: [["killLbNode", 1]],
  },
  {
    name: "lb-node-returns",
    description: "LB node 1 of 3 dies, then comes back: its agent restores flows before ready",
    start: { lbNodes: 3, backends: 3 },
    steps: [
      ["killLbNode", 1],
      ["sleep", 1_000], // its flows move to lb2 and lb3
      ["addLbNode", 1],
    ],
  },
  {
    name: "lb-node-joins",
    description: "LB node 3 joins 2; ECMP rehashes flows onto it",
    start: { lbNodes: 2, backends: 3 },
    steps: [["addLbNode", 3]],
  },
  {
    name: "backends-added-during-lb-changes",
    description: "2 backends added to 3, then LB node 1 dies and LB node 4 joins",
    start: { lbNodes: 3, backends: 3 },
    baselineLoses: true,
    steps: [
      ["addBackend", 4],
      ["addBackend", 5],
      ["sleep", 500], // every agent has the new Maglev table
      ["killLbNode", 1],
      ["addLbNode", 4],
    ],
  },
  {
    name: "agent-restarts",
    description: "the agent of LB node 1 is killed and started again (pinned maps stay)",
    start: { lbNodes: 2, backends: 3 },
    steps: [["killAgent", 1], ["sleep", 500], ["startAgent", 1]],
  },
  {
    name: "redis-restarts",
    description:
      "Redis is killed and started empty during traffic; then backends scale 3 → 5 and LB node 3 joins, restoring from the refilled Redis",
    start: { lbNodes: 2, backends: 3 },
    baselineLoses: true,
    steps: [
      ["restartRedis"],
      ["sleep", 1_500], // agents notice the empty store and write their flows again
      ["addBackend", 4],
      ["addBackend", 5],
      ["sleep", 500],
      ["addLbNode", 3],
    ],
  },
];

/** Runs `steps` in order on a cluster through `disturb`, which records what each one did. */
export async function runSteps(steps: readonly Step[], disturb: Disturbances): Promise<void> {
  for (const step of steps) {
    if (step[0] === "sleep") await sleep(step[1]);
    else if (step[0] === "restartRedis") await disturb.restartRedis();
    else await disturb[step[0]](step[1]);
  }
}

/** Options for {@linkcode runScenario}. */
export interface RunOptions {
  /** Connections held open (default 60). */
  readonly connections?: number;
  /** How long the client holds them (default 8,000 ms); chaos starts 1.5 s in. */
  readonly durationMs?: number;
  /** Show every agent's log lines on stderr. */
  readonly verbose?: boolean;
}

/** Runs one scenario in one mode on a fresh cluster and returns what the client measured. */
export async function runScenario(
  scenario: Scenario,
  mode: "holdfast" | "baseline",
  options: RunOptions = {},
): Promise<RunResult> {
  await using cluster = await Cluster.create({
    ...scenario.start,
    flowSync: mode === "holdfast",
    verbose: options.verbose,
  });
  const client = await cluster.startClient(options.connections ?? 60, options.durationMs ?? 8_000);
  await sleep(1_500); // flows learned and shared before anything changes
  const disturb = new Disturbances(cluster);
  await runSteps(scenario.steps, disturb);
  const summary = await clientSummary(client, (options.durationMs ?? 8_000) + 20_000);
  await disturb.settle();
  return {
    scenario: scenario.name,
    mode,
    connections: summary.connections,
    survived: summary.survived,
    max_stall_ms: summary.max_stall_ms,
    deaths: summary.deaths,
    checks: disturb.checks,
  };
}

/** `deno task chaos`: every scenario in both modes; the last line is the JSON totals. */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, {
    command: "chaos",
    usage: `usage: ./hf chaos [--verbose] [SCENARIO...]   (deno task chaos; as root)
  Each scenario (default: all) for Holdfast and the baseline: ${
      SCENARIOS.map((s) => s.name).join(", ")
    }`,
    positionals: true,
    options: { verbose: { type: "boolean" } },
  }, ({ values, positionals }) => {
    const unknown = positionals.find((p) => !SCENARIOS.some((s) => s.name === p));
    if (unknown !== undefined) throw new UsageError(`Unknown scenario "${unknown}"`);
    return { only: positionals, verbose: values.verbose === true };
  });
  if ("exit" in read) return read.exit;
  const { only, verbose } = read.options;
  const results: RunResult[] = [];
  for (const scenario of SCENARIOS) {
    if (only.length && !only.includes(scenario.name)) continue;
    for (const mode of ["holdfast", "baseline"] as const) {
      const r = await runScenario(scenario, mode, { verbose });
      results.push(r);
      const failed = r.checks.filter((c) => !c.ok);
      const { deaths: _, ...rest } = r; // the client lists at most 20 deaths: count instead
      console.log(JSON.stringify({
        ...rest,
        lost: r.connections - r.survived,
        checks: r.checks.length,
        failed,
      }));
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
    checks: results.reduce((a, r) => a + r.checks.length, 0),
    failed_checks: results.reduce((a, r) => a + r.checks.filter((c) => !c.ok).length, 0),
  }));
  const checked = results.every((r) => r.checks.every((c) => c.ok));
  return checked && sum(ours, "connections") === sum(ours, "survived") ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
