/**
 * `./hf demo`: a virtual cluster in network namespaces — a client, a router running bird2 (ECMP
 * over what the LB nodes announce through BGP), three LB nodes running Holdfast's XDP load
 * balancer and agent (announcing the LB IPs once ready), three backends, Redis — dual stack:
 * long-lived TCP connections to the IPv4 LB IP and to the IPv6 one, exchanging data every 100 ms.
 * While they run, two backends are added and LB node 1 is killed, then LB node 4 joins, then the
 * policy module is swapped for one with another Maglev fill. Holdfast keeps every connection of
 * both families. Last the egress chapter (`demo_egress.ts`): a NAT pod dies, with conntrack sync
 * and without. Then the same story with flow sharing off (Maglev only,
 * what a stateless ECMP load balancer does) for comparison. Each change is checked to have
 * happened (route, processes, backend maps: `chaos_steps.ts`).
 *
 * A person sees a line per step with why it would break elsewhere and a live table of both modes
 * (`demo_view.ts`); at the end a summary and a report folder with `report.html` and `report.json`
 * (`demo_report.ts`). `--json` prints JSON lines instead. Ctrl-C stops the story and removes every
 * namespace and process it made.
 *
 * Flags: `--verbose` shows every agent's log lines; `--connections N`; `--quick`; `--json`;
 * `--out DIR`.
 *
 * @module
 */
import { intOption, readCommandLine } from "../lib/args.ts";
import { rootMissingReason } from "./command.ts";
import { Disturbances } from "./chaos_steps.ts";
import { Cluster } from "./cluster.ts";
import { clientSummary } from "./clients/summary.ts";
import type { HostProcess } from "./host_process.ts";
import { DemoView, type ModeRow, tableLines } from "./demo_view.ts";
import { type EgressReport, type ModeReport, type Sample, writeReport } from "./demo_report.ts";
import { egressChapter, egressRows } from "./demo_egress.ts";

/** A policy module with the same flow hash and another Maglev table fill (a valid module). */
const OTHER_FILL = new URL("../policy-as/build/fixtures/rotated_fill.wasm", import.meta.url);

/** Thrown out of a story when the person pressed Ctrl-C; disposal then cleans up. */
class Interrupted extends Error {
  override name = "Interrupted";
}

interface StoryContext {
  view: DemoView;
  rows: ModeRow[];
  connections: number;
  verbose: boolean;
  quick: boolean;
  signal: AbortSignal;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
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
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(new Interrupted("interrupted"));
    const stop = () => reject(new Interrupted("interrupted"));
    signal.addEventListener("abort", stop, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", stop));
  });
}

