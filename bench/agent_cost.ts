/**
 * Agent cost per flow (`deno task bench:agent-cost`, issue 15): CPU time of each LB node's agent
 * per new flow, on the node that learns the flow and on each peer that installs it, beside the
 * same run with flow sharing off.
 *
 * - N = 4 LB nodes, each the real agent (`node/lb/main.ts` `main`, via `_agent_cost_node.ts`) in
 *   a process of its own with its own pinned BPF maps (`/sys/fs/bpf/hf-bench-cost-*`), one
 *   services file (one frontend, 10 backends), one throwaway redis-server.
 * - Traffic (`_agent_cost_gen.ts`): node 0's real XDP program run by BPF_PROG_TEST_RUN over
 *   node 0's pinned maps: new flows (a SYN and the client's first ACK, from distinct clients) at a
 *   fixed rate — the program itself shares each flow once the ACK confirms it and emits the
 *   new-flow event the agent reads from the ring buffer, as in production — plus ACKs of
 *   established flows (opened first, one packet per flow per second) that only refresh
 *   last_seen in the kernel.
 * - Idle first: established flows kept active, no new flow, for one phase's length — each
 *   agent's CPU per second when nothing is learned (timers, sweeps, the blocking reads).
 * - Per rate (1k, 10k, 50k new flows/s, 10 s each): each agent's CPU (user + system, every
 *   thread: getrusage in the agent process) from the phase's start until every peer's flow map
 *   holds every flow (at least 1 s after the last SYN), divided by the new flows; `*_marginal_*`
 *   first subtracts the idle CPU of that window. Redis's CPU (`INFO cpu`) likewise. The learning
 *   node's event budget is raised above the top rate (the datapath's default would hold flows
 *   back unshared). Last, "all learn" (`--all-learn-rate`, 10k/s): new flows spread over the four
 *   nodes as ECMP would, so each agent learns a quarter and installs the rest (the load of issue
 *   15's measurement). Then all of it with `--no-flow-sync` (baseline).
 * - `--profile`: the 10k/s phase (or the middle rate) is sampled by V8's profiler on node 0 and
 *   node 1, saved to `/tmp/hf-agent-cost-*.cpuprofile` and summarized on stderr (sampling adds
 *   overhead: take figures from a run without it).
 *
 * - `--family=6`: IPv6 flows (an IPv6 LB IP over the same IPv4 backends, `hf_flows6`,
 *   `hf_events6`) instead of IPv4 ones.
 * - `--learn-window-ms`: the agents' longest gathering wait (`main.ts agent --learn-window-ms`,
 *   default 200): what a longer window saves at low rates (`learn_window_ms` in the last line).
 *
 * `--quick` (the bench group's smoke run): 1k, 5k, 10k flows/s for 1 s each.
 * Last stdout line: one JSON object with `learn_us_per_flow`, `peer_us_per_flow` (at 10k/s; peers
 * averaged), their `*_marginal_*` forms, `ratio_50k_to_1k` (learner: the larger of its cost per
 * flow at the top and the bottom rate over the smaller, so ≤ 2 is "flat within 2×" either way;
 * `peer_*` likewise; null when a figure is not positive), `flat_goal_met` (learner and peers
 * within 2×, raw), `marginal_ratio_50k_to_1k` (the same with each rate's `--no-flow-sync` cost
 * per flow subtracted: what flow sharing adds; `marginal_*_us_per_flow_1k`/`_50k` the figures;
 * null without the baseline mode), `idle_subtracted_ratio_50k_to_1k` (each phase's idle CPU
 * subtracted instead), `sum_us_per_flow` (all four agents), `all_learn_us_per_flow` (all four
 * agents, new flows spread over every node), `idle_ms_per_s`, `baseline_*`, and per-rate
 * details.
 *
 * @module
 */

import { Datapath } from "../node/bpf/mod.ts";
import { choiceOption, intOption, listOption, readCommandLineOrExit } from "../lib/args.ts";
import { startRedis } from "../lab/redis_server.ts";
import { type Family, FlowGenerator, VIP, VIP6 } from "./_agent_cost_gen.ts";
import { summarize } from "./_agent_cost_profile.ts";
import { LEARN_COALESCE_MAX_MS } from "../node/lb/flows/burst_timing.ts";
import { type Node, startNodes } from "./_agent_cost_nodes.ts";

