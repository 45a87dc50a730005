/**
 * Maglev tables memory-mapped (`node/bpf/map_mmap.ts`): a table written (alone or staged and
 * committed) is an mmapable array filled through a mapping; what the kernel's lookup syscall reads
 * from it equals the table (so the kernel's 8-byte value stride is respected), the dump reads it
 * back equal, and the XDP program forwards by it. Over a hf_maglev pinned by an older version (an
 * inner-map template without BPF_F_MMAPABLE, which the kernel then requires of every table), the
 * datapath still opens, says once that it writes tables the old way, and forwards by them; so does
 * a restart over those pins. The agent's start over such pins with only its capabilities is in
 * tests/k8s_manifests/agent_caps_test.ts.
 */

import { deepStrictEqual, ok, strictEqual, throws } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import {
  BPF_F_INNER_MAP,
  BPF_F_MMAPABLE,
  BpfMap,
  Datapath,
  ensureBpffs,
  isMmapable,
  MAP_TYPE,
  readU32Values,
  testRun,
  writeU32Values,
  XDP,
} from "../../node/bpf/mod.ts";
import type { BpfLBMaps } from "../../node/bpf/mod.ts";
import { captureLogs } from "../../lib/log.ts";
import { tcpFrame } from "../../lab/packets.ts";

const M = 251;
const FALLBACK_MSG = "hf_maglev takes no memory-mapped tables";

/** A table of M slots cycling through `ids`. */
const cycling = (...ids: number[]) =>
  Uint32Array.from({ length: M }, (_, i) => ids[i % ids.length]!);

/** The slots of `map` as the kernel's lookup syscall reads them, one BPF_MAP_LOOKUP_BATCH. */
function lookedUp(map: BpfMap): number[] {
  const { values, count } = map.lookupBatch(65536);
  return [...new Uint32Array(values.slice(0, count * 4).buffer)];
}

/** Services 3 (cycling 1,2,3), 4 (all 3, staged) and 5 (all 2, written alone) over backends 1–3. */
async function writeServices(lb: BpfLBMaps): Promise<Map<number, Uint32Array>> {
  for (const b of [1, 2, 3]) await lb.updateBackend(b, { address: `10.2.0.${b}`, port: 8080 });
  const tables = new Map([[3, cycling(1, 2, 3)], [4, cycling(3)], [5, cycling(2)]]);
  await lb.stageMaglev(3, tables.get(3)!);
  await lb.stageMaglev(4, tables.get(4)!);
  deepStrictEqual(await lb.commitMaglev(), new Map());
  await lb.updateMaglev(5, tables.get(5)!);
  for (const id of tables.keys()) {
    await lb.updateService({ address: `10.0.100.${id}`, port: 80, protocol: "TCP" }, {
      serviceId: id,
      backendCount: 3,
      flowKeyMode: "five-tuple",
      maglevSize: M,
    });
  }
  return tables;
}

/** 64 new flows to service 4's VIP (every slot backend 3) and one to 5's: all sent to the right one. */
function assertForwarded(dp: Datapath): void {
  const outerDst = (d: Uint8Array) => `${d[30]}.${d[31]}.${d[32]}.${d[33]}`;
  for (let sport = 40000; sport < 40064; sport++) {
    const r = testRun(dp.program, tcpFrame("10.0.0.1", "10.0.100.4", { sport, dport: 80 }));
    strictEqual(r.retval, XDP.TX, `flow from port ${sport}`);
    strictEqual(outerDst(r.data), "10.2.0.3", `flow from port ${sport}`);
  }
  const r = testRun(dp.program, tcpFrame("10.0.0.1", "10.0.100.5", { sport: 1234, dport: 80 }));
  strictEqual(outerDst(r.data), "10.2.0.2");
}

/** Each table pinned under `dir`: its flags, and equal to `tables` through mapping and lookup. */
function assertPinnedTables(dir: string, tables: Map<number, Uint32Array>, mmapable: boolean) {
  for (const [id, table] of tables) {
    using pinned = BpfMap.fromPinned(`${dir}/${id}`);
    strictEqual(isMmapable(pinned), mmapable, `table ${id} mmapable`);
    strictEqual(pinned.flags & BPF_F_INNER_MAP, BPF_F_INNER_MAP);
    deepStrictEqual(lookedUp(pinned), [...table], `table ${id} through the lookup syscall`);
    deepStrictEqual([...readU32Values(pinned)], [...table], `table ${id} read back`);
  }
}

