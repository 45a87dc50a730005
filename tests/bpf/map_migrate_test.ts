/**
 * Pinned maps across an upgrade whose map layouts changed (node/bpf/_pin_migrate.ts): the test
 * program bpf/migrate_probe.c built twice (v1, and v2 where a hash value gains a field, an LRU
 * map grows its max_entries and a per-CPU value widens) shows entries carried over, the
 * old programs' late writes caught after the swap without overwriting the new program's, the old
 * pins removed, an unchanged map reused as the same kernel map, and a plain restart reusing all.
 * The LB object itself: a bigger `maxFlows`/`maxServices` migrates hf_flows (entries kept) and
 * hf_maglev (its tables kept), where it used to be refused.
 */

import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import {
  BpfMap,
  BpfObject,
  Datapath,
  DEFAULT_OBJECT_DIR,
  ensureBpffs,
  testRun,
  u32,
} from "../../node/bpf/mod.ts";
import { MIGRATING_SUFFIX } from "../../node/bpf/_pin_migrate.ts";
import { rmdirPath, unlinkPath } from "../../node/bpf/_ffi.ts";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { exportPinMetrics } from "../../node/bpf/metrics.ts";
import { udpFrame } from "../../lab/packets.ts";
import { ipv4Bytes } from "../../lib/ipv4.ts";

const MAPS = ["hf_probe_hash", "hf_probe_lru", "hf_probe_pcpu", "hf_probe_same"];

function open(version: 1 | 2, pinDir: string): BpfObject {
  const file = version === 1 ? "migrate_probe.o" : "migrate_probe_v2.o";
  return BpfObject.open(`${DEFAULT_OBJECT_DIR}/${file}`, { pinDir, pinMaps: MAPS, migrate: true });
}

/** Runs `obj`'s probe once on a frame from `src`. */
function packet(obj: BpfObject, src: string): void {
  testRun(obj.program("hf_migrate_probe"), udpFrame(src, "10.9.0.1", 1000, 80, new Uint8Array(8)));
}

/** The probe's key: the IPv4 source in network order, as the program reads it. */
const srcKey = (src: string): Uint8Array => ipv4Bytes(src);

function u64s(v: Uint8Array): bigint[] {
  const d = new DataView(v.buffer, v.byteOffset, v.byteLength);
  return Array.from({ length: v.length / 8 }, (_, i) => d.getBigUint64(i * 8, true));
}

function exists(path: string): boolean {
  try {
    BpfMap.fromPinned(path)[Symbol.dispose]();
    return true;
  } catch {
    return false;
  }
}

const sources = Array.from({ length: 100 }, (_, i) => `10.0.0.${i + 1}`);

