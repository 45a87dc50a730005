/**
 * The chaos scenarios of the stateful load balancer: real long-lived TCP connections (data every
 * 100 ms) through a virtual cluster while LB nodes die, join, restart, backends are added and
 * Redis restarts. Each scenario runs twice: with flow sharing (Holdfast) and without (Maglev
 * only, as Cilium or Katran without shared state) — the baseline. Every step checks that it
 * really happened (`chaos_steps.ts`), so a scenario that disturbed nothing cannot pass.
 *
 * The cluster is dual stack: the same number of connections is held to the IPv4 LB IP and to the
 * IPv6 one (backends' IPv6 addresses, outer IPv6), and short connections (one line echoed) open
 * to both every 50 ms throughout; every result counts each family apart.
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
import { checkExceptionsShared, EXCEPTION_LAB_SCENARIOS } from "./_chaos_exceptions.ts";
import { clientSummary, type HoldSummary } from "./clients/summary.ts";

/** What the client of one address family measured. */
export interface FamilyResult {
  /** Connections the client held. */
  readonly connections: number;
  /** Connections still echoing at the end. */
  readonly survived: number;
  /** Longest gap between two echoes on a surviving connection. */
  readonly max_stall_ms: number;
  /** Connections that died and why (the client lists at most 20). */
  readonly deaths: ReadonlyArray<{ port: number; reason: string }>;
}

/** The short connections to one LB IP during a run (lab/clients/connect_loop.ts). */
export interface ShortResult {
  readonly attempts: number;
  readonly ok: number;
  readonly failed: number;
  /**
   * Of `failed`, connects refused by an ICMP unreachable: the router had no route to the LB IP
   * at that instant (its bird reconverging after an ECMP change, seen rarely under load), which
   * no load balancer behind it can change. Reported, not held against Holdfast.
   */
  readonly unreachable: number;
  /** The first failures: when (ms after the loop started) and why. */
  readonly failures: ReadonlyArray<{ at_ms: number; reason: string }>;
}

/** What one run of a scenario measured. */
export interface RunResult {
  /** Scenario name. */
  readonly scenario: string;
  /** Holdfast (flow sharing) or the Maglev-only baseline. */
  readonly mode: "holdfast" | "baseline";
  /** Connections held, both families. */
  readonly connections: number;
  /** Connections still echoing at the end, both families. */
  readonly survived: number;
  /** Longest gap between two echoes on a surviving connection, both families. */
  readonly max_stall_ms: number;
  /** Connections that died and why (at most 20 per family). */
  readonly deaths: ReadonlyArray<{ port: number; reason: string }>;
  /** The connections to the IPv4 LB IP. */
  readonly ipv4: FamilyResult;
  /** The connections to the IPv6 LB IP (null: an IPv4-only cluster). */
  readonly ipv6: FamilyResult | null;
  /** Short connections during the run, per family (`ipv6` null: an IPv4-only cluster). */
  readonly short: { readonly ipv4: ShortResult; readonly ipv6: ShortResult | null };
  /** Whether Redis held IPv6 flows before the first disturbance (IPv6 flows are shared). */
  readonly ipv6_shared: boolean;
  /** Evidence that each disturbance happened; every `ok` must be true. */
  readonly checks: readonly Check[];
}

/**
 * One step of a scenario: a disturbance of LB node `i` or backend `j` (a method of
 * {@linkcode Disturbances}, which also checks that it happened), Redis's restart, or a pause of
 * `ms` milliseconds; with a Redis Cluster, the master of the LB IP's flows killed; or steps run
 * `together` (concurrently).
 */
export type Step =
  | readonly ["killLbNode" | "addLbNode" | "killAgent" | "startAgent" | "addBackend", number]
  | readonly ["restartRedis"]
  | readonly ["killFlowMaster"]
  | readonly ["together", readonly Step[]]
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
  /**
   * The store: a Redis Cluster (three masters, a replica each) with `flowBuckets` hash tags per
   * LB IP (lab/_cluster_store.ts). Such scenarios run for Holdfast only. Default: one Redis.
   */
  readonly redisCluster?: { readonly flowBuckets: number };
  /** Extra flags for every agent (e.g. `--flow-sharing exceptions`). */
  readonly agentArgs?: readonly string[];
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

/**
 * Chaos with a Redis Cluster as the store (tests/e2e/shard_failover_chaos_test.ts): not in
 * {@linkcode SCENARIOS}, whose test also runs the baseline.
 */
export const SHARD_SCENARIOS: readonly Scenario[] = [
  {
    name: "shard-failover-lb-node-dies",
    description: "the Redis Cluster master of the LB IP's first flow bucket is SIGKILLed (its " +
      "replica promoted) while LB node 1 of 4 dies (link down, agent killed)",
    start: { lbNodes: 4, backends: 3 },
    redisCluster: { flowBuckets: 8 },
    steps: [["together", [["killFlowMaster"], ["killLbNode", 1]]]],
  },
];

