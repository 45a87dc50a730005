import { deepStrictEqual } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { allExportsTrapping, handMadeWasm, readBuiltWasm } from "./_testing.ts";
import { benchBackends } from "./gen_vectors.ts";
import { TsMaglevBuilder } from "./maglev_ts.ts";
import { PolicyHost } from "./policy_host.ts";
import { tableDigest } from "./table_digest.ts";
import { WasmMaglevBuilder } from "./wasm_maglev_builder.ts";

const release = await readBuiltWasm("release");
const debug = await readBuiltWasm("debug");

Deno.test("first swap installs; a bad swap keeps the old module serving, logged and counted", async () => {
  const registry = new Registry();
  const host = await PolicyHost.create({ registry });
  if (host.ready) throw new Error("ready before any swap");
  using logs = captureLogs();
  const first = await host.swap(release, { source: "release.wasm" });
  if (!first.ok) throw new Error(first.error);
  const serving = host.current;

  const bad: Array<[Uint8Array, string]> = [
    [await readBuiltWasm("fixtures/wrong_hash"), "vectors"],
    [await readBuiltWasm("fixtures/trap_build"), "trap"],
    [handMadeWasm({ functions: allExportsTrapping(9), memoryPages: 1 }), "abi"],
    [handMadeWasm({ functions: { abi_version: 1 }, memoryPages: 1 }), "exports"],
  ];
  for (const [bytes, reason] of bad) {
    const r = await host.swap(bytes, { source: reason });
    if (r.ok || r.reason !== reason) throw new Error(`expected ${reason}: ${JSON.stringify(r)}`);
    if (r.serving !== first.digest) throw new Error("result does not name the serving module");
    if (host.current !== serving) throw new Error("old module no longer serving");
  }
  const second = await host.swap(debug, { source: "debug.wasm" });
  if (!second.ok || second.previous !== first.digest) throw new Error(JSON.stringify(second));

  const text = registry.expose();
  for (
    const line of [
      "holdfast_policy_swaps_total 2",
      'reason="vectors"} 1',
      'reason="trap"} 1',
      `holdfast_policy_module{digest="${first.digest}"} 0`,
      `holdfast_policy_module{digest="${second.digest}"} 1`,
    ]
  ) {
    if (!text.includes(line)) throw new Error(`metrics lack "${line}":\n${text}`);
  }
  const msgs = logs.records.map((r) => `${r.msg}:${r.reason ?? ""}`);
  const want = [
    "policy module swapped:",
    "policy module rejected:vectors",
    "policy module rejected:trap",
    "policy module rejected:abi",
    "policy module rejected:exports",
    "policy module swapped:",
  ];
  deepStrictEqual(msgs, want, msgs.join(", "));
});

Deno.test("no module serving yet: current throws a clear error", async () => {
  const host = await PolicyHost.create({ registry: new Registry() });
  using _logs = captureLogs();
  const r = await host.swap(new Uint8Array([0, 1, 2]));
  if (r.ok || r.reason !== "compile") throw new Error(JSON.stringify(r));
  try {
    host.current;
  } catch (e) {
    if ((e as Error).message.includes("no module has passed validation")) return;
    throw e;
  }
  throw new Error("current returned without a module");
});

Deno.test("hot swap under load: readers only ever see complete, unchanging tables", async () => {
  const registry = new Registry();
  using _logs = captureLogs(); // keep the 12 swap/reject lines out of the test output
  // The build time budget is not what this test is about: on a loaded machine a validation that
  // shares its thread with the reader below can run over 50 ms and reject a good module.
  const host = await PolicyHost.create({ registry, limits: { buildBudgetMs: 2_000 } });
  if (!(await host.swap(release)).ok) throw new Error("release rejected");
  const builder = new WasmMaglevBuilder(host, { registry });
  const sets = [benchBackends(1000), benchBackends(995), benchBackends(600, (i) => 1 + (i % 3))];
  const m = 65537;
  const ts = new TsMaglevBuilder();
  const expected = new Set(await Promise.all(sets.map((s) => tableDigest(ts.build(s, m)))));

  // The "published" table, as a reconciler would hand it to the datapath.
  let published = builder.build(sets[0]!, m);
  let stop = false;
  let lookups = 0;
  let checks = 0;
  const held: Array<{ table: Uint32Array; digest: string }> = [];
  const reader = (async () => {
    const deadline = Date.now() + 10_000;
    let flow = 1;
    while (!stop && Date.now() < deadline) {
      const t = published;
      for (let i = 0; i < 2000; i++) {
        flow = (Math.imul(flow, 1103515245) + 12345) >>> 0;
        if (t[flow % m] === 0) throw new Error(`lookup hit an empty slot ${flow % m}`);
        lookups++;
      }
      const digest = await tableDigest(t);
      if (!expected.has(digest)) throw new Error(`reader saw an unknown table ${digest}`);
      held.push({ table: t, digest });
      checks++;
      await new Promise((r) => setTimeout(r, 0));
    }
  })();

  const bad = [
    await readBuiltWasm("fixtures/wrong_hash"),
    await readBuiltWasm("fixtures/trap_build"),
  ];
  let swaps = 0;
  let rejections = 0;
  for (let round = 0; round < 30; round++) {
    published = builder.build(sets[round % sets.length]!, m);
    if (round % 5 === 2) {
      const r = await host.swap(round % 10 === 2 ? debug : release);
      if (!r.ok) throw new Error(`a good module was rejected (${r.reason}): ${r.error}`);
      swaps++;
    }
    if (round % 5 === 4) !(await host.swap(bad[round % 2]!)).ok && rejections++;
    await new Promise((r) => setTimeout(r, 1));
  }
  stop = true;
  await reader;
  // Tables held earlier must be byte-for-byte what they were when first read.
  for (const h of held) {
    if ((await tableDigest(h.table)) !== h.digest) throw new Error("a held table changed");
  }
  console.log(
    `lookups ${lookups}, table checks ${checks}, swaps ${swaps}, rejected swaps ${rejections}`,
  );
  if (checks < 10 || swaps < 5 || rejections < 5) throw new Error("load too light to count");
});
