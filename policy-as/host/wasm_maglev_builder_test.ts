// Quality of the WASM Maglev tables against the paper's criteria, bad input, parity with the
// plain-TypeScript fill (bit for bit), and the fallback on a trapping module.
import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { expectInputError, readBuiltWasm, slowestAcceptedBackends } from "./_testing.ts";
import { benchBackends } from "./gen_vectors.ts";
import type { MaglevBackend } from "./maglev_input.ts";
import { TsMaglevBuilder } from "./maglev_ts.ts";
import { PolicyModule } from "./policy_module.ts";
import { PolicyHost } from "./policy_host.ts";
import { WasmMaglevBuilder } from "./wasm_maglev_builder.ts";

const M = 65537;
const policy = await PolicyModule.load(await readBuiltWasm("release"));
const builder = new WasmMaglevBuilder({ current: policy }, { registry: new Registry() });

function slotCounts(table: Uint32Array, n: number): number[] {
  const counts = new Array<number>(n + 1).fill(0);
  for (const v of table) counts[v]!++;
  return counts;
}

Deno.test("M=65537, N=1000 equal weights: every slot set, max/avg slots per backend <= 1.01", () => {
  const table = builder.build(benchBackends(1000), M);
  const counts = slotCounts(table, 1000);
  if (counts[0] !== 0) throw new Error(`${counts[0]} empty slots`);
  const per = counts.slice(1);
  const ratio = Math.max(...per) / (M / 1000);
  console.log(`max/avg = ${ratio.toFixed(4)} (min ${Math.min(...per)}, max ${Math.max(...per)})`);
  if (ratio > 1.01) throw new Error(`max/avg ${ratio} > 1.01`);
});

Deno.test("removing 5 of 1000 backends moves few other slots (paper's disruption)", () => {
  const all = benchBackends(1000);
  const removed = new Set([3, 250, 500, 750, 996]);
  const kept = all.filter((_, i) => !removed.has(i));
  const before = builder.build(all, M);
  const after = builder.build(kept, M);
  let ownedByRemoved = 0;
  let moved = 0;
  for (let s = 0; s < M; s++) {
    const oldIdx = before[s]! - 1;
    if (removed.has(oldIdx)) {
      ownedByRemoved++;
      continue;
    }
    if (kept[after[s]! - 1]!.key !== all[oldIdx]!.key) moved++;
  }
  const pct = (100 * moved) / M;
  console.log(
    `disruption: ${ownedByRemoved} slots of the removed backends reassigned (unavoidable); ` +
      `${moved} other slots changed owner = ${pct.toFixed(3)}% of M`,
  );
  if (pct > 2.5) throw new Error(`${moved} other slots changed (${pct}% > 2.5%)`);
});

Deno.test("weighted: slot shares proportional to weights within 1%", () => {
  // 10 backends, weights 1..10: each backend's share within 1% (relative) of w / sum(w).
  const small: MaglevBackend[] = Array.from({ length: 10 }, (_, i) => ({
    key: `w-${i}`,
    weight: i + 1,
  }));
  const counts = slotCounts(builder.build(small, M), 10);
  for (let i = 0; i < 10; i++) {
    const want = (M * (i + 1)) / 55;
    const err = Math.abs(counts[i + 1]! - want) / want;
    if (err > 0.01) throw new Error(`backend ${i}: ${counts[i + 1]} slots, want ${want} (${err})`);
  }
  // 1000 backends in weight classes 1, 2, 4: each class's share within 1% of its weight share.
  const big = benchBackends(1000, (i) => [1, 2, 4][i % 3]!);
  const c = slotCounts(builder.build(big, M), 1000);
  const sumW = big.reduce((s, b) => s + b.weight, 0);
  for (const w of [1, 2, 4]) {
    let got = 0;
    let weight = 0;
    big.forEach((b, i) => {
      if (b.weight === w) {
        got += c[i + 1]!;
        weight += w;
      }
    });
    const want = (M * weight) / sumW;
    const err = Math.abs(got - want) / want;
    if (err > 0.01) throw new Error(`weight class ${w}: ${got} slots, want ${want} (${err})`);
  }
});

Deno.test("deterministic whatever the input order; indices follow the caller's order", () => {
  const backends = benchBackends(300, (i) => 1 + (i % 5));
  const a = builder.build(backends, 16381);
  const shuffled = backends.map((b, i) => ({ b, r: (i * 7919) % 300 })).sort((x, y) => x.r - y.r)
    .map((x) => x.b);
  const b = builder.build(shuffled, 16381);
  for (let s = 0; s < 16381; s++) {
    if (backends[a[s]! - 1]!.key !== shuffled[b[s]! - 1]!.key) {
      throw new Error(`slot ${s} owner differs with input order`);
    }
  }
});