/** The newest `progress` line of a hold client, parsed. */
function latestProgress(proc: HostProcess): Omit<Sample, "family" | "t"> | undefined {
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

async function story(flowSync: boolean, ctx: StoryContext): Promise<ModeReport> {
  const { view, signal } = ctx;
  const mode = flowSync ? "holdfast" : "maglev-only";
  const row = ctx.rows.find((r) => r.mode === mode)!;
  const report: ModeReport = { mode, samples: [], steps: [], families: [], checks: [] };
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
    agentArgs: ["--policy-follow", activePolicy],
  });
  if (signal.aborted) throw new Interrupted("interrupted");
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
  const sample = () => {
    const t = Date.now() - t0;
    let alive = 0, connections = 0, stalled = 0, maxStallMs = 0;
    for (const [k, family] of ([4, 6] as const).entries()) {
      const p = latestProgress(clients[k]!);
      if (!p) continue;
      report.samples.push({ t, family, ...p });
      alive += p.alive;
      connections += p.connections;
      stalled += p.stalled;
      maxStallMs = Math.max(maxStallMs, p.maxStallMs);
    }
    Object.assign(row, { alive, connections, stalled, maxStallMs });
    view.rows(ctx.rows);
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
    const summaries = await abortable(
      Promise.all(clients.map((c) => clientSummary(c, 40_000))),
      signal,
    );
    await disturb.settle();
    report.checks = disturb.checks.map((c) => ({ what: c.what, ok: c.ok }));
    report.families = summaries.map((s, k) => ({
      family: k === 0 ? 4 as const : 6 as const,
      connections: s.connections,
      survived: s.survived,
      maxStallMs: s.max_stall_ms,
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
  Object.assign(row, {
    state: "done",
    connections: v4!.connections + v6!.connections,
    alive: v4!.survived + v6!.survived,
    stalled: 0,
    maxStallMs: Math.max(v4!.maxStallMs, v6!.maxStallMs),
    families: `IPv4 ${v4!.survived}/${v4!.connections}, IPv6 ${v6!.survived}/${v6!.connections}`,
  });
  view.rows(ctx.rows);
  view.say(
    `[${mode}] ${v4!.survived} of ${v4!.connections} IPv4 and ${v6!.survived} of ` +
      `${v6!.connections} IPv6 connections survived`,
    {
      mode,
      connections: row.connections,
      survived: row.alive,
      max_stall_ms: row.maxStallMs,
      ipv4_survived: v4!.survived,
      ipv6_survived: v6!.survived,
    },
  );
  view.flush();
  return report;
}

const USAGE = `usage: ./hf demo [--quick] [--json] [--out DIR] [--verbose] [--connections N]
  (main.ts demo; as root) The dual-stack virtual cluster in network namespaces: N connections (40;
  10 with --quick) per address family through LB node and backend changes, with flow sharing and
  without; then an egress NAT pod dies under TCP connections and a UDP stream, with conntrack
  sync and without. A live table on a terminal, plain text otherwise; --json: JSON lines. The report
  (report.html, report.json) goes to DIR (default /tmp/holdfast-demo/TIME). --verbose: every
  agent's log lines. Ctrl-C stops and removes everything the demo made.`;

/** The `demo` command for lib/args.ts: its name, usage and options. */
export const DEMO_COMMAND = {
  command: "demo",
  usage: USAGE,
  options: {
    verbose: { type: "boolean" },
    quick: { type: "boolean" },
    json: { type: "boolean" },
    out: { type: "string" },
    connections: { type: "string" },
  },
} as const;

/**
 * Runs the demo; returns an exit code: 0 when Holdfast kept every connection and every change was
 * seen to happen in both stories, 130 after Ctrl-C.
 */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, DEMO_COMMAND, ({ values }) => ({
    verbose: values.verbose === true,
    quick: values.quick === true,
    json: values.json === true,
    out: typeof values.out === "string" ? values.out : undefined,
    connections: intOption(values, "connections", {
      default: values.quick === true ? 10 : 40,
      min: 1,
      max: 1000,
    }),
  }));
  if ("exit" in read) return read.exit;
  const { verbose, connections, quick, json } = read.options;
  const missing = rootMissingReason();
  if (missing !== null) {
    console.error(`Cannot run the demo: it ${missing} (network namespaces and BPF)`);
    return 1;
  }
  const started = new Date();
  const out = read.options.out ??
    `/tmp/holdfast-demo/${started.toISOString().replace(/[:.]/g, "-")}`;
  const view = new DemoView(DemoView.styleFor(json));
  const abort = new AbortController();
  const onInterrupt = () => {
    if (!abort.signal.aborted) {
      view.say("interrupted: removing the virtual cluster (its namespaces and processes)");
    }
    abort.abort();
  };
  Deno.addSignalListener("SIGINT", onInterrupt);
  Deno.addSignalListener("SIGTERM", onInterrupt);
  const rows: ModeRow[] = [
    ...["holdfast", "maglev-only"].map((mode) => ({
      mode,
      state: "waiting",
      connections: 0,
      alive: 0,
      stalled: 0,
      maxStallMs: 0,
      families: "",
    })),
    ...egressRows(),
  ];
  const ctx = { view, rows, connections, verbose, quick, signal: abort.signal };
  try {
    const ours = await story(true, ctx);
    const base = await story(false, ctx);
    const egress: EgressReport[] = await egressChapter(view, rows, {
      connections,
      verbose,
      signal: abort.signal,
    });
    if (abort.signal.aborted) throw new Interrupted("interrupted");
    const path = await writeReport(out, {
      started: started.toISOString(),
      finished: new Date().toISOString(),
      modes: [ours, base],
      egress,
    });
    view.close();
    const survived = (m: ModeReport) => m.families.reduce((a, f) => a + f.survived, 0);
    const total = (m: ModeReport) => m.families.reduce((a, f) => a + f.connections, 0);
    const stall = Math.max(...ours.families.map((f) => f.maxStallMs));
    if (view.style === "json") {
      view.say("result", {
        holdfast:
          `${survived(ours)}/${total(ours)} survived (${rows[0]!.families}), longest stall ` +
          `${stall} ms`,
        maglev_only: `${survived(base)}/${total(base)} survived (${rows[1]!.families})`,
        report: path,
      });
    } else {
      const [nat, noSync] = egress;
      console.log(
        `\nHoldfast kept ${survived(ours)} of ${total(ours)} connections; Maglev only kept ` +
          `${survived(base)} of ${total(base)}. Through a NAT pod's death: ${nat?.survived} of ` +
          `${nat?.connections} with conntrack sync, ${noSync?.survived} of ` +
          `${noSync?.connections} without.\n${tableLines(rows).join("\n")}\n\n` +
          `Report: ${path}  (and report.json beside it)`,
      );
    }
    const checked = [ours, base].every((m) => m.checks.every((c) => c.ok));
    const natKept = egress[0] !== undefined && egress[0].survived === egress[0].connections &&
      egress[0].udpKept;
    return survived(ours) === total(ours) && checked && natKept ? 0 : 1;
  } catch (e) {
    if (e instanceof Interrupted || abort.signal.aborted) {
      view.close();
      view.say("stopped: everything the demo made is removed");
      return 130;
    }
    throw e;
  } finally {
    Deno.removeSignalListener("SIGINT", onInterrupt);
    Deno.removeSignalListener("SIGTERM", onInterrupt);
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
