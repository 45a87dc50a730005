/**
 * A/B of the controller's cold status writes in one process: this tree against another checkout
 * (`--base`), run alternately, so both sides see the same load moment by moment (the 2-CPU
 * machine is shared; see bench/control_plane_ab.ts for why this resolves what separate runs do
 * not). Each run (`_k8s_status_run.ts`) starts a fresh Kubernetes API test server of its side,
 * creates N LoadBalancer Services × 10 endpoints and an AddressPool, starts its side's controller
 * and times, on the wall clock and the process's CPU clock, until every Service's status and every
 * `AddressAllocated` Event is in the server's store. No agents, no Redis: what is measured is the
 * controller, its API client and the test server that stands in for kube-apiserver (which a real
 * cluster runs elsewhere).
 *
 * Per side: CPU µs per Service to the last status and to the last Event (median, first quartile),
 * wall ms (median), allocated bytes per Service; paired CPU ratios base ÷ this tree (above 1: this
 * tree is cheaper). The first `--skip` pairs are dropped as warm-up.
 *
 * Run: `git archive REV | tar -x -C /tmp/base`, then
 * `deno run -P=redis --allow-read --v8-flags=--expose-gc bench/k8s_status_ab.ts --base=/tmp/base`.
 * Flags: `--base=DIR` (default: this tree, an A/A run), `--services=N` (1000), `--pairs=P` (8),
 * `--skip=K` (1), `--quick`. The last line of output is one JSON object.
 *
 * @module
 */

import * as thisKube from "../lab/kube/mod.ts";
import * as thisRun from "../controller/k8s/run.ts";
import * as thisLog from "../lib/log.ts";
import { intOption, readCommandLineOrExit } from "../lib/args.ts";
import { type StatusRun, statusRun, type StatusSide } from "./_k8s_status_run.ts";

const OPTIONS = {
  command: "bench/k8s_status_ab.ts",
  usage: `usage: deno run -P=redis --allow-read --v8-flags=--expose-gc bench/k8s_status_ab.ts
         [--base=DIR] [--services=N] [--pairs=P] [--skip=K] [--quick]
  --base=DIR: the other checkout (default: this tree, an A/A run)`,
  options: {
    base: { type: "string" },
    services: { type: "string" },
    pairs: { type: "string" },
    skip: { type: "string" },
    quick: { type: "boolean" },
  },
} as const;

const CRDS = new URL("../k8s/crds", import.meta.url).pathname;

async function side(name: string, root: string | null): Promise<StatusSide> {
  if (root === null) {
    thisLog.setLogLevel("warn");
    return { name, kube: thisKube, run: thisRun, crdDir: CRDS };
  }
  const at = (p: string) => import(new URL(p, root).href);
  const [kube, run, log] = await Promise.all([
    at("lab/kube/mod.ts"),
    at("controller/k8s/run.ts"),
    at("lib/log.ts"),
  ]);
  log.setLogLevel("warn");
  return { name, kube, run, crdDir: CRDS };
}

const sorted = (xs: number[]) => xs.slice().sort((x, y) => x - y);
const median = (xs: number[]) => sorted(xs)[xs.length >> 1]!;
const quartile = (xs: number[]) => sorted(xs)[xs.length >> 2]!;
const r1 = (x: number) => Number(x.toFixed(1));

function summary(runs: StatusRun[]) {
  const status = runs.map((r) => r.statusCpuUs), events = runs.map((r) => r.eventsCpuUs);
  return {
    status_cpu_us_median: r1(median(status)),
    status_cpu_us_q1: r1(quartile(status)),
    events_cpu_us_median: r1(median(events)),
    events_cpu_us_q1: r1(quartile(events)),
    status_ms_median: r1(median(runs.map((r) => r.statusMs))),
    events_ms_median: r1(median(runs.map((r) => r.eventsMs))),
    synced_ms_median: r1(median(runs.map((r) => r.syncedMs))),
    synced_cpu_us_median: r1(median(runs.map((r) => r.syncedCpuUs))),
    allocated_bytes_median: Math.round(median(runs.map((r) => r.allocB))),
    status_writes_max: Math.max(...runs.map((r) => r.statusWrites)),
  };
}

export async function main(): Promise<void> {
  const o = readCommandLineOrExit(Deno.args, OPTIONS, ({ values }) => {
    const quick = values.quick === true;
    return {
      base: typeof values.base === "string" ? values.base : null,
      services: intOption(values, "services", { default: quick ? 100 : 1_000, min: 1, max: 3000 }),
      pairs: intOption(values, "pairs", { default: quick ? 2 : 8, min: 1 }),
      skip: intOption(values, "skip", { default: 1, min: 0 }),
    };
  });
  if (o.skip >= o.pairs) throw new Error(`--skip=${o.skip} leaves no pair of --pairs=${o.pairs}`);
  const root = o.base === null ? null : new URL(`file://${Deno.realPathSync(o.base)}/`).href;
  const a = await side("base", root), b = await side("this", null);
  const ra: StatusRun[] = [], rb: StatusRun[] = [];
  for (let k = 0; k < o.pairs; k++) {
    // Alternate which side goes first.
    const first = k % 2 === 0 ? a : b, second = first === a ? b : a;
    const x = await statusRun(first, o.services);
    const y = await statusRun(second, o.services);
    (first === a ? ra : rb).push(x);
    (first === a ? rb : ra).push(y);
  }
  const ka = ra.slice(o.skip), kb = rb.slice(o.skip);
  const statusRatios = ka.map((x, i) => x.statusCpuUs / kb[i]!.statusCpuUs);
  const eventRatios = ka.map((x, i) => x.eventsCpuUs / kb[i]!.eventsCpuUs);
  const sa = summary(ka), sb = summary(kb);
  console.log(
    `${o.services} Services × 10 endpoints, cold status writes; ${ka.length} pairs ` +
      `(${o.skip} dropped); base ${o.base ?? "(this tree: A/A)"}`,
  );
  for (const [name, s] of [["base", sa], ["this tree", sb]] as const) {
    console.log(
      `  ${name}: CPU µs per Service to the last status median ${s.status_cpu_us_median} (q1 ` +
        `${s.status_cpu_us_q1}), to the last Event ${s.events_cpu_us_median} (q1 ` +
        `${s.events_cpu_us_q1}), to synced ${s.synced_cpu_us_median}; wall ms: synced ${s.synced_ms_median}, statuses ` +
        `${s.status_ms_median}, Events ${s.events_ms_median}; allocated ` +
        `${s.allocated_bytes_median} B per Service`,
    );
  }
  const fmt = (rs: number[]) =>
    `${median(rs).toFixed(3)} (${rs.map((r) => r.toFixed(2)).join(" ")})`;
  console.log(`  paired CPU ratio base ÷ this tree, to the last status: ${fmt(statusRatios)}`);
  console.log(`  same, to the last Event: ${fmt(eventRatios)}`);
  console.log(JSON.stringify({
    bench: "k8s-status-ab",
    services: o.services,
    pairs: ka.length,
    base: sa,
    this_tree: sb,
    status_cpu_ratio_base_over_this_median: Number(median(statusRatios).toFixed(3)),
    events_cpu_ratio_base_over_this_median: Number(median(eventRatios).toFixed(3)),
  }));
  // Kept-alive sockets and the servers' timers end with the process.
  Deno.exit(0);
}

if (import.meta.main) await main();