rootTest(
  "changed map layouts are migrated: entries carried, late writes caught, old pins gone",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-migrate-${Deno.pid}`;
    await ensureBpffs(pinDir);
    try {
      using v1 = open(1, pinDir);
      deepStrictEqual(v1.migrations?.decisions.map((d) => d.action), MAPS.map(() => "created"));
      for (const src of sources) packet(v1, src);
      for (const src of sources.slice(0, 10)) packet(v1, src); // ten sources twice
      const lruBefore = new Map(v1.map("hf_probe_lru").entries().map(([k, v]) => [k.join(), v]));
      const pcpuBefore = v1.map("hf_probe_pcpu").lookup(u32(0))!;
      const sameId = v1.map("hf_probe_same").info().id;

      using logs = captureLogs();
      using v2 = open(2, pinDir); // v1's program still runs on the old maps
      const decisions = v2.migrations!.decisions;
      deepStrictEqual(decisions.map((d) => [d.map, d.action, d.changed]), [
        ["hf_probe_hash", "migrated", ["value size 8 → 16"]],
        ["hf_probe_lru", "migrated", ["max_entries 1024 → 4096"]],
        ["hf_probe_pcpu", "migrated", ["value size 4 → 8"]],
        ["hf_probe_same", "reused", undefined],
      ]);
      ok(exists(`${pinDir}/hf_probe_hash${MIGRATING_SUFFIX}`), "the old map waits aside");
      strictEqual(v2.map("hf_probe_same").info().id, sameId, "reused: the very same kernel map");

      // Filled at load: every entry, the new field zero.
      const hash = v2.map("hf_probe_hash");
      strictEqual(hash.keys().length, 100);
      for (const [i, src] of sources.entries()) {
        deepStrictEqual(u64s(hash.lookup(srcKey(src))!), [i < 10 ? 2n : 1n, 0n], src);
      }
      const lru = v2.map("hf_probe_lru");
      deepStrictEqual(
        new Map(lru.entries().map(([k, v]) => [k.join(), v])),
        lruBefore,
        "the LRU map's entries, as v1's map held them",
      );
      // Per CPU: each CPU's u32 count is the low half of its u64 now.
      const pcpuAfter = v2.map("hf_probe_pcpu").lookup(u32(0))!;
      const cpus = pcpuAfter.length / 8;
      for (let c = 0; c < cpus; c++) {
        const old = new DataView(pcpuBefore.buffer).getUint32(c * 8, true);
        strictEqual(u64s(pcpuAfter)[c], BigInt(old), `CPU ${c}`);
      }

      // Between fill and swap: the old program learns a new source, the new one counts a known one.
      packet(v1, "10.0.1.1");
      packet(v2, "10.0.0.1");
      const carried = v2.migrations!.finish();
      deepStrictEqual(carried.get("hf_probe_hash"), 101);
      strictEqual(hash.keys().length, 101);
      deepStrictEqual(u64s(hash.lookup(srcKey("10.0.1.1"))!), [1n, 0n], "the late entry caught");
      strictEqual(u64s(hash.lookup(srcKey("10.0.0.1"))!)[0], 3n, "the new program's write kept");
      for (const name of ["hf_probe_hash", "hf_probe_lru", "hf_probe_pcpu"]) {
        ok(!exists(`${pinDir}/${name}${MIGRATING_SUFFIX}`), `${name}: the old pin is gone`);
        ok(exists(`${pinDir}/${name}`), `${name}: the new map is pinned`);
      }
      const msgs = logs.records.map((r) => r.msg);
      ok(msgs.includes("reused map hf_probe_same"), JSON.stringify(msgs));
      ok(msgs.includes("migrated map hf_probe_hash (101 entries)"), JSON.stringify(msgs));

      // A plain restart of v2: every map reused, nothing copied.
      using again = open(2, pinDir);
      deepStrictEqual(again.migrations?.decisions.map((d) => d.action), MAPS.map(() => "reused"));
      strictEqual(again.map("hf_probe_hash").keys().length, 101);
    } finally {
      for (const m of MAPS) {
        for (const s of ["", MIGRATING_SUFFIX]) {
          unlinkPath(`${pinDir}/${m}${s}`);
        }
      }
      rmdirPath(pinDir);
    }
  },
);

rootTest(
  "the LB object: a new --max-flows and --max-services migrate flows and Maglev tables",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-migrate-lb-${Deno.pid}`;
    try {
      {
        using dp = await Datapath.open({ pinDir, maxFlows: 100, maxServices: 8 });
        await dp.lbMaps().updateMaglev(3, new Uint32Array([1, 2, 1, 2, 1]));
        const flows = dp.flowTable();
        for (let i = 0; i < 50; i++) {
          const key = {
            saddr: 0x0a000001,
            daddr: 0x0a006401,
            sport: 1000 + i,
            dport: 80,
            proto: 6,
          };
          flows.put(key, { backend: 0x0a020001, flags: 0, lastSeenNs: 0 });
        }
      }
      {
        using logs = captureLogs();
        using dp = await Datapath.open({ pinDir }); // no sizes: a restart reuses every map
        ok(dp.object.migrations!.decisions.every((d) => d.action === "reused"));
        strictEqual(logs.records.filter((r) => r.msg.startsWith("reused map ")).length, 14);
      }
      {
        using dp = await Datapath.open({ pinDir, maxFlows: 1000, maxServices: 16 });
        const migrated = dp.object.migrations!.decisions.filter((d) => d.action === "migrated");
        deepStrictEqual(migrated.map((d) => d.map).sort(), [
          "hf_fe_stats",
          "hf_flows",
          "hf_flows6",
          "hf_maglev",
          "hf_services",
          "hf_services6",
        ]);
        const carried = dp.finishMigrations();
        const registry = new Registry();
        exportPinMetrics(dp.object.migrations, registry);
        const text = registry.expose();
        for (
          const line of [
            'holdfast_bpf_pinned_maps{action="migrated"} 6',
            'holdfast_bpf_pinned_maps{action="reused"} 8',
            'holdfast_bpf_migrated_entries{map="hf_flows"} 50',
          ]
        ) ok(text.includes(line), `metrics lack ${line}:\n${text}`);
        strictEqual(carried.get("hf_flows"), 50);
        strictEqual(carried.get("hf_maglev"), 1);
        strictEqual(dp.maps.flows.maxEntries, 1000);
        strictEqual(dp.maps.flows.keys().length, 50);
        const dump = await dp.lbMaps().dump();
        deepStrictEqual(dump.maglev.map(([id, t]) => [id, [...t]]), [[3, [1, 2, 1, 2, 1]]]);
        deepStrictEqual(dp.lbMaps().capacity.services, 16);
      }
    } finally {
      Datapath.unpin(pinDir);
    }
  },
);

