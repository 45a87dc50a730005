/**
 * The control plane's BPF reconciler against the real maps (the in-memory target's twin): the
 * same input yields the same maps as MemoryLBMaps, a real packet to the frontend is encapsulated
 * to one of its backends, and a control plane restarted on the pinned maps renumbers nothing.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { createControlPlane } from "../../node/lb/control_plane.ts";
import { MemoryLBMaps } from "../../node/lb/maps/memory.ts";
import { DEFAULT_CONFIG_YAML, FileSource } from "../../node/lb/sources/file_source.ts";
import type { LBMaps, LBMapsContents } from "../../node/lb/maps/lbmaps.ts";
import { Datapath, testRun, XDP } from "../../node/bpf/mod.ts";
import { tcpFrame } from "../../lab/packets.ts";

async function reconcile(target: LBMaps): Promise<void> {
  const cp = await createControlPlane(target);
  const file = new FileSource(cp.writer);
  cp.start();
  file.load(DEFAULT_CONFIG_YAML);
  await cp.waitFrontend("10.0.100.1:80/TCP", { timeoutMs: 10_000 });
  await cp.stop();
}

const plain = (c: LBMapsContents) => ({
  services: c.services,
  backends: c.backends,
  maglev: c.maglev.map(([id, t]) => [id, Array.from(t)]),
});

rootTest(
  "control plane → BpfLBMaps: same maps as in memory, packets forwarded, restart keeps IDs",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-cp-${Deno.pid}`;
    try {
      const memory = new MemoryLBMaps();
      await reconcile(memory);
      const expected = plain(await memory.dump());
      {
        using dp = await Datapath.open({ pinDir });
        dp.configure({ srcAddr: "10.1.1.2" });
        await reconcile(dp.lbMaps());
        deepStrictEqual(
          plain(await dp.lbMaps().dump()),
          expected,
          "BPF maps equal the in-memory target",
        );
        const r = testRun(
          dp.program,
          tcpFrame("10.0.0.1", "10.0.100.1", { sport: 40000, dport: 80 }),
        );
        strictEqual(r.retval, XDP.TX);
        const outerDst = `${r.data[30]}.${r.data[31]}.${r.data[32]}.${r.data[33]}`;
        strictEqual(
          ["10.0.1.1", "10.0.1.2"].includes(outerDst),
          true,
          `encapsulated to a backend, got ${outerDst}`,
        );
      }
      using dp = await Datapath.open({ pinDir });
      await reconcile(dp.lbMaps()); // a fresh control plane restores IDs from dump() first
      deepStrictEqual(
        plain(await dp.lbMaps().dump()),
        expected,
        "nothing renumbered after a restart",
      );
    } finally {
      Datapath.unpin(pinDir);
    }
  },
);
