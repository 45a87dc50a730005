import { deepStrictEqual, ok } from "node:assert/strict";
import { waitUntil } from "../_testing.ts";
import { MaglevTables, MIN_AHEAD, tableDigest } from "./_maglev.ts";
import { TsMaglevBuilder } from "../../../policy-as/host/maglev_ts.ts";

Deno.test("MaglevTables: the same keys, IDs and M reuse the table; a reused table is never overwritten", () => {
  const tables = new MaglevTables(new TsMaglevBuilder());
  const keys = [{ key: "10.1.0.1:80", weight: 100 }, { key: "10.1.0.2:80", weight: 100 }];
  const first = tables.table(keys, [7, 9], 251);
  ok(!first.reused && first.table.every((v) => v === 7 || v === 9));
  const copy = first.table.slice();
  const again = tables.table([...keys], [7, 9], 251);
  ok(again.reused && again.table === first.table);
  // Two further builds: the buffers alternate, and the one written last stays intact.
  const other = tables.table(keys.slice(0, 1), [3], 251);
  deepStrictEqual([...first.table], [...copy], "the previous table is still being written");
  const third = tables.table(keys, [7, 8], 251);
  ok(!third.reused && third.table !== other.table);
  deepStrictEqual(new Set(other.table), new Set([3]));
});

async function wasmBuilder(file = "release.wasm") {
  const { PolicyModule } = await import("../../../policy-as/host/policy_module.ts");
  const { WasmMaglevBuilder } = await import("../../../policy-as/host/wasm_maglev_builder.ts");
  const bytes = await Deno.readFile(new URL(`../../../policy-as/build/${file}`, import.meta.url));
  // A build time budget far from any build (it is wall time; these tests are not about it).
  return new WasmMaglevBuilder({
    current: await PolicyModule.load(bytes, { buildBudgetMs: 10_000 }),
  });
}

/** `count` frontends of 1..12 backends (one weighted), IDs from 1000 up. */
function aheadJobs(count: number, m: number) {
  return Array.from({ length: count }, (_, i) => {
    const n = 1 + (i % 12);
    const keys = Array.from({ length: n }, (_, b) => ({
      key: `10.9.${i}.${b + 1}:8080`,
      weight: i % 5 === 0 && b === 0 ? 300 : 100,
    }));
    return { address: `10.100.0.${i}:80/TCP`, keys, ids: keys.map((_, b) => 1000 + 16 * i + b), m };
  });
}

Deno.test("MaglevTables: tables built ahead on workers equal, slot for slot and digest, those built on this thread", async () => {
  const builder = await wasmBuilder();
  const ahead = new MaglevTables(builder, 2);
  const here = new MaglevTables(builder, 0);
  for (const m of [251, 16381]) {
    const jobs = aheadJobs(MIN_AHEAD + 8, m);
    ok(ahead.buildAhead(jobs), "a pass of enough tables builds ahead");
    ok(!here.buildAhead(jobs), "no workers: nothing ahead");
    let built = 0;
    // Let the workers start (a job none has started when it is asked for is built here): wait
    // for a worker's claim, not for a guessed time.
    await waitUntil(() => ahead.aheadStarted > 0, "a table started on a worker");
    // One skipped (a retry elsewhere) and one whose IDs changed since: both built here instead.
    const changed = jobs[5]!;
    for (const [i, job] of jobs.entries()) {
      if (i === 3) continue;
      const ids = job === changed ? job.ids.map((id) => id + 1) : job.ids;
      const a = await ahead.tableFor(job.address, job.keys, ids, m);
      if (a.ahead) built++;
      const b = await here.tableFor(job.address, job.keys, ids, m);
      deepStrictEqual(a.digest, b.digest, `digest of ${job.address}`);
      ok(a.table.every((v, s) => v === b.table[s]), `slots of ${job.address}`);
      deepStrictEqual(a.digest, tableDigest(a.table));
    }
    ahead.endAhead(); // the workers stay up for the next pass (M = 16,381 reuses them)
    ok(built > 0 && built <= jobs.length - 2, `${built} built ahead`);
  }
  ahead.close();
});

Deno.test("MaglevTables: a small pass, or a builder without a WASM module, stays on this thread", async () => {
  const small = new MaglevTables(await wasmBuilder(), 2);
  ok(!small.buildAhead(aheadJobs(MIN_AHEAD - 1, 251)));
  const ts = new MaglevTables(new TsMaglevBuilder(), 2);
  ok(!ts.buildAhead(aheadJobs(MIN_AHEAD + 1, 251)));
  const job = aheadJobs(1, 251)[0]!;
  const built = await small.tableFor(job.address, job.keys, job.ids, 251);
  ok(!built.ahead);
  deepStrictEqual(built.digest, tableDigest(built.table));
});

Deno.test("MaglevTables: a build that traps on a worker is built on this thread (the builder's fallback)", async () => {
  const { PolicyModule } = await import("../../../policy-as/host/policy_module.ts");
  const { WasmMaglevBuilder } = await import("../../../policy-as/host/wasm_maglev_builder.ts");
  const { Registry } = await import("../../../lib/metrics.ts");
  const { captureLogs } = await import("../../../lib/log.ts");
  const url = new URL("../../../policy-as/build/fixtures/trap_build.wasm", import.meta.url);
  const module = await PolicyModule.load(await Deno.readFile(url));
  const fallback = new TsMaglevBuilder();
  using logs = captureLogs();
  {
    const builder = new WasmMaglevBuilder({ current: module }, {
      fallback,
      registry: new Registry(),
    });
    const tables = new MaglevTables(builder, 1);
    // Traps for N >= 1000: every job of this pass.
    const jobs = Array.from({ length: MIN_AHEAD }, (_, i) => {
      const keys = Array.from(
        { length: 1000 },
        (_, b) => ({ key: `10.8.${i}.${b}:80`, weight: 1 }),
      );
      return { address: `10.100.1.${i}:80/TCP`, keys, ids: keys.map((_, b) => b + 1), m: 4099 };
    });
    ok(tables.buildAhead(jobs));
    for (const job of jobs.slice(0, 3)) {
      const got = await tables.tableFor(job.address, job.keys, job.ids, job.m);
      ok(!got.ahead);
      const want = fallback.build(job.keys, job.m, undefined, job.ids);
      ok(got.table.every((v, s) => v === want[s]));
    }
    tables.endAhead();
    tables.close();
    ok(logs.records.some((r) => r.msg === "maglev build failed in policy module"));
  }
});

Deno.test("tableDigest: one value in every slot is named exactly (value and length), apart from hashes", () => {
  const one = (v: number, m: number) => new Uint32Array(m).fill(v);
  const names = [one(1, 251), one(2, 251), one(1, 1021), one(0, 251), one(0xffffffff, 131071)]
    .map(tableDigest);
  deepStrictEqual(new Set(names).size, names.length);
  ok(names.every((d) => d < 0 && Number.isSafeInteger(d)));
  deepStrictEqual(tableDigest(one(7, 251)), names[0]! - 6 * 0x40000);
  const mixed = one(1, 251);
  mixed[250] = 2;
  const d = tableDigest(mixed);
  ok(d >= 0 && d !== tableDigest(one(1, 251)));
});
