/**
 * Agent cost per flow (`deno task bench:agent-cost`, issue 15): CPU time of each LB node's agent
 * per new flow, on the node that learns the flow and on each peer that installs it, beside the
 * same run with flow sharing off.
 *
 * - N = 4 LB nodes, each the real agent (`node/agent.ts` `main`, via `_agent_cost_node.ts`) in
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
 *   back unshared). Then the same with `--no-flow-sync` (baseline).
 * - `--profile`: the 10k/s phase (or the middle rate) is sampled by V8's profiler on node 0 and
 *   node 1, saved to `/tmp/hf-agent-cost-*.cpuprofile` and summarized on stderr (sampling adds
 *   overhead: take figures from a run without it).
 *
 * `--quick` (the bench group's smoke run): 1k, 5k, 10k flows/s for 1 s each.
 * Last stdout line: one JSON object with `learn_us_per_flow`, `peer_us_per_flow` (at 10k/s; peers
 * averaged), their `*_marginal_*` forms, `ratio_50k_to_1k` (learner, top rate over bottom rate;
 * `peer_*`, `marginal_*` likewise), `idle_ms_per_s`, `baseline_*`, and per-rate details.
 *
 * @module
 */

import { BpfMap, Datapath } from "../node/bpf/mod.ts";
import { intOption, listOption, readCommandLineOrExit } from "../lib/args.ts";
import { startRedis } from "../lab/redis_server.ts";
import { FlowGenerator, PORT, VIP } from "./_agent_cost_gen.ts";
import { type CpuProfile, summarize } from "./_agent_cost_profile.ts";

const OPTS = readCommandLineOrExit(Deno.args, {
  command: "bench:agent-cost",
  usage: `usage: deno task bench:agent-cost [--quick] [--rates=1000,10000,50000] [--seconds=10]
                                  [--established=10000] [--profile] [--modes=sharing,baseline]
  Root (BPF maps). --quick: rates 1000,5000,10000 for 1 s each (a smoke run).
  --profile: V8 CPU profiles of node 0 (learns) and node 1 (a peer) during the 10k/s phase.`,
  options: {
    quick: { type: "boolean" },
    rates: { type: "string" },
    seconds: { type: "string" },
    established: { type: "string" },
    profile: { type: "boolean" },
    modes: { type: "string" },
  },
}, ({ values }) => {
  const quick = values.quick === true;
  const rates = listOption(values, "rates").map(Number);
  return {
    quick,
    rates: rates.length > 0 ? rates : quick ? [1000, 5000, 10_000] : [1000, 10_000, 50_000],
    seconds: intOption(values, "seconds", { default: quick ? 1 : 10, min: 1 }),
    established: intOption(values, "established", { default: quick ? 1000 : 10_000, min: 0 }),
    profile: values.profile === true,
    modes: listOption(values, "modes").length > 0
      ? listOption(values, "modes")
      : ["sharing", "baseline"],
  };
});
const NODES = 4;
const SETTLE_MS = OPTS.quick ? 300 : 1000;
const MAIN = new URL("./_agent_cost_node.ts", import.meta.url).pathname;

/** One LB node's agent process. */
class Node {
  lines = 0;
  #buffer = "";
  #shown = 0;
  /** User-mode part of the last {@link cpuUs} reading. */
  userUs = 0;
  #waiters: { pred: (l: string) => boolean; resolve: (l: string) => void }[] = [];
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;
  readonly #pump: Promise<void>;

  constructor(readonly name: string, readonly pinDir: string, readonly child: Deno.ChildProcess) {
    this.#stdin = child.stdin.getWriter();
    this.#pump = this.#read();
  }

  async #read(): Promise<void> {
    for await (const chunk of this.child.stdout.pipeThrough(new TextDecoderStream())) {
      this.#buffer += chunk;
      for (let nl = this.#buffer.indexOf("\n"); nl >= 0; nl = this.#buffer.indexOf("\n")) {
        const line = this.#buffer.slice(0, nl);
        this.#buffer = this.#buffer.slice(nl + 1);
        this.lines++;
        // What an operator would look at: warnings, errors, state changes (bounded).
        if (this.#shown < 50 && /"level":"(warn|error)"|"flow agent state"/.test(line)) {
          this.#shown++;
          console.error(`${this.name}: ${line.slice(0, 400)}`);
        }
        for (const w of [...this.#waiters]) {
          if (!w.pred(line)) continue;
          this.#waiters.splice(this.#waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  }

  /** The next stdout line matching `pred` (within `timeoutMs`). */
  waitLine(pred: (l: string) => boolean, timeoutMs: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.name}: no matching line within ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.#waiters.push({ pred, resolve: (l) => (clearTimeout(timer), resolve(l)) });
    });
  }

  async #send(line: string): Promise<void> {
    await this.#stdin.write(new TextEncoder().encode(line + "\n"));
  }

  /** CPU µs (user + system, whole process) since it started. */
  async cpuUs(): Promise<number> {
    const reply = this.waitLine((l) => l.startsWith('{"bench_cpu_us"'), 5000);
    await this.#send("cpu");
    const r = JSON.parse(await reply);
    this.userUs = r.user_us;
    return r.bench_cpu_us;
  }

  /** Starts sampling this agent's CPU (V8 profiler). */
  profileStart(): Promise<void> {
    return this.#send("profile-start");
  }