Deno.test("WASM and plain-TypeScript fills give identical tables", () => {
  const ts = new TsMaglevBuilder();
  const cases: Array<[MaglevBackend[], number]> = [
    [benchBackends(1000), M],
    [benchBackends(1000, (i) => 1 + (i % 7)), M],
    [benchBackends(250), 251],
    [benchBackends(1, () => 3), 131071],
    [benchBackends(4000, (i) => (i % 11 === 0 ? 0 : 1 + (i % 3))), 131071],
    [benchBackends(50, (i) => i % 4), 1021],
    [[{ key: "10.0.1.5:8080", weight: 1 }, { key: "10.0.1.6:8080", weight: 2 }], 251],
    [[], 251],
    [slowestAcceptedBackends(1000, 65537), 65537],
    [slowestAcceptedBackends(100, 16381), 16381],
  ];
  for (const [backends, m] of cases) {
    const w = builder.build(backends, m);
    const t = ts.build(backends, m);
    const diff = w.findIndex((v, i) => v !== t[i]);
    if (diff !== -1) throw new Error(`N=${backends.length} M=${m}: slot ${diff} differs`);
  }
});

Deno.test("values (e.g. backend IDs) in the slots: as the TypeScript builder writes them", () => {
  const backends = benchBackends(10, (i) => 1 + (i % 2));
  const ids = backends.map((_, i) => 70000 + i);
  const w = builder.build(backends, 16381, undefined, ids);
  const t = new TsMaglevBuilder().build(backends, 16381, undefined, ids);
  const diff = w.findIndex((v, i) => v !== t[i]);
  if (diff !== -1 || w[0]! < 70000) throw new Error(`slot ${diff} differs`);
});

Deno.test("bad input: empty → all-zero table; weight 0 excluded; N > M, non-prime M rejected", () => {
  const empty = builder.build([], 251);
  if (empty.length !== 251 || empty.some((v) => v !== 0)) throw new Error("N=0 table not empty");
  const allZero = builder.build([{ key: "a", weight: 0 }], 251);
  if (allZero.some((v) => v !== 0)) throw new Error("weight-0-only table not empty");
  const t = builder.build([{ key: "a", weight: 0 }, { key: "b", weight: 1 }], 251);
  if (t.some((v) => v !== 2)) throw new Error("weight-0 backend got slots");
  expectInputError(
    () => builder.build(benchBackends(252), 251),
    "252 backends exceed table size M=251",
  );
  expectInputError(() => builder.build(benchBackends(3), 65536), "M=65536: must be prime");
  expectInputError(() => builder.build(benchBackends(3), 241), "M=241: must be a prime in 251..");
  expectInputError(() => builder.build(benchBackends(3), 131101), "prime in 251..131071");
  expectInputError(
    () => builder.build([{ key: "a", weight: 1 }, { key: "a", weight: 2 }], 251),
    `"a" appears twice`,
  );
  expectInputError(() => builder.build([{ key: "a", weight: 1.5 }], 251), "weight 1.5");
  expectInputError(() => builder.build([{ key: "a", weight: -1 }], 251), "weight -1");
  expectInputError(() => builder.build([{ key: "a", weight: 65536 }], 251), "0..65535");
});

Deno.test("a trapping module falls back to the TypeScript builder, logged and counted", async () => {
  const trapping = await PolicyModule.load(await readBuiltWasm("fixtures/trap_build"));
  const registry = new Registry();
  const b = new WasmMaglevBuilder({ current: trapping }, {
    fallback: new TsMaglevBuilder(),
    registry,
  });
  using logs = captureLogs();
  const table = b.build(benchBackends(1000), M);
  if (table.includes(0)) throw new Error("fallback table has empty slots");
  if (!logs.records.some((r) => r.msg === "maglev build failed in policy module")) {
    throw new Error("no log line");
  }
  if (!registry.expose().includes("holdfast_policy_build_failures_total 1")) {
    throw new Error(registry.expose());
  }
  const noFallback = new WasmMaglevBuilder({ current: trapping }, { registry });
  try {
    noFallback.build(benchBackends(1000), M);
  } catch (e) {
    if ((e as Error).message.includes("trapped in maglev_build")) return;
    throw e;
  }
  throw new Error("trap without fallback did not throw");
});

Deno.test("no module serving yet (the agent's own rejected at start): the fallback builds every table", async () => {
  const host = await PolicyHost.create({ registry: new Registry() });
  const b = new WasmMaglevBuilder(host, {
    fallback: new TsMaglevBuilder(),
    registry: new Registry(),
  });
  strictEqual(b.fillModule(), undefined, "no module for worker fills");
  const backends = benchBackends(10);
  deepStrictEqual(b.build(backends, M), new TsMaglevBuilder().build(backends, M));
  const bare = new WasmMaglevBuilder(host, { registry: new Registry() });
  throws(() => bare.build(backends, M), /no policy module is serving/);
});