const OPTS = readCommandLineOrExit(Deno.args, {
  command: "bench:agent-cost",
  usage: `usage: deno task bench:agent-cost [--quick] [--rates=1000,10000,50000] [--seconds=10]
                                  [--established=10000] [--profile] [--modes=sharing,baseline]
                                  [--learn-window-ms=MS (the agents' flag; default theirs, 200)]
                                  [--family=4|6 (the new flows' family; default 4)]
  Root (BPF maps). --quick: rates 1000,5000,10000 for 1 s each (a smoke run).
  --profile: V8 CPU profiles of node 0 (learns) and node 1 (a peer) during the 10k/s phase.`,
  options: {
    quick: { type: "boolean" },
    rates: { type: "string" },
    seconds: { type: "string" },
    established: { type: "string" },
    "all-learn-rate": { type: "string" },
    profile: { type: "boolean" },
    modes: { type: "string" },
    "learn-window-ms": { type: "string" },
    family: { type: "string" },
  },
}, ({ values }) => {
  const quick = values.quick === true;
  const rates = listOption(values, "rates").map(Number);
  return {
    quick,
    rates: rates.length > 0 ? rates : quick ? [1000, 5000, 10_000] : [1000, 10_000, 50_000],
    seconds: intOption(values, "seconds", { default: quick ? 1 : 10, min: 1 }),
    established: intOption(values, "established", { default: quick ? 1000 : 10_000, min: 0 }),
    allLearnRate: intOption(values, "all-learn-rate", { default: quick ? 5000 : 10_000, min: 0 }),
    profile: values.profile === true,
    learnWindowMs: intOption(values, "learn-window-ms", { max: 10_000 }),
    family: Number(choiceOption(values, "family", ["4", "6"])) as Family,
    modes: listOption(values, "modes").length > 0
      ? listOption(values, "modes")
      : ["sharing", "baseline"],
  };
});
const NODES = 4;
const SETTLE_MS = OPTS.quick ? 300 : 1000;

async function redisCpuUs(redis: { cli(...a: string[]): Promise<string> }): Promise<number> {
  const info = await redis.cli("INFO", "cpu");
  const get = (k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (get("used_cpu_user") + get("used_cpu_sys")) * 1e6;
}

/** Waits until every peer's map holds `want` flows (sharing) or `SETTLE_MS` passed. */
async function settle(nodes: Node[], want: number, sharing: boolean): Promise<number[]> {
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  let counts = nodes.map((n) => n.flowCount());
  const deadline = Date.now() + 30_000; // counting a big map takes a while: bounded by time
  for (
    let i = 0;
    sharing && i < 1000 && counts.some((c) => c < want) && Date.now() < deadline;
    i++
  ) {
    await new Promise((r) => setTimeout(r, 100));
    counts = nodes.map((n) => n.flowCount());
  }
  return counts;
}

interface Phase {
  rate: number;
  /** New flows spread over all nodes (each learns a quarter, installs the rest). */
  all_learn: boolean;
  /** All four agents' CPU per new flow (learning node + peers). */
  sum_us_per_flow: number;
  achieved_rate: number;
  new_flows: number;
  window_s: number;
  learn_us_per_flow: number;
  peer_us_per_flow: number[];
  /** Beyond the agent's idle CPU (measured with no new flow): what the flows themselves cost. */
  learn_marginal_us_per_flow: number;
  peer_marginal_us_per_flow: number[];
  /** Of each agent's CPU, the part in user mode (the rest: the kernel, on its behalf). */
  user_share: number[];
  redis_us_per_flow: number;
  log_lines_per_flow: number;
  flows_in_maps: number[];
  flows_stored: number;
  /** The learning node's datapath reason counters that moved (flow_shared, tx_new, …). */
  reasons: Record<string, number>;
}

function reasonDeltas(a: Record<string, bigint>, b: Record<string, bigint>) {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(b)) if (v !== a[k]) out[k] = Number(v - (a[k] ?? 0n));
  return out;
}

