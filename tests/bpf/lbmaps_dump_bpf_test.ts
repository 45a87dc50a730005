/**
 * The maps dump a policy swap's full pass reads (`LBMapsOps.prune`): only the backend IDs the
 * control plane has allocated, so the swap does not decode all 65,536 `hf_backends` slots. A
 * backend changed behind its back inside that range is still written again by the swap; a stray
 * entry above it (it names nothing the control plane wrote) waits for the full pass that reads
 * every ID (every Nth, `readAllBackendIdsEvery`), which removes it.
 */

import { deepStrictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { captureLogs } from "../../lib/log.ts";
import { createControlPlane } from "../../node/lb/control_plane.ts";
import { Datapath } from "../../node/bpf/mod.ts";

rootTest("a pass reads the allocated backend IDs; every Nth periodic pass reads all", async () => {
  using _logs = captureLogs();
  using dp = await Datapath.open({ pinDir: null });
  dp.configure({ srcAddr: "10.1.1.2" });
  const maps = dp.lbMaps();
  const cp = await createControlPlane(maps, { maglevSize: 251, readAllBackendIdsEvery: 3 });
  cp.start();
  try {
    const src = cp.writer.source("k8s");
    const txn = cp.writer.txn();
    src.upsertService(txn, { name: "ns/a", frontends: [{ address: "10.0.100.1:80/TCP" }] });
    src.setBackends(txn, {
      service: "ns/a",
      backends: [1, 2, 3].map((b) => ({ address: `10.1.0.${b}:8080/TCP` })),
    });
    txn.commit();
    await cp.reconciler.waitIdle();
    const backends = async () => (await maps.dump({ tables: false })).backends;
    const written = await backends();
    deepStrictEqual(written.map(([id]) => id), [1, 2, 3]);
    const pass = async (swap: boolean) => {
      if (swap) cp.ops.rebuildMaglevTables();
      cp.reconciler.triggerFullReconcile();
      await cp.reconciler.waitIdle();
    };

    // Behind the control plane's back: backend 2 now points elsewhere, a stray 60000 appears.
    await maps.updateBackend(2, { address: "10.9.9.9", port: 1 });
    await maps.updateBackend(60_000, { address: "10.9.9.10", port: 2 });
    deepStrictEqual(
      (await maps.dump({ tables: false, backendIdsBelow: 4 })).backends.map(([id]) => id),
      [1, 2, 3],
      "a dump below 4 leaves the stray out",
    );
    await pass(true);
    deepStrictEqual(
      await backends(),
      [...written, [60_000, { address: "10.9.9.10", port: 2 }]],
      "the swap wrote backend 2 again and did not read as far as the stray",
    );
    await pass(false);
    deepStrictEqual(
      (await backends()).map(([id]) => id),
      [1, 2, 3, 60_000],
      "the second pass after start read below the allocated IDs too",
    );
    await pass(false);
    deepStrictEqual(await backends(), written, "the third pass read every ID, removed the stray");
  } finally {
    await cp.stop();
  }
});
