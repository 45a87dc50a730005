/**
 * A/B of the control-plane pipeline in one process: this tree against another checkout (`--base`),
 * run alternately, so both sides see the same load moment by moment. On the shared 2-CPU machine
 * the load moves even CPU time 2× between separate runs (cache, SMT, steal); alternating in one
 * process is what resolved 5–10 % levers in issue 24's third pass (bench/RESULTS.md).
 *
 * Each side runs its own Writer, tables, reconciler, maps stand-in and Maglev host code (the policy
 * module's bytes are this tree's build) on N services × B backends as Service + EndpointSlice
 * objects, fed in write transactions of S services, as `bench/control_plane.ts`. Per side: CPU µs
 * per service (process CPU, GC threads included) as median, first quartile and minimum, ingest CPU,
 * wall time, allocated bytes; then the paired ratios (base ÷ this tree: above 1, this tree is
 * cheaper), of the whole pipeline and of ingest alone (the feed into the tables), as median and
 * geometric mean. Runs alternate strictly (base first and last), each run of this tree compared
 * with the two base runs around it. The first `--skip` pairs are dropped as warm-up.
 *
 * Run (the base read from its directory: `--allow-read`):
 * `git archive REV | tar -x -C /tmp/base` (no build needed there), then
 * `deno run -P=unit --allow-read --v8-flags=--expose-gc bench/control_plane_ab.ts
 * --base=/tmp/base`. Flags: `--base=DIR` (default: this tree, an A/A run showing the noise),
 * `--services=N` (10000), `--backends=B` (1), `--batch=S` (100), `--pairs=P` (12), `--skip=K` (2),
 * `--quick`. The last line of output is one JSON object.
 *
 * @module
 */

import process from "node:process";
import v8 from "node:v8";
import * as thisPlane from "../node/lb/control_plane.ts";
import * as thisMaps from "../node/lb/maps/memory.ts";
import * as thisSource from "../node/lb/sources/k8s_source.ts";
import * as thisHost from "../policy-as/host/mod.ts";
import * as thisLog from "../lib/log.ts";
import { intOption, readCommandLineOrExit } from "../lib/args.ts";
import { generate } from "./_k8s_objects.ts";

const OPTIONS = {
  command: "bench/control_plane_ab.ts",
  usage: `usage: deno run -P=unit --allow-read --v8-flags=--expose-gc bench/control_plane_ab.ts
         [--base=DIR] [--services=N] [--backends=B] [--batch=S] [--pairs=P] [--skip=K] [--quick]
  --base=DIR: the other checkout (default: this tree, an A/A run)`,
  options: {
    base: { type: "string" },
    services: { type: "string" },
    backends: { type: "string" },
    batch: { type: "string" },
    pairs: { type: "string" },
    skip: { type: "string" },
    quick: { type: "boolean" },
  },
} as const;

// deno-lint-ignore no-explicit-any
type Mod = any;
/** One side: its modules and its Maglev builder. */
interface Side {
  name: string;
  plane: Mod;
  maps: Mod;
  source: Mod;
  maglev: Mod;
}

const gcFn = (globalThis as { gc?: () => void }).gc;
const allocated = () =>
  (v8.getHeapStatistics() as unknown as { total_allocated_bytes: number }).total_allocated_bytes;

async function side(name: string, root: string | null, wasm: Uint8Array): Promise<Side> {
  const at = (p: string) => import(new URL(p, root === null ? import.meta.url : root).href);
  const [plane, maps, source, host, log] = root === null
    ? [thisPlane, thisMaps, thisSource, thisHost, thisLog]
    : await Promise.all([
      at("node/lb/control_plane.ts"),
      at("node/lb/maps/memory.ts"),
      at("node/lb/sources/k8s_source.ts"),
      at("policy-as/host/mod.ts"),
      at("lib/log.ts"),
    ]);
  log.setLogLevel("warn");
  const h = await host.PolicyHost.create();
  const swap = await h.swap(wasm);
  if (!swap.ok) throw new Error(`Policy module rejected on side ${name}: ${JSON.stringify(swap)}`);
  const maglev = new host.WasmMaglevBuilder(h, { fallback: new host.TsMaglevBuilder() });
  return { name, plane, maps, source, maglev };
}

interface Run {
  cpuUs: number;
  ingestCpuUs: number;
  wallUs: number;
  allocB: number;
}

async function run(s: Side, n: number, b: number, batch: number, offset: number): Promise<Run> {
  const cp = await s.plane.createControlPlane(new s.maps.MemoryLBMaps({ checkInvariants: false }), {
    maglevSize: 1021,
    maglev: s.maglev,
    batchSize: 1000,
  });
  const k8s = new s.source.K8sSource(cp.writer);
  k8s.registerInitializer();
  cp.start();
  const events = generate(n, b, offset);
  // The input old, as in bench/control_plane.ts: no scavenge copies it during the run.
  gcFn?.();
  const a0 = allocated(), c0 = process.cpuUsage(), t0 = performance.now();
  for (let i = 0; i < events.length; i += batch * 2) k8s.apply(events.slice(i, i + batch * 2));
  k8s.synced();
  const ci = process.cpuUsage(c0);
  await cp.reconciler.waitIdle();
  const t1 = performance.now(), c1 = process.cpuUsage(c0), a1 = allocated();
  const count = cp.tables.frontends.count(cp.db.readTxn());
  await cp.stop();
  if (count !== n) throw new Error(`Side ${s.name} did not converge: ${count}/${n} frontends`);
  return {
    cpuUs: (c1.user + c1.system) / n,
    ingestCpuUs: (ci.user + ci.system) / n,
    wallUs: (t1 - t0) * 1000 / n,
    allocB: (a1 - a0) / n,
  };
}

