/**
 * Path-MTU discovery for IPv6 DSR replies, end to end in network namespaces (docs/contracts.md
 * "IPv6", ICMPv6 errors to the owning backend):
 *
 * ```
 *  client ── e0 edge w0 ══ MTU 1280 ══ e1 router ─┬─ l1 ── lb1 (XDP hf_lb)
 * 2001:db8:10::2 (1500)                           └─ b1 ── be1 (decap, VIP6 on lo, server)
 * ```
 *
 * be1 answers the client straight through the router (DSR, source = the VIP) with full-size
 * segments (the client's MSS is 1440). The router cannot forward them over the 1280 link and sends
 * ICMPv6 Packet Too Big to their source, the VIP — which the router routes to lb1. Only if lb1
 * hands it to be1 (encapsulated over IPv6 like the flow's packets) does be1 lower its path MTU and
 * the download finish. The control step drops the router's Packet Too Big on its way to lb1: the
 * same download hangs.
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { createTopology, type Topology } from "../../lab/mod.ts";
import {
  addLocalVip6,
  attachXdp,
  BpfObject,
  Datapath,
  DecapDatapath,
  DEFAULT_OBJECT_DIR,
  Ipv6Maps,
} from "../../node/bpf/mod.ts";

const PEER = new URL("../../lab/clients/lb_peer.ts", import.meta.url).pathname;
const VIP6 = "2001:db8:100::1";
const CLIENT6 = "2001:db8:10::2";
const PORT = 80;
const BYTES = 1 << 20;

/** [host, device, address] added with nodad once the links exist. */
const ADDRESSES: Array<[string, string, string]> = [
  ["client", "eth0", `${CLIENT6}/64`],
  ["edge", "e0", "2001:db8:10::1/64"],
  ["edge", "w0", "2001:db8:20::1/64"],
  ["router", "e1", "2001:db8:20::2/64"],
  ["router", "l1", "2001:db8:11::1/64"],
  ["lb1", "eth0", "2001:db8:11::2/64"],
  ["router", "b1", "2001:db8:12::1/64"],
  ["be1", "eth0", "2001:db8:12::2/64"],
  ["be1", "lo", `${VIP6}/128`],
];
/** [host, destination, via]. */
const ROUTES: Array<[string, string, string]> = [
  ["client", "default", "2001:db8:10::1"],
  ["edge", "default", "2001:db8:20::2"],
  ["router", "2001:db8:10::/64", "2001:db8:20::1"],
  ["router", `${VIP6}/128`, "2001:db8:11::2"],
  ["be1", "default", "2001:db8:12::1"],
];

async function build(): Promise<Topology> {
  const topo = await createTopology({
    hosts: [{ name: "client" }, { name: "edge" }, { name: "router" }, { name: "lb1" }, {
      name: "be1",
    }],
    links: [
      {
        a: { host: "client", ifname: "eth0", txChecksumOff: true },
        b: { host: "edge", ifname: "e0" },
      },
      { a: { host: "edge", ifname: "w0" }, b: { host: "router", ifname: "e1" }, mtu: 1280 },
      {
        a: { host: "router", ifname: "l1", txChecksumOff: true },
        b: { host: "lb1", ifname: "eth0" },
      },
      { a: { host: "router", ifname: "b1" }, b: { host: "be1", ifname: "eth0" } },
    ],
  });
  for (const [host, dev, address] of ADDRESSES) {
    await topo.exec(host, ["ip", "-6", "addr", "add", address, "dev", dev, "nodad"]);
  }
  for (const host of ["edge", "router"]) {
    await topo.exec(host, ["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]);
  }
  for (const [host, to, via] of ROUTES) {
    await topo.exec(host, ["ip", "-6", "route", "replace", to, "via", via]);
  }
  return topo;
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
    VIP6,
    String(PORT),
    String(BYTES),
    String(timeoutMs),
  ], { check: false, timeoutMs: timeoutMs + 30_000 });
  const line = out.stdout.trim().split("\n").filter((l) => l.startsWith("{")).pop();
  if (line === undefined) throw new Error(`bulk printed no summary: ${JSON.stringify(out)}`);
  return JSON.parse(line) as { ok: boolean; ms?: number };
}

