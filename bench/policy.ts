/**
 * Policy benchmark (`deno task bench:policy`): the Maglev table build, M = 65,537 and N = 1,000,
 * in the WASM policy module and in the TypeScript builder (`policy-as/host/maglev_ts.ts`: the
 * plain populate walk, identical tables), in the same run and interleaved so both see the same
 * machine noise; then the flow hash in ns per call.
 *
 * - core: pre-hashed backend records → a fresh table the caller owns (WASM: copy the records
 *   in, build, copy the table out; TypeScript: allocate the table, fill it).
 * - end to end: `MaglevBuilder.build(backends, m)` including key hashing and input checks.
 *
 * Published anchors printed beside (not measured here): Maglev paper 1.8 ms (C++, M = 65,537,
 * N = 1,000); Cilium 8.17 ms (M = 16,381, N = 1,000); Envoy 2.2–2.7 ms (M = 65,537).
 *
 * `--quick`: a smoke run of seconds (few runs, fewer hashes) for `./hf test bench`.
 *
 * Last line: one JSON object with `maglev_wasm_ms`, `maglev_ts_ms` (core medians), `hash_ns`
 * (WASM five-tuple hash called from JS) and more.
 *
 * @module
 */
import { readBuiltWasm } from "../policy-as/host/_testing.ts";
import type { PolicyExports } from "../policy-as/host/abi.ts";
import { flowHashFiveTuple } from "../policy-as/host/flow_hash.ts";
import { benchBackends } from "../policy-as/host/gen_vectors.ts";
import { encodeMaglevInput } from "../policy-as/host/maglev_input.ts";
import { maglevFill, TsMaglevBuilder } from "../policy-as/host/maglev_ts.ts";
import { PolicyModule } from "../policy-as/host/policy_module.ts";
import { WasmMaglevBuilder } from "../policy-as/host/wasm_maglev_builder.ts";
import { Registry } from "../lib/metrics.ts";
import { readCommandLineOrExit } from "../lib/args.ts";

const QUICK = readCommandLineOrExit(Deno.args, {
  command: "bench:policy",
  usage: `usage: deno task bench:policy [--quick]
  Maglev build (WASM vs TypeScript) and flow hash timings. --quick: 3 runs, 100k hashes (a smoke
  test of seconds, not a figure).`,
  options: { quick: { type: "boolean" } },
}, ({ values }) => values.quick === true);

const M = 65537;
const N = 1000;
const WARMUP = QUICK ? 1 : 20;
const RUNS = QUICK ? 3 : 100;

function stats(xs: number[]): { median: number; min: number; p90: number } {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[s.length >> 1]!, min: s[0]!, p90: s[Math.floor(s.length * 0.9)]! };
}

/** Times `a` and `b` alternately so both see the same noise. */
function interleaved(a: () => void, b: () => void): [number[], number[]] {
  for (let i = 0; i < WARMUP; i++) {
    a();
    b();
  }
  const ta: number[] = [];
  const tb: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    let t0 = performance.now();
    a();
    ta.push(performance.now() - t0);
    t0 = performance.now();
    b();
    tb.push(performance.now() - t0);
  }
  return [ta, tb];
}

const fmt = (x: number) => x.toFixed(3).padStart(8);

const bytes = await readBuiltWasm("release");
const policy = await PolicyModule.load(bytes);
const registry = new Registry();
const wasmBuilder = new WasmMaglevBuilder({ current: policy }, { registry });
const tsBuilder = new TsMaglevBuilder();

const equal = benchBackends(N);
const weighted = benchBackends(N, (i) => 1 + (i % 4));
const recEqual = encodeMaglevInput(equal, M);
const recWeighted = encodeMaglevInput(weighted, M);
const recSmall = encodeMaglevInput(equal, 16381);
const tsTable = new Uint32Array(M);

// Same tables, or the comparison is meaningless.
const check = policy.buildMaglev(recEqual, M).table;
maglevFill(recEqual, tsTable);
if (check.some((v, i) => v !== tsTable[i])) throw new Error("WASM and TS tables differ");