rootTest(
  "an interrupted migration resumes; a changed key size is refused, renaming nothing",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-migrate-resume-${Deno.pid}`;
    await ensureBpffs(pinDir);
    try {
      {
        using v1 = open(1, pinDir);
        for (const src of sources.slice(0, 20)) packet(v1, src);
      }
      {
        // The agent dies between load and attach: old pins aside, new maps pinned and filled.
        using v2 = open(2, pinDir);
        strictEqual(v2.map("hf_probe_hash").keys().length, 20);
        ok(exists(`${pinDir}/hf_probe_hash${MIGRATING_SUFFIX}`));
      }
      {
        using logs = captureLogs();
        using v2 = open(2, pinDir);
        deepStrictEqual(v2.migrations!.decisions.map((d) => [d.map, d.action, d.changed]), [
          ["hf_probe_hash", "migrated", ["resumed"]],
          ["hf_probe_lru", "migrated", ["resumed"]],
          ["hf_probe_pcpu", "migrated", ["resumed"]],
          ["hf_probe_same", "reused", undefined],
        ]);
        v2.migrations!.finish();
        strictEqual(v2.map("hf_probe_hash").keys().length, 20, "the entries, once each");
        ok(!exists(`${pinDir}/hf_probe_hash${MIGRATING_SUFFIX}`), "the old pin is gone");
        ok(logs.records.some((r) => r.msg === "migrated map hf_probe_hash (20 entries)"));
      }
      {
        // A hash keyed by 8 bytes where the object's has 4: refused before anything moves.
        unlinkPath(`${pinDir}/hf_probe_hash`);
        using other = BpfMap.create(1, { name: "x", keySize: 8, valueSize: 16, maxEntries: 256 });
        other.pin(`${pinDir}/hf_probe_hash`);
        let error = "";
        try {
          open(2, pinDir)[Symbol.dispose]();
        } catch (e) {
          error = (e as Error).message;
        }
        ok(error.includes('Cannot migrate map "hf_probe_hash"'), error);
        ok(error.includes("key size 8 → 4"), error);
        ok(
          exists(`${pinDir}/hf_probe_hash`) && !exists(`${pinDir}/hf_probe_lru${MIGRATING_SUFFIX}`),
        );
      }
    } finally {
      for (const m of MAPS) {
        for (const s of ["", MIGRATING_SUFFIX]) {
          unlinkPath(`${pinDir}/${m}${s}`);
        }
      }
      rmdirPath(pinDir);
    }
  },
);
