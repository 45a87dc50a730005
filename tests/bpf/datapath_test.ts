/**
 * The Datapath and its LBMaps target over real maps: contents survive closing the process's
 * handles when pinned (an agent restart), dump() restores what was written, Maglev tables of
 * different sizes, idempotent deletes, the flow map through its FlowTable (peer flows steer
 * packets, batch install), and new-flow events delivered by the background ring-buffer loop
 * without calling consume().
 */

import { deepStrictEqual, rejects, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import {
  Datapath,
  exportDatapathMetrics,
  FLOW_F_PEER,
  type FlowEvent,
  HF_RINGBUF_BYTES,
  makeFlowKey,
  testRun,
  XDP,
} from "../../node/bpf/mod.ts";
import { Registry } from "../../lib/metrics.ts";
import { ipv4Text, parseIpv4 } from "../../lib/ipv4.ts";
import { tcpFrame } from "../../lab/packets.ts";

const SVC = { address: "10.0.100.1", port: 80, protocol: "TCP" as const };

rootTest(
  "pinned maps survive an agent restart; dump() restores services, backends, Maglev",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-${Deno.pid}`;
    try {
      {
        using dp = await Datapath.open({ pinDir });
        dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 7 });
        const lb = dp.lbMaps();
        await lb.updateBackend(1, { address: "10.2.0.1", port: 80 });
        await lb.updateBackend(2, { address: "10.2.0.2", port: 8080 });
        await lb.updateMaglev(5, new Uint32Array([1, 2, 1, 2, 1, 2, 1]));
        await lb.updateMaglev(6, new Uint32Array([2, 2, 1, 1, 2]));
        await lb.updateService(SVC, {
          serviceId: 5,
          backendCount: 2,
          flowKeyMode: "five-tuple",
          maglevSize: 7,
        });
        await lb.updateService({ ...SVC, port: 443 }, {
          serviceId: 6,
          backendCount: 2,
          flowKeyMode: "client-ip",
          maglevSize: 5,
        });
        // A connection's SYN, then its ACK: the flow is confirmed and put in hf_flows.
        for (const flags of [0x02, 0x10]) {
          strictEqual(
            testRun(
              dp.program,
              tcpFrame("10.0.0.1", "10.0.100.1", { sport: 50000, dport: 80, flags }),
            ).retval,
            XDP.TX,
          );
        }
      }
      // "restart": a fresh object reuses the pinned maps
      using dp = await Datapath.open({ pinDir });
      const dump = await dp.lbMaps().dump();
      deepStrictEqual(dump.backends, [[1, { address: "10.2.0.1", port: 80 }], [2, {
        address: "10.2.0.2",
        port: 8080,
      }]]);
      deepStrictEqual(
        dump.services.map(([k, v]) => [k.port, v.serviceId, v.flowKeyMode, v.maglevSize]),
        [[80, 5, "five-tuple", 7], [443, 6, "client-ip", 5]],
      );
      deepStrictEqual(dump.maglev.map(([id, t]) => [id, Array.from(t)]), [[5, [
        1,
        2,
        1,
        2,
        1,
        2,
        1,
      ]], [6, [2, 2, 1, 1, 2]]]);
      strictEqual(
        [...dp.flowTable().entries()].length,
        1,
        "the flow created before the restart is still there",
      );
      const before = dp.reasons().tx_hit;
      strictEqual(
        testRun(
          dp.program,
          tcpFrame("10.0.0.1", "10.0.100.1", { sport: 50000, dport: 80, flags: 0x10 }),
        ).retval,
        XDP.TX,
      );
      strictEqual(dp.reasons().tx_hit, before + 1n, "it is a flow hit after the restart");
      // idempotent deletes, in contract order
      const lb = dp.lbMaps();
      for (let i = 0; i < 2; i++) {
        await lb.deleteService(SVC);
        await lb.deleteMaglev(5);
        await lb.deleteBackend(1);
      }
      const after = await lb.dump();
      deepStrictEqual([after.services.length, after.maglev.length, after.backends.length], [
        1,
        1,
        1,
      ]);
    } finally {
      Datapath.unpin(pinDir);
    }
  },
);

rootTest(
  "flows: peer flows steer packets, last_seen moves, batch install, events arrive asynchronously",
  async () => {
    using dp = await Datapath.open({ pinDir: null });
    dp.configure({ srcAddr: "10.1.1.2" });
    const lb = dp.lbMaps();
    await lb.updateBackend(1, { address: "10.2.0.1", port: 80 });
    await lb.updateMaglev(5, new Uint32Array([1, 1, 1]));
    await lb.updateService(SVC, {
      serviceId: 5,
      backendCount: 1,
      flowKeyMode: "five-tuple",
      maglevSize: 3,
    });

    const events: FlowEvent[] = [];
    const sub = dp.subscribe((e) => events.push(e), { pollMs: 50 });
    try {
      for (let sport = 1000; sport < 1100; sport++) {
        // first packets that confirm their flows (ACKs: the SYN went elsewhere): shared at once
        testRun(dp.program, tcpFrame("10.0.0.1", "10.0.100.1", { sport, dport: 80, flags: 0x10 }));
      }
      const deadline = Date.now() + 15_000; // a few polls normally: the bound is for a failure
      while (events.length < 100 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      strictEqual(events.length, 100, "100 new-flow events delivered by the background loop");
      deepStrictEqual(
        events[0]?.key,
        makeFlowKey({ saddr: "10.0.0.1", daddr: "10.0.100.1", sport: 1000, dport: 80, proto: 6 }),
      );
      strictEqual(events[0]?.backend, parseIpv4("10.2.0.1"));
      strictEqual(events[0]?.serviceId, 5);
    } finally {
      await sub.close();
    }

    // An idle reader waiting long for its first record: close() ends the wait (its eventfd)
    // instead of waiting it out.
    const idle = dp.subscribe(() => {}, { pollMs: 600_000 });
    await new Promise((r) => setTimeout(r, 50)); // its wait has begun
    let timer: ReturnType<typeof setTimeout> | undefined;
    const closed = await Promise.race([
      idle.close().then(() => true),
      new Promise<false>((r) => timer = setTimeout(() => r(false), 10_000)),
    ]);
    clearTimeout(timer);
    strictEqual(closed, true, "close() ended a 10 min wait");

    const flows = dp.flowTable();
    const key = makeFlowKey({
      saddr: "10.0.0.1",
      daddr: "10.0.100.1",
      sport: 1000,
      dport: 80,
      proto: 6,
    });
    const peerKey = { ...key, sport: 2000 };
    strictEqual(flows.get(key)?.backend, parseIpv4("10.2.0.1"), "the datapath's own flow");
    strictEqual(flows.get(key)?.flags, 0, "a local flow is not flagged");
    flows.put(peerKey, {
      backend: parseIpv4("10.2.0.9"),
      flags: FLOW_F_PEER,
      lastSeenNs: flows.nowNs(),
    });
    const steered = testRun(
      dp.program,
      tcpFrame("10.0.0.1", "10.0.100.1", { sport: 2000, dport: 80, flags: 0x10 }),
    );
    strictEqual(steered.retval, XDP.TX);
    strictEqual(ipv4Text(steered.data, 14 + 16), "10.2.0.9", "a peer's flow keeps its backend");
    const seen = flows.get(key)!.lastSeenNs;
    await new Promise((r) => setTimeout(r, 20)); // a few jiffies: the clock is coarse
    testRun(
      dp.program,
      tcpFrame("10.0.0.1", "10.0.100.1", { sport: 1000, dport: 80, flags: 0x10 }),
    );
    strictEqual(flows.get(key)!.lastSeenNs > seen, true, "last_seen advances on a hit");
    flows.putBatch(
      Array.from({ length: 500 }, (_, i) => ({
        key: { ...key, sport: 10000 + i },
        value: { backend: parseIpv4("10.2.0.1"), flags: FLOW_F_PEER, lastSeenNs: 0 },
      })),
    );
    strictEqual([...flows.entries()].length, 100 + 1 + 500);

    const reg = new Registry();
    exportDatapathMetrics(dp, reg);
    const text = reg.expose();
    for (
      const line of [
        'holdfast_datapath_packets_total{reason="tx_new"} 100',
        'holdfast_datapath_packets_total{reason="tx_hit"} 2',
        'holdfast_datapath_frontend_new_flows_total{service_id="5"} 100',
        'holdfast_datapath_backend_new_flows_total{backend_id="1"} 100',
      ]
    ) strictEqual(text.includes(line), true, `metrics lack ${line}:\n${text}`);
  },
);

rootTest(
  "map sizes are set at load; IDs beyond them are refused; a pinned map keeps its size unless told",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-sizes-${Deno.pid}`;
    try {
      {
        using dp = await Datapath.open({
          pinDir,
          maxServices: 8,
          maxBackends: 16,
          maxFlows: 100,
          ringBytes: 1 << 16,
        });
        strictEqual(dp.maps.events.maxEntries, 1 << 16, "hf_events sized by ringBytes");
        strictEqual(dp.object.map("hf_events6").maxEntries, 1 << 16, "hf_events6 too");
        const sizes = Object.fromEntries(
          ["services", "maglev", "frontendStats", "backends", "backendStats", "flows"].map((
            role,
          ) => [role, dp.maps[role as keyof typeof dp.maps].maxEntries]),
        );
        deepStrictEqual(sizes, {
          services: 8,
          maglev: 8,
          frontendStats: 8,
          backends: 16,
          backendStats: 16,
          flows: 100,
        });
        const lb = dp.lbMaps();
        deepStrictEqual(lb.capacity, { services: 8, backends: 16 });
        dp.configure({ srcAddr: "10.1.1.2" });
        await lb.updateBackend(15, { address: "10.2.0.1", port: 80 });
        await lb.updateMaglev(7, new Uint32Array([15, 15, 15]));
        await lb.updateService(SVC, {
          serviceId: 7,
          backendCount: 1,
          flowKeyMode: "five-tuple",
          maglevSize: 3,
        });
        await rejects(async () => await lb.updateMaglev(8, new Uint32Array([15])), /IDs 1\.\.7/);
        await rejects(
          async () => await lb.updateBackend(16, { address: "10.2.0.2", port: 80 }),
          /IDs 1\.\.15/,
        );
        // The last IDs of the smaller maps forward and are counted in their own slots.
        const r = testRun(
          dp.program,
          tcpFrame("10.0.0.1", "10.0.100.1", { sport: 3000, dport: 80 }),
        );
        strictEqual(r.retval, XDP.TX);
        strictEqual(ipv4Text(r.data, 14 + 16), "10.2.0.1");
        strictEqual(dp.frontendStats().get(7)?.newFlows, 1n);
        strictEqual(dp.backendNewFlows().get(15), 1n);
      }
      {
        using dp = await Datapath.open({ pinDir }); // no sizes: the pinned maps' are kept
        deepStrictEqual(dp.lbMaps().capacity, { services: 8, backends: 16 });
        strictEqual(dp.maps.flows.maxEntries, 100);
        strictEqual(dp.maps.events.maxEntries, 1 << 16, "a pinned ring keeps its size");
        strictEqual((await dp.lbMaps().dump()).services.length, 1);
      }
      {
        // another size than the pinned ring's: a new ring (tests/bpf/map_migrate_test.ts)
        using dp = await Datapath.open({ pinDir, ringBytes: 1 << 20 });
        dp.finishMigrations();
        strictEqual(dp.maps.events.maxEntries, 1 << 20);
      }
      await rejects(
        () => Datapath.open({ pinDir: null, ringBytes: 100_000 }),
        /ringBytes 100000: must be a power of two of at least 4096/,
      );
      {
        using dp = await Datapath.open({ pinDir: null });
        strictEqual(dp.maps.events.maxEntries, HF_RINGBUF_BYTES, "the default ring size");
      }
      await rejects(
        () => Datapath.open({ pinDir: null, maxServices: 1 }),
        /Cannot size the datapath with maxServices 1 \(--max-services\): must be an integer from 2/,
      );
      {
        // a new --max-services migrates the maps it sizes, entries kept (map_migrate_test.ts)
        using dp = await Datapath.open({ pinDir, maxServices: 4096 });
        dp.finishMigrations();
        strictEqual(dp.lbMaps().capacity.services, 4096);
        strictEqual((await dp.lbMaps().dump()).services.length, 1);
      }
    } finally {
      Datapath.unpin(pinDir);
    }
  },
);
