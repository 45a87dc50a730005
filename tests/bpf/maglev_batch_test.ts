/**
 * Maglev tables installed in batches over the real maps: a reconciler batch stages each
 * frontend's table whole and swaps all of them into hf_maglev together (`stageMaglev`,
 * `commitMaglev`); afterwards every table is in, pinned, readable by path, equal to what the
 * in-memory maps get for the same input, and every service entry names its table. An entry the
 * kernel refuses in a batch is found (one by one) and reported alone; the others go in.
 */

import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { BPF_F_INNER_MAP, BpfMap, Datapath, MAP_TYPE } from "../../node/bpf/mod.ts";
import { MaglevTableStore } from "../../node/bpf/_maglev_tables.ts";
import { captureLogs } from "../../lib/log.ts";
import { createControlPlane } from "../../node/lb/control_plane.ts";
import { MemoryLBMaps } from "../../node/lb/maps/memory.ts";
import type { LBMaps } from "../../node/lb/maps/lbmaps.ts";

/** Writes `n` services of 3 backends each through a control plane over `maps`; waits idle. */
async function reconcile(maps: LBMaps, n: number) {
  const cp = await createControlPlane(maps, { maglevSize: 251 });
  cp.start();
  const src = cp.writer.source("k8s");
  const txn = cp.writer.txn();
  for (let i = 1; i <= n; i++) {
    src.upsertService(txn, { name: `ns/s${i}`, frontends: [{ address: `10.0.100.${i}:80/TCP` }] });
    src.setBackends(txn, {
      service: `ns/s${i}`,
      backends: [1, 2, 3].map((b) => ({ address: `10.1.${i}.${b}:8080/TCP` })),
    });
  }
  txn.commit();
  await cp.reconciler.waitIdle();
  return cp;
}

rootTest(
  "a reconciler batch installs its Maglev tables together: all in, pinned, equal to the in-memory maps",
  async () => {
    using _logs = captureLogs();
    const pinDir = `/sys/fs/bpf/hf-test-mgbatch-${Deno.pid}`;
    try {
      const mem = new MemoryLBMaps();
      await (await reconcile(mem, 40)).stop();
      {
        using dp = await Datapath.open({ pinDir, maxServices: 64 });
        const cp = await reconcile(dp.lbMaps(), 40);
        strictEqual(cp.ops.metrics.holdfast_lbmaps_maglev_writes_total, 40);
        await cp.stop();
        deepStrictEqual(await dp.lbMaps().dump(), await mem.dump());
        for (const [sid, table] of await mem.dump().then((d) => d.maglev)) {
          using pinned = BpfMap.fromPinned(`${pinDir}/hf_maglev_tables/${sid}`);
          const { values, count } = pinned.lookupBatch(1024);
          deepStrictEqual(new Uint32Array(values.buffer.slice(0, count * 4)), table);
        }
      }
      // A restarted agent reads the same tables back through their pins.
      using dp = await Datapath.open({ pinDir });
      deepStrictEqual(await dp.lbMaps().dump(), await mem.dump());
    } finally {
      Datapath.unpin(pinDir);
    }
  },
);

rootTest(
  "a staged table the kernel refuses is reported alone; the rest of its batch goes in",
  () => {
    using logs = captureLogs();
    using template = BpfMap.create(MAP_TYPE.ARRAY, {
      name: "hf_t_inner",
      keySize: 4,
      valueSize: 4,
      maxEntries: 1,
      flags: BPF_F_INNER_MAP,
    });
    using outer = BpfMap.create(MAP_TYPE.ARRAY_OF_MAPS, {
      name: "hf_t_outer",
      keySize: 4,
      valueSize: 4,
      maxEntries: 8, // service IDs 0..7: 9 is out of range
      innerMapFd: template.fd,
    });
    using store = new MaglevTableStore(outer, null);
    store.stage(1, new Uint32Array([1, 2, 1]));
    store.stage(9, new Uint32Array([3]));
    store.stage(2, new Uint32Array([2, 2]));
    store.stage(2, new Uint32Array([4, 5, 4, 5, 4])); // staged again: this one
    store.stage(3, new Uint32Array([6]));
    const failed = store.commit();
    deepStrictEqual([...failed.keys()], [9]);
    ok(/E2BIG|Argument list too long|errno 7/.test(failed.get(9)!.message), failed.get(9)!.message);
    deepStrictEqual(store.readAll().tables.map(([id, t]) => [id, [...t]]), [
      [1, [1, 2, 1]],
      [2, [4, 5, 4, 5, 4]],
      [3, [6]],
    ]);
    ok(logs.records.some((r) => r.msg.startsWith("Maglev table batch refused")));
    deepStrictEqual(store.commit(), new Map(), "nothing stays staged");
  },
);