/** Runs `steps` in order on a cluster through `disturb`, which records what each one did. */
export async function runSteps(steps: readonly Step[], disturb: Disturbances): Promise<void> {
  for (const step of steps) {
    if (step[0] === "sleep") await sleep(step[1]);
    else if (step[0] === "together") {
      await Promise.all(step[1].map((s) => runSteps([s], disturb)));
    } else if (step[0] === "killFlowMaster") await disturb.killFlowMaster();
    else if (step[0] === "restartRedis") await disturb.restartRedis();
    else await disturb[step[0]](step[1]);
  }
}

/** Options for {@linkcode runScenario}. */
export interface RunOptions {
  /** Connections held open per address family (default 40: 80 in all). */
  readonly connections?: number;
  /**
   * How long the clients hold them (default 10,000 ms: the last join of redis-restarts, both
   * families routed to it, was seen to end after 8 s); chaos starts 1.5 s in.
   */
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
    redisCluster: scenario.redisCluster !== undefined,
    flowBuckets: scenario.redisCluster?.flowBuckets,
    ...(scenario.agentArgs && mode === "holdfast" ? { agentArgs: scenario.agentArgs } : {}),
  });
  const [count, durationMs] = [options.connections ?? 40, options.durationMs ?? 10_000];
  const dual = cluster.vip6 !== null;
  const clients = await Promise.all([
    cluster.startClient(count, durationMs),
    dual ? cluster.startClient(count, durationMs, { family: 6 }) : null,
  ]);
  const loops = await Promise.all([
    cluster.startConnectLoop(durationMs, SHORT_INTERVAL_MS),
    dual ? cluster.startConnectLoop(durationMs, SHORT_INTERVAL_MS, { family: 6 }) : null,
  ]);
  await sleep(1_500); // flows learned and shared before anything changes
  const ipv6Shared = mode === "holdfast" && cluster.vip6 !== null &&
    await cluster.store.storedFlows(cluster.vip6) > 0;
  const disturb = new Disturbances(cluster, { ipv6Shared });
  await runSteps(scenario.steps, disturb);
  const [ipv4, ipv6] = await Promise.all(
    clients.map((c) => c === null ? null : clientSummary(c, durationMs + 20_000).then(family)),
  );
  const [short4, short6] = await Promise.all(
    loops.map((l) => l === null ? null : clientSummary<ShortResult>(l, durationMs + 20_000)),
  );
  await disturb.settle();
  if (mode === "holdfast") disturb.checks.push(...await checkExceptionsShared(cluster, scenario));
  const both = [ipv4!, ...(ipv6 ? [ipv6] : [])];
  return {
    scenario: scenario.name,
    mode,
    connections: both.reduce((a, f) => a + f.connections, 0),
    survived: both.reduce((a, f) => a + f.survived, 0),
    max_stall_ms: Math.max(...both.map((f) => f.max_stall_ms)),
    deaths: both.flatMap((f) => f.deaths),
    ipv4: ipv4!,
    ipv6: ipv6 ?? null,
    short: { ipv4: shortOf(short4!), ipv6: short6 ? shortOf(short6) : null },
    ipv6_shared: ipv6Shared,
    checks: disturb.checks,
  };
}

/** Every how many ms the short-connection clients open one. */
const SHORT_INTERVAL_MS = 50;

function shortOf(s: ShortResult): ShortResult {
  const { attempts, ok, failed, unreachable } = s;
  return { attempts, ok, failed, unreachable, failures: s.failures.slice(0, 5) };
}

function family(s: HoldSummary): FamilyResult {
  return {
    connections: s.connections,
    survived: s.survived,
    max_stall_ms: s.max_stall_ms,
    deaths: s.deaths,
  };
}

/** `connections`/`survived`/`lost` of one family, for the JSON lines (null: no such family). */
function counts(f: FamilyResult | null) {
  return f &&
    { connections: f.connections, survived: f.survived, lost: f.connections - f.survived };
}

/**
 * What Holdfast got wrong in one run (empty: nothing): long-lived connections lost and short ones
 * failed (but for the router's unreachables: {@linkcode ShortResult.unreachable}), per family; IPv6 flows not in Redis before the first disturbance (IPv6 flows are shared
 * like IPv4 ones, so every scenario holds for both); checks that failed.
 */
