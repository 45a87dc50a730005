/**
 * A policy swap over the real maps with the tables built on Workers (`node/lb/maps/_maglev_workers.ts`,
 * used when a pass rebuilds 32 tables or more): every table the datapath holds afterwards is, slot
 * for slot, the one the reconciler's own thread builds with the same module, for a swap to a
 * module that fills differently (every table written) and back (every table written again).
 */

import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { Datapath } from "../../node/bpf/mod.ts";
import { captureLogs } from "../../lib/log.ts";
import { createControlPlane } from "../../node/lb/control_plane.ts";
import type { LBMaps } from "../../node/lb/maps/lbmaps.ts";
import { MemoryLBMaps } from "../../node/lb/maps/memory.ts";
import { PolicyHost, WasmMaglevBuilder } from "../../policy-as/host/mod.ts";

const SERVICES = 48;
const build = (name: string) =>
  Deno.readFile(new URL(`../../policy-as/build/${name}.wasm`, import.meta.url));

/** A control plane over `maps` with `SERVICES` services (1..12 backends, some weighted). */
async function plane(maps: LBMaps, workers: number) {
  // A build time budget far from any build: it is wall time, and this test is not about it.
  const policy = await PolicyHost.create({ limits: { buildBudgetMs: 10_000 } });
  ok((await policy.swap(await build("release"))).ok);
  const cp = await createControlPlane(maps, {
    maglev: new WasmMaglevBuilder(policy),
    maglevSize: 4099,
    maglevWorkers: workers,
  });
  cp.start();
  const src = cp.writer.source("k8s");
  const txn = cp.writer.txn();
  for (let i = 1; i <= SERVICES; i++) {
    src.upsertService(txn, { name: `ns/s${i}`, frontends: [{ address: `10.0.100.${i}:80/TCP` }] });
    src.setBackends(txn, {
      service: `ns/s${i}`,
      backends: Array.from({ length: 1 + (i % 12) }, (_, b) => ({
        address: `10.1.${i}.${b + 1}:8080/TCP`,
        ...(i % 5 === 0 && b === 0 ? { weight: 300 } : {}),
      })),
    });
  }
  txn.commit();
  await cp.reconciler.waitIdle();
  /** Swaps `name` in and rebuilds every table, as the agent does (`node/lb/policy_swap.ts`). */
  const swap = async (name: string) => {
    ok((await policy.swap(await build(name))).ok);
    strictEqual(cp.ops.rebuildMaglevTables(), SERVICES);
    cp.reconciler.triggerFullReconcile();
    await cp.reconciler.waitIdle();
  };
  return { cp, swap };
}

rootTest(
  "policy swap with the tables built on workers: the datapath's tables equal the ones built without",
  async () => {
    using _logs = captureLogs();
    const memory = new MemoryLBMaps();
    const mem = await plane(memory, 0);
    using dp = await Datapath.open({ pinDir: null, maxServices: 64 });
    const real = await plane(dp.lbMaps(), 2);
    try {
      const m = real.cp.ops.metrics;
      for (const name of ["fixtures/rotated_fill", "release"]) {
        const memWrites = mem.cp.ops.metrics.holdfast_lbmaps_maglev_writes_total;
        await mem.swap(name);
        const writes = m.holdfast_lbmaps_maglev_writes_total;
        const ahead = m.holdfast_lbmaps_maglev_built_ahead_total;
        await real.swap(name);
        // Every table with 2 backends or more changes (one backend: the same table, not written).
        strictEqual(m.holdfast_lbmaps_maglev_writes_total - writes, SERVICES - SERVICES / 12);
        strictEqual(
          mem.cp.ops.metrics.holdfast_lbmaps_maglev_writes_total - memWrites,
          SERVICES - 4,
        );
        ok(m.holdfast_lbmaps_maglev_built_ahead_total > ahead, `${name}: some built on workers`);
        strictEqual(mem.cp.ops.metrics.holdfast_lbmaps_maglev_built_ahead_total, 0);
        deepStrictEqual(await dp.lbMaps().dump(), await memory.dump(), `${name}: the same tables`);
      }
    } finally {
      await real.cp.stop();
      await mem.cp.stop();
    }
  },
);