async function runMode(mode: string, redis: Awaited<ReturnType<typeof startRedis>>) {
  const sharing = mode === "sharing";
  await redis.cli("FLUSHALL");
  const dir = await Deno.makeTempDir({ prefix: "hf-bench-cost-" });
  const nodes = await startNodes(mode, dir, {
    redisUrl: redis.url,
    count: NODES,
    quick: OPTS.quick,
    ...(OPTS.learnWindowMs === undefined ? {} : { learnWindowMs: OPTS.learnWindowMs }),
    family: OPTS.family,
  }).catch(async (err) => {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw err;
  });
  const phases: Phase[] = [];
  let idleUsPerS: number[] = [];
  const disposers: Disposable[] = [];
  try {
    using dp = await Datapath.open({ pinDir: nodes[0]!.pinDir });
    // The node's settings (as its agent wrote them) with an event budget above the top rate:
    // the default (20,000 events/s per CPU) would hold flows back unshared at 50k/s.
    dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 0, eventBudget: 1_000_000 });
    const gen = new FlowGenerator(dp, OPTS.family);
    // The "all learn" phase spreads new flows over every node, as ECMP does.
    const all = [dp, ...nodes.slice(1).map((n) => Datapath.open({ pinDir: n.pinDir }))];
    const learners = [dp, ...await Promise.all(all.slice(1))];
    for (const [i, l] of learners.entries()) {
      if (i > 0) {
        l.configure({ srcAddr: `10.1.1.${i + 2}`, encapPort: 6080, seed: 0, eventBudget: 1e6 });
      }
    }
    disposers.push(...learners.slice(1));
    gen.establish(OPTS.established);
    await settle(nodes, OPTS.established, sharing);
    // Idle: established flows kept active, no new flow. What an agent spends per second anyway.
    const idle0 = await Promise.all(nodes.map((n) => n.cpuUs()));
    const tIdle = performance.now();
    await gen.run(0, OPTS.seconds, OPTS.established);
    const idle1 = await Promise.all(nodes.map((n) => n.cpuUs()));
    const idleS = (performance.now() - tIdle) / 1000;
    idleUsPerS = idle1.map((c, i) => (c - idle0[i]!) / idleS);
    console.error(`${mode} idle: ${idleUsPerS.map((u) => (u / 1000).toFixed(2))} ms CPU/s`);
    const phasesToRun = [...OPTS.rates.map((rate) => ({ rate, spread: false }))];
    if (OPTS.allLearnRate > 0) phasesToRun.push({ rate: OPTS.allLearnRate, spread: true });
    for (const { rate, spread } of phasesToRun) {
      gen.spread(spread ? learners : [dp]);
      const profiled = OPTS.profile && sharing && rate === profileRate() ? nodes.slice(0, 2) : [];
      for (const n of profiled) await n.profileStart();
      const reasons0 = dp.reasons();
      const lines0 = nodes.map((n) => n.lines);
      const cpu0 = await Promise.all(nodes.map((n) => n.cpuUs()));
      const user0 = nodes.map((n) => n.userUs);
      const redis0 = await redisCpuUs(redis);
      const t0 = performance.now();
      const run = await gen.run(rate, OPTS.seconds, OPTS.established);
      const counts = await settle(nodes, OPTS.established + gen.created, sharing);
      const cpu1 = await Promise.all(nodes.map((n) => n.cpuUs()));
      const redis1 = await redisCpuUs(redis);
      const window = (performance.now() - t0) / 1000;
      const per = (us: number) => Math.round(10 * us / run.newFlows) / 10;
      const d = cpu1.map((c, i) => c - cpu0[i]!);
      const marginal = d.map((x, i) => per(x - idleUsPerS[i]! * window));
      const user = nodes.map((n, i) => n.userUs - user0[i]!);
      phases.push({
        rate,
        all_learn: spread,
        sum_us_per_flow: per(d.reduce((a, b) => a + b, 0)),
        achieved_rate: Math.round(run.newFlows / run.seconds),
        new_flows: run.newFlows,
        window_s: Math.round(window * 100) / 100,
        learn_us_per_flow: per(d[0]!),
        peer_us_per_flow: d.slice(1).map(per),
        learn_marginal_us_per_flow: marginal[0]!,
        peer_marginal_us_per_flow: marginal.slice(1),
        user_share: d.map((x, i) => Math.round(100 * user[i]! / x) / 100),
        redis_us_per_flow: per(redis1 - redis0),
        log_lines_per_flow: Math.round(
          100 * nodes.reduce((s, n, i) => s + n.lines - lines0[i]!, 0) / run.newFlows,
        ) / 100,
        flows_in_maps: counts,
        flows_stored: Number(
          await redis.cli("HLEN", `hf:{${OPTS.family === 6 ? VIP6 : VIP}}:flows`),
        ),
        reasons: reasonDeltas(reasons0, dp.reasons()),
      });
      console.error(
        `${mode} ${rate}/s${spread ? " all learn" : ""}: ${JSON.stringify(phases.at(-1))}`,
      );
      for (const n of profiled) await saveProfile(n, rate);
    }
  } finally {
    for (const d of disposers) d[Symbol.dispose]();
    for (const n of nodes) await n.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  return { idle_ms_per_s: idleUsPerS.map((u) => Math.round(u / 10) / 100), phases };
}

function profileRate(): number {
  return OPTS.rates.includes(10_000) ? 10_000 : OPTS.rates[Math.floor(OPTS.rates.length / 2)]!;
}

async function saveProfile(node: Node, rate: number): Promise<void> {
  const path = `/tmp/hf-agent-cost-${node.name}-${rate}.cpuprofile`;
  const { functions, files } = summarize(await node.profileStop(path));
  console.error(`profile ${node.name} at ${rate}/s (${path}), self time by function:`);
  for (const l of functions) console.error(`  ${l}`);
  console.error("by file:");
  for (const l of files) console.error(`  ${l}`);
}