export function holdfastProblems(r: RunResult): string[] {
  const problems = r.checks.filter((c) => !c.ok).map((c) =>
    `${r.mode}: ${c.what} (seen: ${c.seen})`
  );
  if (r.mode !== "holdfast") return problems;
  if (r.checks.length === 0) problems.push("holdfast: no disturbance was checked");
  if (r.ipv6 !== null && !r.ipv6_shared) {
    problems.push("holdfast: Redis held no IPv6 flow before the disturbances (IPv6 not shared)");
  }
  for (const [name, f] of [["IPv4", r.ipv4], ["IPv6", r.ipv6]] as const) {
    if (f === null || f.survived === f.connections) continue;
    problems.push(
      `${f.connections - f.survived} of ${f.connections} ${name} connections lost: ${
        JSON.stringify(f.deaths.slice(0, 5))
      }`,
    );
  }
  for (const [name, s] of [["IPv4", r.short.ipv4], ["IPv6", r.short.ipv6]] as const) {
    if (s === null || s.failed === s.unreachable) continue;
    problems.push(
      `${s.failed - s.unreachable} of ${s.attempts} short ${name} connections failed: ${
        JSON.stringify(s.failures)
      }`,
    );
  }
  return problems;
}

const ALL = [...SCENARIOS, ...SHARD_SCENARIOS, ...EXCEPTION_LAB_SCENARIOS];

/** `deno task chaos`: every scenario in both modes; the last line is the JSON totals. */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, {
    command: "chaos",
    usage: `usage: ./hf chaos [--verbose] [SCENARIO...]   (deno task chaos; as root)
  Each scenario (default: all) for Holdfast and the baseline (Redis Cluster and --flow-sharing ones: Holdfast only): ${
      ALL.map((s) => s.name).join(", ")
    }`,
    positionals: true,
    options: { verbose: { type: "boolean" } },
  }, ({ values, positionals }) => {
    const unknown = positionals.find((p) => !ALL.some((s) => s.name === p));
    if (unknown !== undefined) throw new UsageError(`Unknown scenario "${unknown}"`);
    return { only: positionals, verbose: values.verbose === true };
  });
  if ("exit" in read) return read.exit;
  const { only, verbose } = read.options;
  const results: RunResult[] = [];
  for (const scenario of ALL) {
    if (only.length && !only.includes(scenario.name)) continue;
    const modes = scenario.redisCluster || scenario.agentArgs
      ? ["holdfast"] as const
      : ["holdfast", "baseline"] as const;
    for (const mode of modes) {
      const r = await runScenario(scenario, mode, { verbose });
      results.push(r);
      const failed = r.checks.filter((c) => !c.ok);
      // The clients list at most 20 deaths: counts instead.
      const { deaths: _, ipv4, ipv6, checks: __, short, ...rest } = r;
      console.log(JSON.stringify({
        ...rest,
        lost: r.connections - r.survived,
        ipv4: counts(ipv4),
        ipv6: counts(ipv6),
        short_failed: { ipv4: short.ipv4.failed, ipv6: short.ipv6?.failed ?? null },
        short_unreachable: short.ipv4.unreachable + (short.ipv6?.unreachable ?? 0),
        checks: r.checks.length,
        failed,
      }));
    }
  }
  const ours = results.filter((r) => r.mode === "holdfast");
  const base = results.filter((r) => r.mode === "baseline");
  const sum = (rs: RunResult[], k: "connections" | "survived") => rs.reduce((a, r) => a + r[k], 0);
  const sumOf = (rs: RunResult[], f: "ipv4" | "ipv6", k: "connections" | "survived") =>
    rs.reduce((a, r) => a + (r[f]?.[k] ?? 0), 0);
  console.log(JSON.stringify({
    connections: sum(ours, "connections"),
    survived: sum(ours, "survived"),
    ipv4_connections: sumOf(ours, "ipv4", "connections"),
    ipv4_survived: sumOf(ours, "ipv4", "survived"),
    ipv6_connections: sumOf(ours, "ipv6", "connections"),
    ipv6_survived: sumOf(ours, "ipv6", "survived"),
    ipv6_shared: ours.every((r) => r.ipv6_shared),
    short_attempts: ours.reduce(
      (a, r) => a + r.short.ipv4.attempts + (r.short.ipv6?.attempts ?? 0),
      0,
    ),
    short_failed: ours.reduce((a, r) => a + r.short.ipv4.failed + (r.short.ipv6?.failed ?? 0), 0),
    short_unreachable: ours.reduce(
      (a, r) => a + r.short.ipv4.unreachable + (r.short.ipv6?.unreachable ?? 0),
      0,
    ),
    max_stall_ms: Math.max(0, ...ours.map((r) => r.max_stall_ms)),
    baseline_connections: sum(base, "connections"),
    baseline_survived: sum(base, "survived"),
    baseline_max_stall_ms: Math.max(0, ...base.map((r) => r.max_stall_ms)),
    scenarios: ours.length,
    checks: results.reduce((a, r) => a + r.checks.length, 0),
    failed_checks: results.reduce((a, r) => a + r.checks.filter((c) => !c.ok).length, 0),
  }));
  return results.every((r) => holdfastProblems(r).length === 0) ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
