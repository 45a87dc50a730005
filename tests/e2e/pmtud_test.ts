/**
 * Path-MTU discovery for DSR replies, end to end in network namespaces (issue 13 part 1,
 * docs/mtu.md "PMTUD on the return path"):
 *
 * ```
 *  client ── e0 edge w0 ══ MTU 1280 ══ e1 router ─┬─ l1 ── lb1 (XDP hf_lb)
 * 10.10.0.2   (1500)                              └─ b1 ── be1 (decap, 10.0.100.1 on lo, server)
 * ```
 *
 * be1 answers the client straight through the router (DSR, source = the VIP) with full-size
 * segments (the client's MSS is 1460). The router cannot forward them over the 1280 link and sends
 * ICMP fragmentation-needed to their source, the VIP — which the router routes to lb1. Only if lb1
 * hands that ICMP to be1 (encapsulated like the flow's packets) does be1 lower its path MTU and
 * the download finish. The control step drops the router's ICMP on its way to lb1, as an LB that
 * keeps ICMP for itself would: the same download hangs.
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { createTopology, routerSpoke, type Topology, type TopologySpec } from "../../lab/mod.ts";
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
const CLIENT = "10.10.0.2";
const PORT = 80;
const BYTES = 1 << 20;

function topologySpec(): TopologySpec {
  const lb = routerSpoke("lb1", "l1", "10.11.1", { routerTxChecksumOff: true });
  const be = routerSpoke("be1", "b1", "10.12.1");
  return {
    hosts: [
      { name: "client" },
      { name: "edge", sysctls: { "net.ipv4.ip_forward": 1 } },
      {
        name: "router",
        sysctls: {
          "net.ipv4.ip_forward": 1,
          "net.ipv4.conf.all.rp_filter": 2, // DSR replies arrive on b1: loose
          "net.ipv4.conf.default.rp_filter": 2,
        },
      },
      { name: "lb1" },
      { name: "be1", loopback: [`${VIP}/32`] },
    ],
    links: [
      {
        a: { host: "client", ifname: "eth0", address: `${CLIENT}/24`, txChecksumOff: true },
        b: { host: "edge", ifname: "e0", address: "10.10.0.1/24" },
      },
      {
        a: { host: "edge", ifname: "w0", address: "10.20.0.1/24" },
        b: { host: "router", ifname: "e1", address: "10.20.0.2/24" },
        mtu: 1280,
      },
      lb.link,
      be.link,
    ],
    routes: [
      { host: "client", to: "default", via: "10.10.0.1" },
      { host: "edge", to: "default", via: "10.20.0.2" },
      { host: "router", to: "10.10.0.0/24", via: "10.20.0.1" },
      { host: "router", to: `${VIP}/32`, via: "10.11.1.2" },
      lb.route,
      be.route,
    ],
  };
}

/** One download (UP and DOWN of BYTES, verified) from the client; its JSON summary. */
async function download(topo: Topology, timeoutMs: number): Promise<{ ok: boolean; ms?: number }> {
  const out = await topo.exec("client", [
    Deno.execPath(),
    "run",
    "--quiet",
    "--allow-net",
    PEER,
    "bulk",
    VIP,
    String(PORT),
    String(BYTES),
    String(timeoutMs),
  ], { check: false, timeoutMs: timeoutMs + 30_000 });
  const line = out.stdout.trim().split("\n").filter((l) => l.startsWith("{")).pop();
  if (line === undefined) throw new Error(`bulk printed no summary: ${JSON.stringify(out)}`);
  return JSON.parse(line) as { ok: boolean; ms?: number };
}

rootTest("PMTUD through the LB: a client behind an MTU-1280 link downloads 1 MB", async (t) => {
  await using topo = await createTopology(topologySpec());
  const table = new TsMaglevBuilder().build([{ key: `10.12.1.2:${PORT}`, weight: 1 }], 251);
  using pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
  using dp = await Datapath.open({ pinDir: null });
  using decap = await DecapDatapath.open();
  dp.configure({ srcAddr: "10.11.1.2", encapPort: 6080, seed: 0 });
  const maps = dp.lbMaps();
  await maps.updateBackend(1, { address: "10.12.1.2", port: PORT });
  await maps.updateMaglev(1, table);
  await maps.updateService({ address: VIP, port: PORT, protocol: "TCP" }, {
    serviceId: 1,
    backendCount: 1,
    flowKeyMode: "five-tuple",
    maglevSize: table.length,
  });
  dp.attach("eth0", { netns: topo.ns("lb1"), mode: "native" });
  attachXdp(pass.program("hf_xdp_pass"), "l1", { netns: topo.ns("router") });
  decap.configure({ encapPort: 6080, mssMax: 1432 });
  decap.addLocalVip(VIP);
  decap.attach("eth0", { netns: topo.ns("be1") });
  const server = topo.spawnDeno("be1", PEER, {
    args: ["server", "be1", VIP, String(PORT)],
    permissions: ["--allow-net"],
  });
  await server.waitForLine((l) => l.includes("listening"));
  const toBackend = () => dp.reasons().tx_icmp_to_backend;
  const pmtu = async () =>
    (await topo.exec("be1", ["ip", "route", "get", CLIENT, "from", VIP])).stdout;

  await t.step(
    "control: the router's ICMP never reaches the LB — the download hangs",
    async () => {
      const nft = (cmd: string) => topo.exec("router", ["nft", ...cmd.split(" ")]);
      await nft("add table inet hf_pmtud");
      await nft("add chain inet hf_pmtud out { type filter hook output priority 0 ; }");
      await nft(
        `add rule inet hf_pmtud out ip daddr ${VIP} icmp type destination-unreachable drop`,
      );
      try {
        const before = toBackend();
        const r = await download(topo, 4000);
        strictEqual(r.ok, false, "full-size DSR replies black-hole at the 1280 link");
        strictEqual(toBackend(), before, "no ICMP reached the LB");
        strictEqual((await pmtu()).includes("mtu 1280"), false, "be1 never learned the path MTU");
      } finally {
        await nft("delete table inet hf_pmtud");
      }
      await topo.exec("client", ["ip", "route", "flush", "cache"]);
      await topo.exec("be1", ["ip", "route", "flush", "cache"]);
    },
  );

  await t.step("the LB hands frag-needed to the backend: the download finishes", async () => {
    const before = toBackend();
    const decapBefore = decap.stats().decap;
    const r = await download(topo, 20_000);
    const route = await pmtu();
    console.log(JSON.stringify({
      level: "info",
      msg: "e2e pmtud",
      ok: r.ok,
      ms: r.ms,
      tx_icmp_to_backend: String(toBackend() - before),
      backend_route: route.trim(),
    }));
    strictEqual(r.ok, true, "1 MB each way, verified");
    strictEqual(toBackend() > before, true, "frag-needed was encapsulated to the backend");
    strictEqual(decap.stats().decap > decapBefore, true, "and decapsulated there");
    strictEqual(route.includes("mtu 1280"), true, `be1 lowered its path MTU: ${route}`);
  });
});
