/**
 * Maglev tables pinned beside the other maps: written tables appear as pins under
 * `PIN_DIR/hf_maglev_tables/<service ID>`, a restart reads them back by path, a deleted table
 * leaves no pin, `Datapath.unpin` leaves nothing. A table without a pin (maps pinned by a version
 * that did not pin tables) is opened by ID and pinned on the spot when the kernel permits it, and
 * a stale pin (no table in hf_maglev) is removed at start. The refusal of opening by ID without
 * CAP_SYS_ADMIN is shown with real capabilities in tests/k8s_manifests/agent_caps_test.ts.
 */

import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { BpfMap, Datapath } from "../../node/bpf/mod.ts";
import { captureLogs } from "../../lib/log.ts";
import { isBpffs, unlinkPath } from "../../node/bpf/_ffi.ts";

function pinned(path: string): number | null {
  try {
    using m = BpfMap.fromPinned(path);
    return m.info().id;
  } catch {
    return null;
  }
}

rootTest(
  "Maglev tables are pinned, read back by path after a restart, unpinned on delete",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-mgpins-${Deno.pid}`;
    const dir = `${pinDir}/hf_maglev_tables`;
    try {
      {
        using dp = await Datapath.open({ pinDir, maxServices: 16 });
        const lb = dp.lbMaps();
        await lb.updateMaglev(3, new Uint32Array([1, 2, 1, 2, 1]));
        await lb.updateMaglev(4, new Uint32Array([2, 2, 2]));
        await lb.updateMaglev(4, new Uint32Array([1, 1, 1])); // replaced: one pin, the new map
        await lb.updateMaglev(9, new Uint32Array([1]));
        await lb.deleteMaglev(9);
        ok(pinned(`${dir}/3`) !== null && pinned(`${dir}/4`) !== null);
        strictEqual(pinned(`${dir}/9`), null, "a deleted table leaves no pin");
      }
      {
        // restart: the tables come back through their pins
        using dp = await Datapath.open({ pinDir });
        const ids = await dp.lbMaps().dump({ tables: false }); // which tables exist, none read
        deepStrictEqual(ids.maglev.map(([id, t]) => [id, t.length]), [[3, 0], [4, 0]]);
        const dump = await dp.lbMaps().dump();
        deepStrictEqual(dump.maglev.map(([id, t]) => [id, [...t]]), [
          [3, [1, 2, 1, 2, 1]],
          [4, [1, 1, 1]],
        ]);
      }
      {
        // an older version's maps: table 3 not pinned; a stale pin for 7 (no table there)
        unlinkPath(`${dir}/3`);
        using stale = BpfMap.fromPinned(`${dir}/4`);
        stale.pin(`${dir}/7`);
      }
      {
        using logs = captureLogs();
        using dp = await Datapath.open({ pinDir });
        const lb = dp.lbMaps();
        strictEqual(pinned(`${dir}/7`), null, "the stale pin is removed at start");
        const dump = await lb.dump();
        deepStrictEqual(dump.maglev.map(([id, t]) => [id, [...t]]), [
          [3, [1, 2, 1, 2, 1]],
          [4, [1, 1, 1]],
        ]);
        ok(pinned(`${dir}/3`) !== null, "opened by ID (root here) and pinned again");
        ok(
          logs.records.some((r) => r.msg.startsWith("Maglev tables pinned") && r.tables === 1),
          JSON.stringify(logs.records),
        );
        ok(
          logs.records.some((r) => r.msg === "stale Maglev table pins removed" && r.removed === 1),
        );
      }
    } finally {
      Datapath.unpin(pinDir);
    }
    strictEqual(isBpffs(pinDir), false, "Datapath.unpin removes the table pins and the directory");
  },
);

rootTest(
  "unpinned datapath: tables are held by the process and dumped without opening by ID",
  async () => {
    using dp = await Datapath.open({ pinDir: null });
    const lb = dp.lbMaps();
    await lb.updateMaglev(2, new Uint32Array([1, 2, 3]));
    await lb.updateMaglev(2, new Uint32Array([3, 2, 1]));
    await lb.updateMaglev(5, new Uint32Array([4]));
    await lb.deleteMaglev(5);
    const dump = await lb.dump();
    deepStrictEqual(dump.maglev.map(([id, t]) => [id, [...t]]), [[2, [3, 2, 1]]]);
  },
);
