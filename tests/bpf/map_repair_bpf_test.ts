/**
 * The periodic full reconciliation against the real maps: entries removed behind the control
 * plane's back with `bpftool` (a service entry, a Maglev table, a backend) come back on the next
 * pass, each logged as `repaired map entry`, and the frontend forwards packets again.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { captureLogs } from "../../lib/log.ts";
import { createControlPlane } from "../../node/lb/control_plane.ts";
import { FileSource } from "../../node/lb/sources/file_source.ts";
import type { LBMapsContents } from "../../node/lb/maps/lbmaps.ts";
import { Datapath, testRun, XDP } from "../../node/bpf/mod.ts";
import { run } from "../../lab/command.ts";
import { tcpFrame } from "../../lab/packets.ts";

const CONFIG = `services:
  - name: default/demo
    frontends: [{ address: 10.0.100.1:80/TCP, portName: http }]
    backends:
      - { address: 10.0.1.1:8080/TCP, portName: http }
      - { address: 10.0.1.2:8080/TCP, portName: http }
  - name: default/other
    frontends: [{ address: 10.0.100.2:80/TCP, portName: http }]
    backends: [{ address: 10.0.1.3:8080/TCP, portName: http }]
`;

const plain = (c: LBMapsContents) => ({
  services: [...c.services].sort((a, b) => a[1].serviceId - b[1].serviceId),
  backends: c.backends,
  maglev: c.maglev.map(([id, t]) => [id, Array.from(t)]),
});

/** A u32 as the little-endian key bytes bpftool takes. */
const u32Key = (n: number) => [n & 255, (n >> 8) & 255, (n >> 16) & 255, n >>> 24].map(String);

rootTest("full reconciliation repairs map entries deleted behind its back (bpftool)", async () => {
  const pinDir = `/sys/fs/bpf/hf-test-repair-${Deno.pid}`;
  using logs = captureLogs();
  try {
    using dp = await Datapath.open({ pinDir });
    dp.configure({ srcAddr: "10.1.1.2" });
    // A pass every 5 s: the tampering below (three bpftool runs, ~0.1 s) fits between two passes
    // with a margin no loaded machine eats (it did not with 1 s).
    const cp = await createControlPlane(dp.lbMaps(), { fullReconcileIntervalMs: 5_000 });
    const file = new FileSource(cp.writer);
    cp.start();
    try {
      file.load(CONFIG);
      await cp.waitFrontend("10.0.100.1:80/TCP", { timeoutMs: 10_000 });
      await cp.waitFrontend("10.0.100.2:80/TCP", { timeoutMs: 10_000 });
      await cp.reconciler.waitIdle();
      const expected = plain(await dp.lbMaps().dump());
      const toDemo = () =>
        testRun(dp.program, tcpFrame("10.0.0.1", "10.0.100.1", { sport: 40000, dport: 80 }));
      strictEqual(toDemo().retval, XDP.TX);

      // Just after a full pass: the next one is 5 s away, time to tamper and look.
      const passes = () => cp.reconciler.metrics.holdfast_reconciler_prunes_total;
      const before = passes();
      const aligned = Date.now() + 20_000;
      for (let i = 0; i < 10_000 && passes() === before && Date.now() < aligned; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      const pass = passes();
      strictEqual(pass > before, true, "a full pass ran");
      // An operator (or a stray tool) removes entries: demo's service entry, other's Maglev
      // table, and other's backend (an array entry: zeroed is "no such backend").
      const otherId = cp.ops.serviceId("10.0.100.2:80/TCP")!;
      const backendId = cp.ops.backendId("10.0.1.3:8080/TCP")!;
      const svcKey = ["hex", "0a", "00", "64", "01", "00", "50", "06", "00"]; // 10.0.100.1:80/TCP
      const zeros8 = ["hex", "00", "00", "00", "00", "00", "00", "00", "00"];
      const bpftool = (op: string, map: string, ...rest: string[]) =>
        run(["bpftool", "map", op, "pinned", `${pinDir}/${map}`, ...rest]);
      await bpftool("delete", "hf_services", "key", ...svcKey);
      await bpftool("delete", "hf_maglev", "key", ...u32Key(otherId));
      await bpftool("update", "hf_backends", "key", ...u32Key(backendId), "value", ...zeros8);
      strictEqual(toDemo().retval === XDP.TX, false, "demo has no service entry now");
      strictEqual(passes(), pass, "no full pass ran while the entries were being removed");
      strictEqual(cp.reconciler.metrics.holdfast_reconciler_repairs_total, 0);

      // The next full pass (every 5 s here, 30 s by default) rewrites them.
      const deadline = Date.now() + 20_000;
      let got = plain(await dp.lbMaps().dump());
      while (JSON.stringify(got) !== JSON.stringify(expected) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        got = plain(await dp.lbMaps().dump());
      }
      deepStrictEqual(got, expected, "the maps are back as the control plane wrote them");
      strictEqual(toDemo().retval, XDP.TX, "the frontend forwards again");
      strictEqual(cp.reconciler.metrics.holdfast_reconciler_repairs_total, 2);
      const repaired = logs.records.filter((r) => r.msg === "repaired map entry")
        .map((r) => r.frontend).sort();
      deepStrictEqual(repaired, ["10.0.100.1:80/TCP", "10.0.100.2:80/TCP"]);
    } finally {
      await cp.stop();
    }
  } finally {
    Datapath.unpin(pinDir);
  }
});
