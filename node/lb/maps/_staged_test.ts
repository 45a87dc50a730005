import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs } from "../../../lib/log.ts";
import { waitUntil } from "../_testing.ts";
import { createControlPlane } from "../control_plane.ts";
import { frontendByAddress } from "../tables/frontend.ts";
import { MemoryLBMaps, StagedMemoryLBMaps } from "./memory.ts";
import type { MaglevBuilder } from "../../../policy-as/host/maglev_input.ts";
import { TsMaglevBuilder } from "../../../policy-as/host/maglev_ts.ts";

const address = (i: number) => `10.0.100.${i}:80/TCP`;

/** The reference builder; with `rotate` set, its tables shifted by one slot (another module). */
const builder = { ts: new TsMaglevBuilder(), rotate: false };
const maglev: MaglevBuilder = {
  build: (backends, m, out, ids) => {
    const t = builder.ts.build(backends, m, out, ids);
    if (builder.rotate) t.set([...t.subarray(1), t[0]!]);
    return t;
  },
};

/** A started control plane over `maps` and a writer of `n` services (one frontend each). */
async function plane(maps: MemoryLBMaps, options: { maxStaged?: number } = {}) {
  const cp = await createControlPlane(maps, {
    maglevSize: 251,
    maglev,
    retry: { minMs: 1, maxMs: 4, jitter: 0 },
    ...options,
  });
  cp.start();
  const src = cp.writer.source("k8s");
  /** Services 1..n, service i with backends 10.1.i.1..k. */
  const write = async (n: number, k: number) => {
    const txn = cp.writer.txn();
    for (let i = 1; i <= n; i++) {
      src.upsertService(txn, { name: `ns/s${i}`, frontends: [{ address: address(i) }] });
      const backends = Array.from({ length: k }, (_, b) => ({
        address: `10.1.${i}.${b + 1}:8080/TCP`,
      }));
      src.setBackends(txn, { service: `ns/s${i}`, backends });
    }
    txn.commit();
    await cp.reconciler.waitIdle();
  };
  const status = (a: string) =>
    cp.tables.frontends.get(cp.db.readTxn(), frontendByAddress(a))?.status;
  return { cp, write, status };
}

Deno.test("staged Maglev installs: a reconciler batch installs all its tables in one commit; the maps end as unstaged ones do", async () => {
  using _logs = captureLogs();
  const plain = new MemoryLBMaps(), staged = new StagedMemoryLBMaps();
  const a = await plane(plain), b = await plane(staged);
  for (const [n, k] of [[30, 3], [30, 4], [20, 4]] as const) {
    await a.write(n, k);
    await b.write(n, k);
    deepStrictEqual(await staged.dump(), await plain.dump());
  }
  // Cold start: 30 tables in one commit; all 30 changed: one more; 20 written unchanged: none.
  deepStrictEqual(staged.commits, [30, 30]);
  deepStrictEqual(staged.calls.stageMaglev, 60);
  // A policy swap rebuilds every table: the same tables are not written again…
  const swap = async () => {
    for (const p of [a, b]) {
      p.cp.ops.rebuildMaglevTables();
      p.cp.reconciler.triggerFullReconcile();
      await p.cp.reconciler.waitIdle();
    }
  };
  await swap();
  deepStrictEqual(staged.commits, [30, 30]);
  deepStrictEqual(b.cp.ops.metrics.holdfast_lbmaps_maglev_unchanged_total, 30);
  // …unless one is gone behind the reconciler's back; other tables: one batch for all.
  staged.maglev.delete(b.cp.ops.serviceId(address(7))!);
  plain.maglev.delete(a.cp.ops.serviceId(address(7))!);
  await swap();
  deepStrictEqual(staged.commits, [30, 30, 1]);
  builder.rotate = true;
  try {
    await swap();
  } finally {
    builder.rotate = false;
  }
  deepStrictEqual(staged.commits, [30, 30, 1, 30]);
  deepStrictEqual(staged.staged.size, 0);
  deepStrictEqual(await staged.dump(), await plain.dump());
  deepStrictEqual(staged.violations, [], "no entry named a table before it was in");
  deepStrictEqual(b.cp.ops.metrics.holdfast_lbmaps_maglev_writes_total, 91);
  await a.cp.stop();
  await b.cp.stop();
});

Deno.test("staged Maglev installs: at most maxStaged tables wait; the batch commits early", async () => {
  using _logs = captureLogs();
  const staged = new StagedMemoryLBMaps();
  const { cp, write } = await plane(staged, { maxStaged: 4 });
  await write(10, 2);
  deepStrictEqual(staged.commits, [4, 4, 2]);
  deepStrictEqual(staged.services.size, 10);
  deepStrictEqual(staged.violations, []);
  await cp.stop();
});

Deno.test("staged Maglev installs: a table the commit refuses fails only its frontend, which keeps its old table and is retried", async () => {
  using logs = captureLogs();
  const staged = new StagedMemoryLBMaps();
  const { cp, write, status } = await plane(staged);
  await write(5, 2);
  const sid3 = cp.ops.serviceId(address(3))!, sid5 = cp.ops.serviceId(address(5))!;
  const before = staged.maglev.get(sid3)!.slice();
  const entryBefore = staged.services.get("10.0.100.3:80/TCP")![1];
  staged.failCommit.add(sid3);
  // Services 1..5 get a third backend; service 6 is new: one batch of 6.
  const done = write(6, 3);
  const failing = () => status(address(3))?.kind === "error";
  await waitUntil(failing, "the refused table's error");
  deepStrictEqual(
    status(address(3))?.error,
    `Cannot install the Maglev table of frontend "${address(3)}" (service ID ${sid3}): ` +
      `Injected fault: install of Maglev table ${sid3} failed`,
  );
  deepStrictEqual(status(address(5))?.kind, "done");
  deepStrictEqual(new Set(staged.maglev.get(sid5)).size, 3, "the others are in");
  deepStrictEqual(staged.maglev.get(sid3), before, "the refused one keeps its old table");
  deepStrictEqual(staged.services.get("10.0.100.3:80/TCP")![1], entryBefore, "and its entry");
  ok(
    logs.records.some((r) => r.msg === "update failed, will retry" && r.frontend === address(3)),
  );
  staged.failCommit.clear();
  await done;
  deepStrictEqual(status(address(3))?.kind, "done");
  deepStrictEqual(new Set(staged.maglev.get(sid3)).size, 3);
  deepStrictEqual(staged.services.get("10.0.100.3:80/TCP")![1].backendCount, 3);
  deepStrictEqual(staged.violations, []);
  await cp.stop();
});