const mean = (xs: number[]) => Math.round(10 * xs.reduce((a, b) => a + b, 0) / xs.length) / 10;

await using redis = await startRedis();
const results: Record<string, Awaited<ReturnType<typeof runMode>>> = {};
for (const mode of OPTS.modes) results[mode] = await runMode(mode, redis);
const at = (mode: string, rate: number, allLearn = false) =>
  results[mode]?.phases.find((p) => p.rate === rate && p.all_learn === allLearn);
const mid = profileRate();
const top = OPTS.rates[OPTS.rates.length - 1]!;
const bottom = OPTS.rates[0]!;
const s = at("sharing", mid);
const b = at("baseline", mid);
const hi = at("sharing", top);
const lo = at("sharing", bottom);
const round1 = (x: number) => Math.round(10 * x) / 10;
// Flatness as issue 15 means it: the larger cost per flow over the smaller, of the top and the
// bottom rate (1 = flat; the goal is ≤ 2, whichever way it leans).
function ratio(f: (p: Phase) => number): number | null {
  if (!hi || !lo) return null;
  const [a, b] = [f(hi), f(lo)];
  return Math.min(a, b) > 0 ? round1(Math.max(a, b) / Math.min(a, b)) : null;
}
const peers = (p: Phase) => mean(p.peer_us_per_flow);
const peersMarginal = (p: Phase) => mean(p.peer_marginal_us_per_flow);
// What flow sharing adds: the same rate's `--no-flow-sync` cost per flow subtracted (that run
// holds the same background: the control plane's passes, timers, the established flows).
const baseHi = at("baseline", top), baseLo = at("baseline", bottom);
function sharedRatio(f: (p: Phase) => number): number | null {
  if (!hi || !lo || !baseHi || !baseLo) return null;
  const [a, b] = [f(hi) - f(baseHi), f(lo) - f(baseLo)];
  return Math.min(a, b) > 0 ? round1(Math.max(a, b) / Math.min(a, b)) : null;
}
const sharedAt = (rate: number, f: (p: Phase) => number) => {
  const [p, q] = [at("sharing", rate), at("baseline", rate)];
  return p && q ? round1(f(p) - f(q)) : null;
};
const learnUs = (p: Phase) => p.learn_us_per_flow;
console.log(JSON.stringify({
  bench: "agent-cost",
  quick: OPTS.quick,
  nodes: NODES,
  seconds_per_rate: OPTS.seconds,
  established_flows: OPTS.established,
  learn_window_ms: OPTS.learnWindowMs ?? LEARN_COALESCE_MAX_MS,
  family: OPTS.family,
  at_rate: mid,
  learn_us_per_flow: s?.learn_us_per_flow ?? null,
  peer_us_per_flow: s ? peers(s) : null,
  learn_marginal_us_per_flow: s?.learn_marginal_us_per_flow ?? null,
  peer_marginal_us_per_flow: s ? peersMarginal(s) : null,
  ratio_50k_to_1k: ratio(learnUs),
  peer_ratio_50k_to_1k: ratio(peers),
  marginal_learn_us_per_flow_1k: sharedAt(bottom, learnUs),
  marginal_learn_us_per_flow_50k: sharedAt(top, learnUs),
  marginal_peer_us_per_flow_1k: sharedAt(bottom, peers),
  marginal_peer_us_per_flow_50k: sharedAt(top, peers),
  marginal_ratio_50k_to_1k: sharedRatio(learnUs),
  peer_marginal_ratio_50k_to_1k: sharedRatio(peers),
  idle_subtracted_ratio_50k_to_1k: ratio((p) => p.learn_marginal_us_per_flow),
  peer_idle_subtracted_ratio_50k_to_1k: ratio(peersMarginal),
  flat_goal_met: [ratio(learnUs), ratio(peers)].every((r) => r !== null && r <= 2),
  sum_us_per_flow: s?.sum_us_per_flow ?? null,
  all_learn_rate: OPTS.allLearnRate,
  all_learn_us_per_flow: at("sharing", OPTS.allLearnRate, true)?.sum_us_per_flow ?? null,
  baseline_all_learn_us_per_flow: at("baseline", OPTS.allLearnRate, true)?.sum_us_per_flow ?? null,
  idle_ms_per_s: results.sharing?.idle_ms_per_s ?? null,
  baseline_learn_us_per_flow: b?.learn_us_per_flow ?? null,
  baseline_peer_us_per_flow: b ? peers(b) : null,
  baseline_idle_ms_per_s: results.baseline?.idle_ms_per_s ?? null,
  modes: results,
}));