const [wCore, tCore] = interleaved(
  () => policy.buildMaglev(recEqual, M),
  () => maglevFill(recEqual, new Uint32Array(M)),
);
const [wE2e, tE2e] = interleaved(
  () => wasmBuilder.build(equal, M),
  () => tsBuilder.build(equal, M),
);
const [wW, tW] = interleaved(
  () => policy.buildMaglev(recWeighted, M),
  () => maglevFill(recWeighted, new Uint32Array(M)),
);
const [wS, tS] = interleaved(
  () => policy.buildMaglev(recSmall, 16381),
  () => maglevFill(recSmall, new Uint32Array(16381)),
);

// Flow hash: the raw export called from JS (what a per-packet caller would pay), the
// PolicyModule wrapper, and the TypeScript reference. Inputs vary per call.
const raw = (await WebAssembly.instantiate(await WebAssembly.compile(bytes as BufferSource), {}))
  .exports as unknown as PolicyExports;
const HASHES = QUICK ? 100_000 : 2_000_000;
function timeHash(fn: (i: number) => number): number {
  let sink = 0;
  for (let i = 0; i < HASHES / 10; i++) sink ^= fn(i);
  const best: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    for (let i = 0; i < HASHES; i++) sink ^= fn(i);
    best.push(((performance.now() - t0) * 1e6) / HASHES);
  }
  if (sink === 0.5) console.log(sink); // keep the loop alive
  return Math.min(...best);
}
const hashNs = timeHash((i) => raw.flow_hash_5tuple(0x0a000001 + i, 0x0a006401, 40000, 80, 6, 0));
const hashApiNs = timeHash((i) =>
  policy.flowHashFiveTuple(
    { saddr: 0x0a000001 + i, daddr: 0x0a006401, sport: 40000, dport: 80, proto: 6 },
    0,
  )
);
const hashTsNs = timeHash((i) =>
  flowHashFiveTuple(
    { saddr: 0x0a000001 + i, daddr: 0x0a006401, sport: 40000, dport: 80, proto: 6 },
    0,
  )
);

const rows: Array<[string, number[], number[]]> = [
  ["M=65537 N=1000 equal, core", wCore, tCore],
  ["M=65537 N=1000 equal, end to end", wE2e, tE2e],
  ["M=65537 N=1000 weights 1..4, core", wW, tW],
  ["M=16381 N=1000 equal, core", wS, tS],
];
console.log(`Maglev build, ms (median of ${RUNS} after ${WARMUP} warm-up, interleaved)`);
console.log(`${"case".padEnd(36)}     wasm   wasm-min       ts     ts-min  ts/wasm`);
for (const [name, w, t] of rows) {
  const a = stats(w);
  const b = stats(t);
  console.log(
    `${name.padEnd(36)} ${fmt(a.median)} ${fmt(a.min)}   ${fmt(b.median)} ${fmt(b.min)} ` +
      `${(b.median / a.median).toFixed(2).padStart(7)}x`,
  );
}
console.log("Published anchors (not measured here):");
console.log("  Maglev paper (NSDI'16), C++, M=65537 N=1000:   1.8 ms");
console.log("  Cilium pkg/maglev, M=16381 N=1000:              8.17 ms");
console.log("  Envoy maglev_lb, M=65537:                       2.2-2.7 ms");
console.log(
  `Flow hash (five-tuple), ns/call: wasm export ${hashNs.toFixed(1)}, via PolicyModule ` +
    `${hashApiNs.toFixed(1)}, TypeScript ${hashTsNs.toFixed(1)}`,
);
const core = stats(wCore).median;
const tsCore = stats(tCore).median;
console.log(JSON.stringify({
  maglev_wasm_ms: Number(core.toFixed(3)),
  maglev_ts_ms: Number(tsCore.toFixed(3)),
  ts_over_wasm: Number((tsCore / core).toFixed(2)),
  maglev_wasm_min_ms: Number(stats(wCore).min.toFixed(3)),
  maglev_wasm_e2e_ms: Number(stats(wE2e).median.toFixed(3)),
  maglev_ts_e2e_ms: Number(stats(tE2e).median.toFixed(3)),
  maglev_wasm_weighted_ms: Number(stats(wW).median.toFixed(3)),
  maglev_wasm_m16381_ms: Number(stats(wS).median.toFixed(3)),
  hash_ns: Number(hashNs.toFixed(2)),
  hash_api_ns: Number(hashApiNs.toFixed(2)),
  hash_ts_ns: Number(hashTsNs.toFixed(2)),
  goal_wasm_le_1_8_ms: core <= 1.8,
  goal_2x_ts: tsCore / core >= 2,
}));
