/**
 * IPv6 services through the control plane into the real maps (docs/contracts.md "IPv6"): the
 * reconciler over BpfLBMaps writes hf_services6 and hf_backends6 as it writes the in-memory
 * target (equal dumps), an IPv6 client's packet is encapsulated to an IPv6 or an IPv4 backend by
 * the Maglev table it names, each backend ID holds one family's entry only (also after an ID
 * changes family), and a restarted control plane renumbers nothing.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { createControlPlane } from "../../node/lb/control_plane.ts";
import { MemoryLBMaps } from "../../node/lb/maps/memory.ts";
import { FileSource } from "../../node/lb/sources/file_source.ts";
import type { LBMaps, LBMapsContents } from "../../node/lb/maps/lbmaps.ts";
import { Datapath, Ipv6Maps, testRun, XDP } from "../../node/bpf/mod.ts";
import { tcpFrame6 } from "../../lab/packets6.ts";
import { formatIpv6 } from "../../lib/ipv6.ts";
import { readU32 } from "../../node/bpf/structs.ts";

const VIP6 = "2001:db8:100::1";
const V1 = `services:
  - name: default/web6
    frontends: ["[${VIP6}]:80/TCP"]
    backends: ["[2001:db8:2::3]:8080/TCP", "10.0.1.1:8080/TCP"]
  - name: default/web4
    frontends: [10.0.100.1:80/TCP]
    backends: [10.0.1.1:8080/TCP, 10.0.1.2:8080/TCP]
`;
/** The IPv6 backend goes, an IPv4 one comes: its freed ID may change family. */
const V2 = `services:
  - name: default/web6
    frontends: ["[${VIP6}]:80/TCP"]
    backends: ["10.0.1.1:8080/TCP", "10.0.1.3:8080/TCP"]
  - name: default/web4
    frontends: [10.0.100.1:80/TCP]
    backends: [10.0.1.1:8080/TCP, 10.0.1.2:8080/TCP]
`;

async function reconcile(target: LBMaps, config: string): Promise<void> {
  const cp = await createControlPlane(target);
  const file = new FileSource(cp.writer);
  cp.start();
  file.load(config);
  await cp.waitFrontend(`[${VIP6}]:80/TCP`, { timeoutMs: 10_000 });
  await cp.waitFrontend("10.0.100.1:80/TCP", { timeoutMs: 10_000 });
  await cp.reconciler.waitIdle();
  await cp.stop();
}

const plain = (c: LBMapsContents) => ({
  services: [...c.services].sort((a, b) => a[1].serviceId - b[1].serviceId),
  backends: c.backends,
  maglev: c.maglev.map(([id, t]) => [id, Array.from(t)]),
});

/** Backend IDs holding an entry in both hf_backends and hf_backends6 (must be none). */
function bothFamilies(dp: Datapath): number[] {
  const v4 = new Set<number>();
  for (const [k, v] of dp.maps.backends.entries()) if (readU32(v, 0) !== 0) v4.add(readU32(k, 0));
  const both: number[] = [];
  for (const [k, v] of dp.object.map("hf_backends6").entries()) {
    if (formatIpv6(v) !== "::" && v4.has(readU32(k, 0))) both.push(readU32(k, 0));
  }
  return both;
}

rootTest(
  "control plane → BpfLBMaps, IPv6: same maps as in memory, v6 packets to both families, one family per ID",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-cp6-${Deno.pid}`;
    try {
      const memory = new MemoryLBMaps();
      await reconcile(memory, V1);
      const expected = plain(await memory.dump());
      {
        using dp = await Datapath.open({ pinDir });
        dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080 });
        new Ipv6Maps(dp.object).configure("2001:db8:1::2");
        await reconcile(dp.lbMaps(), V1);
        deepStrictEqual(plain(await dp.lbMaps().dump()), expected, "BPF maps equal memory's");
        deepStrictEqual(bothFamilies(dp), [], "one family per backend ID");
        const seen = new Set<string>();
        for (let sport = 40000; sport < 40064; sport++) {
          const r = testRun(dp.program, tcpFrame6("2001:db8:10::2", VIP6, { sport, dport: 80 }));
          strictEqual(r.retval, XDP.TX, `sport ${sport}`);
          const ethType = (r.data[12]! << 8) | r.data[13]!;
          seen.add(
            ethType === 0x86dd
              ? formatIpv6(r.data, 14 + 24)
              : `${r.data[30]}.${r.data[31]}.${r.data[32]}.${r.data[33]}`,
          );
        }
        deepStrictEqual([...seen].sort(), ["10.0.1.1", "2001:db8:2::3"], "both families reached");
        await reconcile(dp.lbMaps(), V2);
        deepStrictEqual(bothFamilies(dp), [], "one family per backend ID after the change");
        const d = await dp.lbMaps().dump();
        deepStrictEqual(
          d.backends.map(([, b]) => `${b.address}:${b.port}`).sort(),
          ["10.0.1.1:8080", "10.0.1.2:8080", "10.0.1.3:8080"],
          "the IPv6 backend is gone, the new IPv4 one is in",
        );
        await reconcile(dp.lbMaps(), V1);
      }
      using dp = await Datapath.open({ pinDir });
      await reconcile(dp.lbMaps(), V1); // a fresh control plane restores IDs from dump() first
      const after = plain(await dp.lbMaps().dump());
      deepStrictEqual(after.services, expected.services, "services renumbered nothing");
    } finally {
      Datapath.unpin(pinDir);
    }
  },
);
