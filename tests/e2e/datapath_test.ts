/**
 * Datapath end to end in network namespaces, real packets through the real kernel:
 *
 * ```
 *   client ── c0 router ─┬─ l1 ── lb1 (XDP hf_lb, one-armed: XDP_TX back to the router)
 *  10.10.0.2  ECMP over  └─ l2 ── lb2 (XDP hf_lb)          │ outer IPv4+UDP:6080 to a backend
 *             lb1/lb2    ┌─ b1 ── be1 (tc decap + MSS clamp, 10.0.100.1 on lo, server) ◀┘
 *             (policy 1) ├─ b2 ── be2
 *                        └─ b3 ── be3   replies 10.0.100.1 → client straight via the router (DSR)
 * ```
 *
 * Router-side peers l1/l2 run hf_xdp_pass (XDP_TX over veth needs a native program on the peer);
 * TX checksum offload is off where locally generated TCP enters the XDP path (FINDINGS).
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { createTopology, type Topology } from "../../lab/mod.ts";
import {
  attachXdp,
  BpfObject,
  Datapath,
  DecapDatapath,
  DEFAULT_OBJECT_DIR,
} from "../../node/bpf/mod.ts";
import { TsMaglevBuilder } from "../../policy-as/host/maglev_ts.ts";

const PEER = new URL("../../lab/clients/lb_peer.ts", import.meta.url).pathname;
const VIP = "10.0.100.1";
const PORT = 80;
const LBS = [1, 2] as const;
const BACKENDS = [1, 2, 3] as const;
const CONNECTIONS = 1000;
const HELD = 150;
const BULK_BYTES = 1 << 20;

function topologySpec() {
  return {
    hosts: [
      { name: "client" },
      {
        name: "router",
        sysctls: {
          "net.ipv4.ip_forward": 1,
          "net.ipv4.fib_multipath_hash_policy": 1,
          "net.ipv4.conf.all.rp_filter": 2, // DSR replies arrive on a backend link: loose
          "net.ipv4.conf.default.rp_filter": 2,
        },
      },
      ...LBS.map((i) => ({ name: `lb${i}` })),
      ...BACKENDS.map((j) => ({ name: `be${j}`, loopback: [`${VIP}/32`] })),
    ],
    links: [
      {
        a: { host: "client", ifname: "eth0", address: "10.10.0.2/24", txChecksumOff: true },
        b: { host: "router", ifname: "c0", address: "10.10.0.1/24" },
      },
      ...LBS.map((i) => ({
        a: { host: "router", ifname: `l${i}`, address: `10.11.${i}.1/24`, txChecksumOff: true },
        b: { host: `lb${i}`, ifname: "eth0", address: `10.11.${i}.2/24` },
      })),
      ...BACKENDS.map((j) => ({
        a: { host: "router", ifname: `b${j}`, address: `10.12.${j}.1/24` },
        b: { host: `be${j}`, ifname: "eth0", address: `10.12.${j}.2/24` },
      })),
    ],
    routes: [
      { host: "client", to: "default", via: "10.10.0.1" },
      ...LBS.map((i) => ({ host: `lb${i}`, to: "default", via: `10.11.${i}.1` })),
      ...BACKENDS.map((j) => ({ host: `be${j}`, to: "default", via: `10.12.${j}.1` })),
      { host: "router", to: `${VIP}/32`, via: LBS.map((i) => `10.11.${i}.2`) },
    ],
  };
}

function lastJson<T>(stdout: string): T {
  const line = stdout.trim().split("\n").filter((l) => l.startsWith("{")).pop();
  if (line === undefined) throw new Error(`no JSON line in output: ${JSON.stringify(stdout)}`);
  return JSON.parse(line) as T;
}

async function peer(topo: Topology, args: string[], check = true) {
  return await topo.exec(
    "client",
    [Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp", PEER, ...args],
    { check, timeoutMs: 90_000 },
  );
}

rootTest("datapath e2e: ECMP over two XDP LB nodes, decap on backends, DSR, MTU", async (t) => {
  await using topo = await createTopology(topologySpec());
  const pinDirs = LBS.map((i) => `/sys/fs/bpf/hf-${Deno.pid}-lb${i}`);
  const table = new TsMaglevBuilder().build(
    BACKENDS.map((j) => ({ key: `10.12.${j}.2:${PORT}`, weight: 1 })),
    251,
  );
  const lbs: Datapath[] = [];
  const decaps: DecapDatapath[] = [];
  using pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
  try {
    for (const [k, i] of LBS.entries()) {
      const dp = await Datapath.open({ pinDir: pinDirs[k]! });
      lbs.push(dp);
      dp.configure({ srcAddr: `10.11.${i}.2`, encapPort: 6080, seed: 0 });
      const maps = dp.lbMaps();
      for (const j of BACKENDS) {
        await maps.updateBackend(j, { address: `10.12.${j}.2`, port: PORT });
      }
      await maps.updateMaglev(1, table);
      await maps.updateService({ address: VIP, port: PORT, protocol: "TCP" }, {
        serviceId: 1,
        backendCount: BACKENDS.length,
        flowKeyMode: "five-tuple",
        maglevSize: table.length,
      });
      dp.attach("eth0", { netns: topo.ns(`lb${i}`), mode: "native" });
      attachXdp(pass.program("hf_xdp_pass"), `l${i}`, { netns: topo.ns("router") });
    }
    for (const j of BACKENDS) {
      const d = await DecapDatapath.open();
      decaps.push(d);
      d.configure({ encapPort: 6080, mssMax: 1500 - 40 - 28 });
      d.addLocalVip(VIP);
      d.attach("eth0", { netns: topo.ns(`be${j}`) });
      const server = topo.spawnDeno(`be${j}`, PEER, {
        args: ["server", `be${j}`, VIP, String(PORT)],
        permissions: ["--allow-net"],
      });
      await server.waitForLine((l) => l.includes("listening"));
    }

    await t.step(
      `${CONNECTIONS} real TCP connections, real client address seen, spread`,
      async () => {
        const out = await peer(topo, ["client", VIP, String(PORT), String(CONNECTIONS), "20"]);
        const s = lastJson<
          {
            ok: number;
            failed: number;
            wrongPeer: number;
            spread: Record<string, number>;
            errors: string[];
          }
        >(out.stdout);
        const perLb = lbs.map((dp) => {
          const r = dp.reasons();
          return { tx_new: Number(r.tx_new), tx_hit: Number(r.tx_hit) };
        });
        console.log(
          JSON.stringify({
            level: "info",
            msg: "e2e spread",
            connections: CONNECTIONS,
            spread: s.spread,
            perLb,
            decap: decaps.map((d) => Number(d.stats().decap)),
          }),
        );
        strictEqual(s.failed, 0, `failed connections: ${JSON.stringify(s.errors)}`);
        strictEqual(s.wrongPeer, 0, "every server saw the client's own address and port");
        strictEqual(s.ok, CONNECTIONS);
        for (const j of BACKENDS) {
          strictEqual(
            (s.spread[`be${j}`] ?? 0) > CONNECTIONS / 10,
            true,
            `be${j} got a share: ${JSON.stringify(s.spread)}`,
          );
        }
        for (const [k, p] of perLb.entries()) {
          strictEqual(p.tx_new > 0, true, `ECMP used lb${k + 1}: ${JSON.stringify(perLb)}`);
        }
      },
    );

    await t.step(
      "the same 5-tuple reaches the same backend through either LB node (and across an agent restart)",
      async () => {
        const go = [1, 2].map((n) => `/tmp/hf-${Deno.pid}-go${n}`);
        for (const f of go) await Deno.remove(f).catch(() => {});
        const holder = topo.spawn("client", [
          Deno.execPath(),
          "run",
          "--quiet",
          "--allow-net",
          "--allow-read=/tmp",
          PEER,
          "hold",
          VIP,
          String(PORT),
          String(HELD),
          ...go,
        ]);
        const phase0 = JSON.parse(
          await holder.waitForLine((l) => l.includes('"phase":0'), { timeoutMs: 30_000 }),
        ) as { held: number };
        strictEqual(phase0.held, HELD);

        // everything through lb1 only; and restart lb1's "agent": new object on the pinned maps
        await topo.exec("router", ["ip", "route", "replace", `${VIP}/32`, "via", "10.11.1.2"]);
        const flowsBefore = [...lbs[0]!.flowTable().entries()].length;
        lbs[0]![Symbol.dispose]();
        lbs[0] = await Datapath.open({ pinDir: pinDirs[0]! });
        lbs[0].attach("eth0", { netns: topo.ns("lb1"), mode: "native" });
        strictEqual(
          [...lbs[0].flowTable().entries()].length >= flowsBefore,
          true,
          "flows survive the restart",
        );
        await Deno.writeTextFile(go[0]!, "");
        const p1 = JSON.parse(
          await holder.waitForLine((l) => l.includes('"phase":1'), { timeoutMs: 30_000 }),
        ) as { same: number };
        strictEqual(p1.same, HELD, "all held connections stay on their backend via lb1");

        // everything through lb2 only: it has no entry for lb1's flows, Maglev must agree
        const newBefore = lbs[1]!.reasons().tx_new;
        await topo.exec("router", ["ip", "route", "replace", `${VIP}/32`, "via", "10.11.2.2"]);
        await Deno.writeTextFile(go[1]!, "");
        const p2 = JSON.parse(
          await holder.waitForLine((l) => l.includes('"phase":2'), { timeoutMs: 30_000 }),
        ) as { same: number };
        strictEqual(p2.same, HELD, "all held connections stay on their backend via lb2");
        strictEqual(
          lbs[1]!.reasons().tx_new > newBefore,
          true,
          "lb2 picked up lb1's connections mid-stream by Maglev",
        );
        await holder.stop();
        for (const f of go) await Deno.remove(f).catch(() => {});
        await topo.exec("router", [
          "ip",
          "route",
          "replace",
          `${VIP}/32`,
          "nexthop",
          "via",
          "10.11.1.2",
          "nexthop",
          "via",
          "10.11.2.2",
        ]);
      },
    );

    await t.step(
      "1 MB each way with MSS clamped on the backend (full-size segments fit)",
      async () => {
        const clampedBefore = decaps.reduce((s, d) => s + d.stats().mss_clamped, 0n);
        const pending = peer(topo, ["bulk", VIP, String(PORT), String(BULK_BYTES), "15000"], false);
        if (Deno.env.get("HF_DEBUG")) { // HF_DEBUG=1: socket and drop counters mid-transfer
          await new Promise((r) => setTimeout(r, 3000));
          for (const h of ["client", "be1", "be2", "be3", "router"]) {
            const ss = await topo.exec(h, ["ss", "-tin"], { check: false });
            const ns = await topo.exec(h, [
              "nstat",
              "-az",
              "TcpInCsumErrors",
              "TcpExtTCPTimeouts",
              "IpInAddrErrors",
              "TcpRetransSegs",
              "IpExtInCsumErrors",
              "UdpInCsumErrors",
              "IpInHdrErrors",
              "IpInDiscards",
              "IpOutNoRoutes",
              "IpFragFails",
            ], { check: false });
            const link = await topo.exec(h, ["ip", "-s", "link"], { check: false });
            console.error(`==== ${h}\n${ss.stdout}\n${ns.stdout}\n${link.stdout}`);
          }
        }
        const out = await pending;
        const b = lastJson<{ ok: boolean; ms: number }>(out.stdout);
        console.log(JSON.stringify({
          level: "info",
          ...b,
          msg: "e2e bulk",
          bytes: BULK_BYTES,
          decap: decaps.map((d) =>
            Object.fromEntries(Object.entries(d.stats()).map(([k, v]) => [k, Number(v)]))
          ),
          lb: lbs.map((dp) => ({ too_big: Number(dp.reasons().drop_too_big) })),
        }));
        strictEqual(b.ok, true, `bulk transfer: ${out.stdout}`);
        strictEqual(
          decaps.reduce((s, d) => s + d.stats().mss_clamped, 0n) > clampedBefore,
          true,
          "the SYN/ACK was clamped",
        );
      },
    );

    const icmpSent = () => lbs.reduce((s, dp) => s + dp.reasons().tx_icmp_too_big, 0n);
    const bulkNoClamp = async (timeoutMs: number) => {
      await topo.exec("client", ["ip", "route", "flush", "cache"]); // forget learned PMTUs
      const out = await peer(
        topo,
        ["bulk", VIP, String(PORT), String(BULK_BYTES), String(timeoutMs)],
        false,
      );
      return lastJson<{ ok: boolean; ms?: number }>(out.stdout);
    };

    await t.step(
      "control: no clamp and ICMP filtered on the way — the transfer black-holes",
      async () => {
        for (const d of decaps) d.configure({ encapPort: 6080, mssMax: 0 });
        const nft = (cmd: string) => topo.exec("router", ["nft", ...cmd.split(" ")]);
        await nft("add table inet hf_test");
        await nft("add chain inet hf_test hfwd { type filter hook forward priority 0 ; }");
        await nft("add rule inet hf_test hfwd icmp type destination-unreachable drop");
        try {
          const before = icmpSent();
          const b = await bulkNoClamp(3000);
          strictEqual(
            b.ok,
            false,
            "full-size segments + 28 bytes exceed the MTU, ICMP never arrives",
          );
          strictEqual(
            icmpSent() > before,
            true,
            "the LB answered with ICMP (dropped by the router)",
          );
        } finally {
          await nft("delete table inet hf_test");
        }
      },
    );

    await t.step(
      "no clamp, ICMP delivered — the LB's fragmentation-needed lets PMTU discovery recover",
      async () => {
        const before = icmpSent();
        const b = await bulkNoClamp(15000);
        console.log(JSON.stringify({
          level: "info",
          msg: "e2e no-clamp PMTUD",
          ok: b.ok,
          ms: b.ms,
          icmp_too_big: String(icmpSent() - before),
        }));
        strictEqual(b.ok, true, "the client lowered its path MTU and retransmitted");
        strictEqual(icmpSent() > before, true, "ICMP fragmentation-needed was sent");
        for (const d of decaps) d.configure({ encapPort: 6080, mssMax: 1432 });
      },
    );
  } finally {
    for (const dp of lbs) dp[Symbol.dispose]();
    for (const d of decaps) d[Symbol.dispose]();
    for (const dir of pinDirs) Datapath.unpin(dir);
  }
});