const sorted = (xs: number[]) => xs.slice().sort((x, y) => x - y);
const median = (xs: number[]) => sorted(xs)[xs.length >> 1]!;
const quartile = (xs: number[]) => sorted(xs)[xs.length >> 2]!;
const r1 = (x: number) => Number(x.toFixed(1));
/** Geometric mean of ratios. */
const geomean = (xs: number[]) => Math.exp(xs.reduce((s, x) => s + Math.log(x), 0) / xs.length);

function summary(runs: Run[]) {
  const cpu = runs.map((r) => r.cpuUs);
  return {
    cpu_us_median: r1(median(cpu)),
    cpu_us_q1: r1(quartile(cpu)),
    cpu_us_min: r1(Math.min(...cpu)),
    ingest_cpu_us_median: r1(median(runs.map((r) => r.ingestCpuUs))),
    wall_us_median: r1(median(runs.map((r) => r.wallUs))),
    allocated_bytes_median: Math.round(median(runs.map((r) => r.allocB))),
  };
}

export async function main(): Promise<void> {
  const o = readCommandLineOrExit(Deno.args, OPTIONS, ({ values }) => {
    const quick = values.quick === true;
    return {
      base: typeof values.base === "string" ? values.base : null,
      services: intOption(values, "services", { default: quick ? 300 : 10_000, min: 1 }),
      backends: intOption(values, "backends", { default: 1, min: 1 }),
      batch: intOption(values, "batch", { default: 100, min: 1 }),
      pairs: intOption(values, "pairs", { default: quick ? 3 : 12, min: 1 }),
      skip: intOption(values, "skip", { default: quick ? 1 : 2, min: 0 }),
    };
  });
  if (o.skip >= o.pairs) throw new Error(`--skip=${o.skip} leaves no pair of --pairs=${o.pairs}`);
  // Addresses of every run stay distinct and valid (generate: 10.100+.x.y, 172.16+.x.y).
  const stride = 2 ** Math.ceil(Math.log2(o.services + 1));
  if ((2 * o.pairs + 2) * stride * o.backends >= 2 ** 24) {
    throw new Error("Too many services × backends × pairs for distinct addresses: lower one");
  }
  const wasm = await Deno.readFile(new URL("../policy-as/build/release.wasm", import.meta.url));
  const root = o.base === null ? null : new URL(`file://${Deno.realPathSync(o.base)}/`).href;
  const a = await side("base", root, wasm), b = await side("this tree", null, wasm);
  // Strictly alternating, base first and last: a b a b … a. Every run follows one of the other
  // side (a side run right after itself is 10–30 % cheaper: bench/RESULTS.md), and each run of
  // this tree is compared with the two base runs around it, which cancels a drift of the load
  // and the position within a pair.
  const ra: Run[] = [], rb: Run[] = [];
  for (let k = 0; k < o.pairs; k++) {
    ra.push(await run(a, o.services, o.backends, o.batch, (2 * k + 1) * stride));
    rb.push(await run(b, o.services, o.backends, o.batch, (2 * k + 2) * stride));
  }
  ra.push(await run(a, o.services, o.backends, o.batch, (2 * o.pairs + 1) * stride));
  const ka = ra.slice(o.skip), kb = rb.slice(o.skip);
  const around = (f: (r: Run) => number, i: number) => Math.sqrt(f(ka[i]!) * f(ka[i + 1]!));
  const ratios = kb.map((y, i) => around((r) => r.cpuUs, i) / y.cpuUs);
  const ingestRatios = kb.map((y, i) => around((r) => r.ingestCpuUs, i) / y.ingestCpuUs);
  const sa = summary(ka), sb = summary(kb);
  console.log(
    `${o.services} services × ${o.backends} backends, ${o.batch} per write txn; ` +
      `${kb.length} pairs (${o.skip} dropped); base ${o.base ?? "(this tree: A/A)"}`,
  );
  for (const [name, s] of [["base", sa], ["this tree", sb]] as const) {
    console.log(
      `  ${name}: CPU µs per service median ${s.cpu_us_median} (q1 ${s.cpu_us_q1}, min ` +
        `${s.cpu_us_min}), ingest ${s.ingest_cpu_us_median}; wall ${s.wall_us_median} µs; ` +
        `allocated ${s.allocated_bytes_median} B`,
    );
  }
  console.log(
    `  paired CPU ratio base ÷ this tree: median ${median(ratios).toFixed(3)} ` +
      `(${ratios.map((r) => r.toFixed(2)).join(" ")}), geometric mean ` +
      `${geomean(ratios).toFixed(3)}; ingest only: median ${median(ingestRatios).toFixed(3)}, ` +
      `geometric mean ${geomean(ingestRatios).toFixed(3)} ` +
      `(${ingestRatios.map((r) => r.toFixed(2)).join(" ")})`,
  );
  console.log(JSON.stringify({
    bench: "control-plane-ab",
    services: o.services,
    backends: o.backends,
    batch_services_per_txn: o.batch,
    pairs: kb.length,
    base: sa,
    this_tree: sb,
    cpu_ratio_base_over_this_median: Number(median(ratios).toFixed(3)),
    cpu_ratio_base_over_this_geomean: Number(geomean(ratios).toFixed(3)),
    ingest_cpu_ratio_base_over_this_median: Number(median(ingestRatios).toFixed(3)),
    ingest_cpu_ratio_base_over_this_geomean: Number(geomean(ingestRatios).toFixed(3)),
  }));
}

if (import.meta.main) await main();
