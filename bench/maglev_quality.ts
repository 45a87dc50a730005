/**
 * Maglev table quality by table size (`deno task bench:maglev`): for N equal-weight backends and
 * M slots, the imbalance (the busiest backend's slots over the average M/N, and max/min) and the
 * disruption when one backend is removed (the share of the *other* backends' slots that change
 * owner; the removed backend's own slots must move). Plus the build time of the TypeScript
 * builder, the kernel memory of one table (a BPF array stores each u32 slot in 8 bytes:
 * `memlock` in the map's fdinfo reads M × 8 plus a header), and the slowest accepted weighted
 * inputs (the build-cost budget of `policy-as/host/maglev_input.ts`) timed in the TypeScript
 * and the WASM builders. Deterministic: the same keys every run.
 *
 * Flags: `--quick` (N ≤ 100, M ≤ 16,381, 3 removals: seconds). Last line: one JSON object.
 *
 * @module
 */
import { readCommandLineOrExit } from "../lib/args.ts";
import { benchBackends } from "../policy-as/host/gen_vectors.ts";
import { readBuiltWasm, slowestAcceptedBackends } from "../policy-as/host/_testing.ts";
import {
  encodeMaglevInput,
  MAGLEV_MAX_VISITS,
  type MaglevBackend,
} from "../policy-as/host/maglev_input.ts";
import { maglevFill, type MaglevFillStats, TsMaglevBuilder } from "../policy-as/host/maglev_ts.ts";
import { PolicyModule } from "../policy-as/host/policy_module.ts";
import { WasmMaglevBuilder } from "../policy-as/host/wasm_maglev_builder.ts";
import { Registry } from "../lib/metrics.ts";
import { median } from "./_stats.ts";

const { quick } = readCommandLineOrExit(Deno.args, {
  command: "bench:maglev",
  usage: "usage: deno task bench:maglev [--quick]",
  options: { quick: { type: "boolean" } },
}, ({ values }) => ({ quick: values.quick === true }));

const SIZES = quick ? [1021, 16381] : [1021, 16381, 65537];
const COUNTS = quick ? [10, 100] : [10, 100, 1000];
const REMOVALS = quick ? 3 : 20;
const builder = new TsMaglevBuilder();
const wasm = new WasmMaglevBuilder(
  { current: await PolicyModule.load(await readBuiltWasm("release")) },
  { registry: new Registry() },
);
/** Kernel bytes per slot of a BPF array of u32 (values are rounded up to 8 bytes). */
const BPF_SLOT_BYTES = 8;

/** Slots per backend index (1-based, as the table stores them). */
function slotCounts(table: Uint32Array, n: number): Uint32Array {
  const c = new Uint32Array(n + 1);
  for (const v of table) c[v]!++;
  return c;
}

function buildMs(
  backends: readonly MaglevBackend[],
  m: number,
  runs: number,
  b: TsMaglevBuilder | WasmMaglevBuilder = builder,
): number {
  const out = new Uint32Array(m);
  for (let i = 0; i < 3; i++) b.build(backends, m, out);
  const t: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    b.build(backends, m, out);
    t.push(performance.now() - t0);
  }
  return median(t);
}

interface Row {
  n: number;
  m: number;
  max_over_avg: number;
  max_over_min: number;
  /** % of the other backends' slots that changed owner, mean and max over the removals. */
  disruption_pct: number;
  disruption_max_pct: number;
  build_ms: number;
  table_bytes: number;
}

const rows: Row[] = [];
for (const n of COUNTS) {
  for (const m of SIZES) {
    if (n > m) continue;
    const all = benchBackends(n);
    const full = builder.build(all, m);
    const counts = slotCounts(full, n).subarray(1);
    const max = Math.max(...counts), min = Math.min(...counts);
    const moves: number[] = [];
    for (let r = 0; r < Math.min(REMOVALS, n); r++) {
      const gone = Math.floor((r * n) / Math.min(REMOVALS, n));
      const kept = all.filter((_, i) => i !== gone);
      const after = builder.build(kept, m);
      let others = 0, moved = 0;
      for (let s = 0; s < m; s++) {
        const was = full[s]! - 1;
        if (was === gone) continue;
        others++;
        if (kept[after[s]! - 1]!.key !== all[was]!.key) moved++;
      }
      moves.push((100 * moved) / others);
    }
    rows.push({
      n,
      m,
      max_over_avg: Number((max / (m / n)).toFixed(4)),
      max_over_min: Number((max / min).toFixed(3)),
      disruption_pct: Number((moves.reduce((a, b) => a + b, 0) / moves.length).toFixed(2)),
      disruption_max_pct: Number(Math.max(...moves).toFixed(2)),
      build_ms: Number(buildMs(all, m, m > 20000 ? 15 : 40).toFixed(3)),
      table_bytes: m * BPF_SLOT_BYTES,
    });
  }
}

console.log(
  `Maglev quality, equal weights, ${REMOVALS} single removals per row (TypeScript builder)`,
);
console.log(
  `${"N".padStart(5)} ${"M".padStart(7)}  max/avg  max/min  moved% (mean/max)  build ms  BPF KiB`,
);
for (const r of rows) {
  console.log(
    `${String(r.n).padStart(5)} ${String(r.m).padStart(7)}  ${r.max_over_avg.toFixed(3)}   ` +
      `${r.max_over_min.toFixed(3).padStart(6)}  ${r.disruption_pct.toFixed(2).padStart(6)} / ` +
      `${r.disruption_max_pct.toFixed(2).padEnd(6)}     ${r.build_ms.toFixed(3).padStart(7)}  ` +
      `${(r.table_bytes / 1024).toFixed(0).padStart(9)}`,
  );
}

const worst: Array<
  { n: number; m: number; heavy: number; visits: number; ts_ms: number; wasm_ms: number }
> = [];
for (const m of quick ? [16381] : [16381, 65537, 131071]) {
  for (const n of quick ? [1000] : [100, 1000, 10000]) {
    if (n > m) continue;
    const backends = slowestAcceptedBackends(n, m);
    const records = encodeMaglevInput(backends, m); // accepted, or this throws
    const stats: MaglevFillStats = { visits: 0, probes: 0 };
    maglevFill(records, new Uint32Array(m), stats);
    worst.push({
      n,
      m,
      heavy: backends[0]!.weight,
      visits: stats.visits,
      ts_ms: Number(buildMs(backends, m, 5).toFixed(2)),
      wasm_ms: Number(buildMs(backends, m, 5, wasm).toFixed(2)),
    });
  }
}
console.log(
  `Slowest accepted weighted inputs (one heavy backend, the rest weight 1; budget ` +
    `${MAGLEV_MAX_VISITS} visits):`,
);
for (const w of worst) {
  console.log(
    `  N=${w.n} M=${w.m} heavy=${w.heavy}: ${w.visits} visits, ${w.ts_ms} ms TypeScript, ` +
      `${w.wasm_ms} ms WASM`,
  );
}
console.log(JSON.stringify({ bench: "maglev-quality", quick, rows, worst_accepted: worst }));