rootTest(
  "IPv6 PMTUD through the LB: a client behind an MTU-1280 link downloads 1 MB",
  async (t) => {
    await using topo = await build();
    using pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
    using dp = await Datapath.open({ pinDir: null });
    using decap = await DecapDatapath.open();
    dp.configure({ srcAddr: "10.11.1.2", encapPort: 6080, seed: 0 });
    const v6 = new Ipv6Maps(dp.object);
    v6.configure("2001:db8:11::2");
    v6.updateBackend(1, "2001:db8:12::2", PORT);
    await dp.lbMaps().updateMaglev(1, new Uint32Array(251).fill(1));
    v6.updateService({ address: VIP6, port: PORT, protocol: "TCP" }, {
      serviceId: 1,
      backendCount: 1,
      flags: 0,
      maglevSize: 251,
    });
    dp.attach("eth0", { netns: topo.ns("lb1"), mode: "native" });
    attachXdp(pass.program("hf_xdp_pass"), "l1", { netns: topo.ns("router") });
    decap.configure({ encapPort: 6080, mssMax: 1432 });
    addLocalVip6(decap.object, VIP6);
    decap.attach("eth0", { netns: topo.ns("be1") });
    const server = topo.spawnDeno("be1", PEER, {
      args: ["server", "be1", VIP6, String(PORT)],
      permissions: ["--allow-net"],
    });
    await server.waitForLine((l) => l.includes("listening"));
    const toBackend = () => dp.reasons().tx_icmp_to_backend;
    const pmtu = async () =>
      (await topo.exec("be1", ["ip", "-6", "route", "get", CLIENT6, "from", VIP6])).stdout;

    await t.step("control: Packet Too Big never reaches the LB — the download hangs", async () => {
      const nft = (cmd: string) => topo.exec("router", ["nft", ...cmd.split(" ")]);
      await nft("add table inet hf_pmtud6");
      await nft("add chain inet hf_pmtud6 out { type filter hook output priority 0 ; }");
      await nft(`add rule inet hf_pmtud6 out ip6 daddr ${VIP6} icmpv6 type packet-too-big drop`);
      try {
        const before = toBackend();
        const r = await download(topo, 4000);
        strictEqual(r.ok, false, "full-size DSR replies black-hole at the 1280 link");
        strictEqual(toBackend(), before, "no ICMPv6 reached the LB");
        strictEqual((await pmtu()).includes("mtu 1280"), false, "be1 never learned the path MTU");
      } finally {
        await nft("delete table inet hf_pmtud6");
      }
      await topo.exec("client", ["ip", "-6", "route", "flush", "cache"]);
      await topo.exec("be1", ["ip", "-6", "route", "flush", "cache"]);
    });

    await t.step("the LB hands Packet Too Big to the backend: the download finishes", async () => {
      const before = toBackend();
      const decapBefore = decap.stats().decap;
      const r = await download(topo, 20_000);
      const route = await pmtu();
      console.log(JSON.stringify({
        level: "info",
        msg: "e2e pmtud ipv6",
        ok: r.ok,
        ms: r.ms,
        tx_icmp_to_backend: String(toBackend() - before),
        backend_route: route.trim(),
      }));
      strictEqual(r.ok, true, "1 MB each way, verified");
      strictEqual(toBackend() > before, true, "Packet Too Big was encapsulated to the backend");
      strictEqual(decap.stats().decap > decapBefore, true, "and decapsulated there");
      strictEqual(route.includes("mtu 1280"), true, `be1 lowered its path MTU: ${route}`);
    });
  },
);