  /** Stops sampling; returns the profile (also written to `path`). */
  async profileStop(path: string): Promise<CpuProfile> {
    const done = this.waitLine((l) => l.startsWith('{"bench_profile"'), 30_000);
    await this.#send(`profile-stop ${path}`);
    await done;
    return JSON.parse(await Deno.readTextFile(path));
  }

  /** Flows in this node's map. */
  flowCount(): number {
    using map = BpfMap.fromPinned(`${this.pinDir}/hf_flows`);
    return map.lookupBatch().count;
  }

  async stop(): Promise<void> {
    await this.#send("stop").catch(() => {});
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 10_000);
    await this.child.status;
    clearTimeout(timer);
    await this.#pump.catch(() => {});
    try {
      Datapath.unpin(this.pinDir);
    } catch (err) {
      console.error(`${this.name}: cannot unpin "${this.pinDir}": ${err}`);
    }
  }
}

async function startNodes(mode: string, dir: string, redisUrl: string): Promise<Node[]> {
  const config = `${dir}/services.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      services: [{
        name: "bench/web",
        flowKeyMode: "five-tuple",
        frontends: [{ address: `${VIP}:${PORT}/TCP` }],
        backends: Array.from({ length: 10 }, (_, i) => ({ address: `10.2.0.${i + 1}:80/TCP` })),
      }],
    }),
  );
  const nodes = Array.from({ length: NODES }, (_, i) => {
    const name = `cost-${mode}-${i}`;
    const pinDir = `/sys/fs/bpf/hf-bench-cost-${Deno.pid}-${mode}-${i}`;
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-P=agent",
        "--quiet",
        MAIN,
        ...["--node-name", name, "--config", config, "--redis", redisUrl],
        ...["--pin-dir", pinDir, "--src-addr", `10.1.1.${i + 2}`, "--listen", "none"],
        ...["--max-flows", String(1 << 20), "--health", "off"],
        // A small Maglev table: its build stays within the policy's time budget on a busy machine.
        ...["--maglev-size", "16381"],
        // A sweep every 5 s (default: idle timeout / 4, at most 30 s): each phase pays for some.
        ...["--sweep-interval-ms", OPTS.quick ? "500" : "5000"],
        ...(mode === "baseline" ? ["--no-flow-sync"] : []),
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    return new Node(name, pinDir, child);
  });
  try {
    await Promise.all(nodes.map((n) => n.waitLine((l) => l.includes('"msg":"ready"'), 60_000)));
  } catch (err) {
    for (const n of nodes) await n.stop();
    throw err;
  }
  return nodes;
}

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
  const nodes = await startNodes(mode, dir, redis.url).catch(async (err) => {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw err;
  });
  const phases: Phase[] = [];
  let idleUsPerS: number[] = [];
  try {
    using dp = await Datapath.open({ pinDir: nodes[0]!.pinDir });
    // The node's settings (as its agent wrote them) with an event budget above the top rate:
    // the default (20,000 events/s per CPU) would hold flows back unshared at 50k/s.
    dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 0, eventBudget: 1_000_000 });
    const gen = new FlowGenerator(dp);
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
    for (const rate of OPTS.rates) {
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
        flows_stored: Number(await redis.cli("HLEN", `hf:{${VIP}}:flows`)),
        reasons: reasonDeltas(reasons0, dp.reasons()),
      });
      console.error(`${mode} ${rate}/s: ${JSON.stringify(phases.at(-1))}`);
      for (const n of profiled) await saveProfile(n, rate);
    }
  } finally {
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
const at = (mode: string, rate: number) => results[mode]?.phases.find((p) => p.rate === rate);
const mid = profileRate();
const top = OPTS.rates[OPTS.rates.length - 1]!;
const bottom = OPTS.rates[0]!;
const s = at("sharing", mid);
const b = at("baseline", mid);
const hi = at("sharing", top);
const lo = at("sharing", bottom);
const round1 = (x: number) => Math.round(10 * x) / 10;
const ratio = (f: (p: Phase) => number) => hi && lo ? round1(f(hi) / f(lo)) : null;
const peers = (p: Phase) => mean(p.peer_us_per_flow);
const peersMarginal = (p: Phase) => mean(p.peer_marginal_us_per_flow);
console.log(JSON.stringify({
  bench: "agent-cost",
  quick: OPTS.quick,
  nodes: NODES,
  seconds_per_rate: OPTS.seconds,
  established_flows: OPTS.established,
  at_rate: mid,
  learn_us_per_flow: s?.learn_us_per_flow ?? null,
  peer_us_per_flow: s ? peers(s) : null,
  learn_marginal_us_per_flow: s?.learn_marginal_us_per_flow ?? null,
  peer_marginal_us_per_flow: s ? peersMarginal(s) : null,
  ratio_50k_to_1k: ratio((p) => p.learn_us_per_flow),
  peer_ratio_50k_to_1k: ratio(peers),
  marginal_ratio_50k_to_1k: ratio((p) => p.learn_marginal_us_per_flow),
  peer_marginal_ratio_50k_to_1k: ratio(peersMarginal),
  idle_ms_per_s: results.sharing?.idle_ms_per_s ?? null,
  baseline_learn_us_per_flow: b?.learn_us_per_flow ?? null,
  baseline_peer_us_per_flow: b ? peers(b) : null,
  baseline_idle_ms_per_s: results.baseline?.idle_ms_per_s ?? null,
  modes: results,
}));