rootTest("u32 arrays: written and read through a mapping when mmapable, by batch otherwise", () => {
  const make = (flags: number) =>
    BpfMap.create(MAP_TYPE.ARRAY, {
      name: "hf_t_mm",
      keySize: 4,
      valueSize: 4,
      maxEntries: 5,
      flags,
    });
  for (const flags of [BPF_F_MMAPABLE, 0]) {
    using map = make(flags);
    strictEqual(isMmapable(map), flags !== 0);
    writeU32Values(map, new Uint32Array([7, 0xffffffff, 9]));
    deepStrictEqual(lookedUp(map), [7, 0xffffffff, 9, 0, 0], `flags ${flags}: kernel's view`);
    deepStrictEqual([...readU32Values(map)], [7, 0xffffffff, 9, 0, 0], `flags ${flags}`);
    throws(() => writeU32Values(map, new Uint32Array(6)), /holds 5/);
  }
  using hash = BpfMap.create(MAP_TYPE.HASH, {
    name: "hf_t_h",
    keySize: 4,
    valueSize: 4,
    maxEntries: 2,
  });
  throws(() => readU32Values(hash), /not an array of u32/);
});

rootTest(
  "Maglev tables are filled through a mapping: the kernel reads them equal, XDP forwards by them",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-mgmmap-${Deno.pid}`;
    using logs = captureLogs();
    try {
      using dp = await Datapath.open({ pinDir, maxServices: 16 });
      dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 1 });
      const lb = dp.lbMaps();
      const tables = await writeServices(lb);
      assertPinnedTables(`${pinDir}/hf_maglev_tables`, tables, true);
      deepStrictEqual(
        (await lb.dump()).maglev.map(([id, t]) => [id, [...t]]),
        [...tables].map(([id, t]) => [id, [...t]]),
      );
      deepStrictEqual((await lb.dump({ tables: false })).maglev.map(([id]) => id), [3, 4, 5]);
      assertForwarded(dp);
      ok(!logs.records.some((r) => r.msg.startsWith(FALLBACK_MSG)), "no fallback on fresh maps");
    } finally {
      Datapath.unpin(pinDir);
    }
  },
);

rootTest(
  "over a hf_maglev pinned without BPF_F_MMAPABLE (older version): tables the old way, forwarded",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-mgold-${Deno.pid}`;
    const dir = `${pinDir}/hf_maglev_tables`;
    try {
      await ensureBpffs(pinDir);
      {
        // what the version before mmapable tables pinned: the same outer map, its template's
        // flags BPF_F_INNER_MAP alone
        using template = BpfMap.create(MAP_TYPE.ARRAY, {
          name: "hf_maglev_inner",
          keySize: 4,
          valueSize: 4,
          maxEntries: 1,
          flags: BPF_F_INNER_MAP,
        });
        using outer = BpfMap.create(MAP_TYPE.ARRAY_OF_MAPS, {
          name: "hf_maglev",
          keySize: 4,
          valueSize: 4,
          maxEntries: 16,
          innerMapFd: template.fd,
        });
        outer.pin(`${pinDir}/hf_maglev`);
      }
      for (let start = 0; start < 2; start++) { // a first start over those pins, then a restart
        using logs = captureLogs();
        using dp = await Datapath.open({ pinDir });
        dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 1 });
        const lb = dp.lbMaps();
        const tables = await writeServices(lb);
        const fallbacks = logs.records.filter((r) => r.msg.startsWith(FALLBACK_MSG));
        strictEqual(fallbacks.length, 1, JSON.stringify(logs.records));
        assertPinnedTables(dir, tables, false);
        deepStrictEqual(
          (await lb.dump()).maglev.map(([id, t]) => [id, [...t]]),
          [...tables].map(([id, t]) => [id, [...t]]),
        );
        assertForwarded(dp);
      }
    } finally {
      Datapath.unpin(pinDir);
    }
  },
);
