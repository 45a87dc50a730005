/**
 * The path-MTU rig of pmtud_test.ts (IPv4) and ipv6_pmtud_test.ts (IPv6): one topology, one LB
 * and one backend, built for either family, and the two checks both tests make.
 *
 * ```
 *  client ── e0 edge w0 ══ MTU 1280 ══ e1 router ─┬─ l1 ── lb1 (XDP hf_lb)
 *  (1500)                                          └─ b1 ── be1 (decap, VIP on lo, server)
 * ```
 *
 * be1 answers the client straight through the router (DSR, source = the VIP) with full-size
 * segments. The router cannot forward them over the 1280 link and sends its "too big" ICMP
 * (IPv4 fragmentation-needed, ICMPv6 Packet Too Big) to their source, the VIP — which it routes
 * to lb1. Only if lb1 hands that ICMP to be1 (encapsulated like the flow's packets) does be1
 * lower its path MTU and the download finish.
 */

import { strictEqual } from "node:assert/strict";
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
import { TsMaglevBuilder } from "../../policy-as/host/maglev_ts.ts";

const PEER = new URL("../../lab/clients/lb_peer.ts", import.meta.url).pathname;
const PORT = 80;
const BYTES = 1 << 20;
const ENCAP_PORT = 6080;
const MAGLEV_SIZE = 251;

/** What differs between the IPv4 and the IPv6 rig. */
interface FamilyPlan {
  readonly vip: string;
  readonly client: string;
  /** `ip` with its family flag. */
  readonly ip: readonly string[];
  /** [host, device, address]: the VIP on be1's `lo` included. */
  readonly addresses: ReadonlyArray<readonly [string, string, string]>;
  /** [host, destination, via]. */
  readonly routes: ReadonlyArray<readonly [string, string, string]>;
  /** Sysctls of the edge and the router (forwarding; loose rp_filter for DSR replies on b1). */
  readonly forwarding: Readonly<Record<string, number>>;
  /** The nft match of the router's "too big" ICMP sent to the VIP. */
  readonly tooBig: string;
  /** The "too big" message's name in assertion texts. */
  readonly tooBigName: string;
  /** Points the VIP at be1 in the LB's maps and marks it local in be1's decap maps. */
  configure(dp: Datapath, decap: DecapDatapath): Promise<void>;
}

const PLANS: Readonly<Record<4 | 6, FamilyPlan>> = {
  4: {
    vip: "10.0.100.1",
    client: "10.10.0.2",
    ip: ["ip"],
    addresses: [
      ["client", "eth0", "10.10.0.2/24"],
      ["edge", "e0", "10.10.0.1/24"],
      ["edge", "w0", "10.20.0.1/24"],
      ["router", "e1", "10.20.0.2/24"],
      ["router", "l1", "10.11.1.1/24"],
      ["lb1", "eth0", "10.11.1.2/24"],
      ["router", "b1", "10.12.1.1/24"],
      ["be1", "eth0", "10.12.1.2/24"],
      ["be1", "lo", "10.0.100.1/32"],
    ],
    routes: [
      ["client", "default", "10.10.0.1"],
      ["edge", "default", "10.20.0.2"],
      ["router", "10.10.0.0/24", "10.20.0.1"],
      ["router", "10.0.100.1/32", "10.11.1.2"],
      ["lb1", "default", "10.11.1.1"],
      ["be1", "default", "10.12.1.1"],
    ],
    forwarding: {
      "net.ipv4.ip_forward": 1,
      "net.ipv4.conf.all.rp_filter": 2,
      "net.ipv4.conf.default.rp_filter": 2,
    },
    tooBig: "ip daddr 10.0.100.1 icmp type destination-unreachable",
    tooBigName: "frag-needed",
    async configure(dp, decap) {
      const table = new TsMaglevBuilder().build(
        [{ key: `10.12.1.2:${PORT}`, weight: 1 }],
        MAGLEV_SIZE,
      );
      const maps = dp.lbMaps();
      await maps.updateBackend(1, { address: "10.12.1.2", port: PORT });
      await maps.updateMaglev(1, table);
      await maps.updateService({ address: this.vip, port: PORT, protocol: "TCP" }, {
        serviceId: 1,
        backendCount: 1,
        flowKeyMode: "five-tuple",
        maglevSize: table.length,
      });
      decap.addLocalVip(this.vip);
    },
  },
  6: {
    vip: "2001:db8:100::1",
    client: "2001:db8:10::2",
    ip: ["ip", "-6"],
    addresses: [
      ["client", "eth0", "2001:db8:10::2/64"],
      ["edge", "e0", "2001:db8:10::1/64"],
      ["edge", "w0", "2001:db8:20::1/64"],
      ["router", "e1", "2001:db8:20::2/64"],
      ["router", "l1", "2001:db8:11::1/64"],
      ["lb1", "eth0", "2001:db8:11::2/64"],
      ["router", "b1", "2001:db8:12::1/64"],
      ["be1", "eth0", "2001:db8:12::2/64"],
      ["be1", "lo", "2001:db8:100::1/128"],
    ],
    routes: [
      ["client", "default", "2001:db8:10::1"],
      ["edge", "default", "2001:db8:20::2"],
      ["router", "2001:db8:10::/64", "2001:db8:20::1"],
      ["router", "2001:db8:100::1/128", "2001:db8:11::2"],
      ["lb1", "default", "2001:db8:11::1"],
      ["be1", "default", "2001:db8:12::1"],
    ],
    forwarding: { "net.ipv6.conf.all.forwarding": 1 },
    tooBig: "ip6 daddr 2001:db8:100::1 icmpv6 type packet-too-big",
    tooBigName: "Packet Too Big",
    async configure(dp, decap) {
      const v6 = new Ipv6Maps(dp.object);
      v6.configure("2001:db8:11::2");
      v6.updateBackend(1, "2001:db8:12::2", PORT);
      await dp.lbMaps().updateMaglev(1, new Uint32Array(MAGLEV_SIZE).fill(1));
      v6.updateService({ address: this.vip, port: PORT, protocol: "TCP" }, {
        serviceId: 1,
        backendCount: 1,
        flags: 0,
        maglevSize: MAGLEV_SIZE,
      });
      addLocalVip6(decap.object, this.vip);
    },
  },
};

/** The hosts and links of both families; addresses come from the family's plan. */
async function buildTopology(plan: FamilyPlan): Promise<Topology> {
  const topo = await createTopology({
    hosts: ["client", "edge", "router", "lb1", "be1"].map((name) => ({ name })),
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
  try {
    // IPv6 addresses without duplicate address detection: usable at once.
    const nodad = plan.ip.includes("-6") ? ["nodad"] : [];
    for (const [host, dev, address] of plan.addresses) {
      await topo.exec(host, [...plan.ip, "addr", "add", address, "dev", dev, ...nodad]);
    }
    for (const host of ["edge", "router"]) {
      for (const [key, value] of Object.entries(plan.forwarding)) {
        await topo.exec(host, ["sysctl", "-q", "-w", `${key}=${value}`]);
      }
    }
    for (const [host, to, via] of plan.routes) {
      await topo.exec(host, [...plan.ip, "route", "replace", to, "via", via]);
    }
  } catch (err) {
    await topo.destroy();
    throw err;
  }
  return topo;
}

/** The running rig: topology, LB datapath on lb1, decap and a server on be1. */
export interface PmtudRig extends AsyncDisposable {
  readonly family: 4 | 6;
  readonly topo: Topology;
  readonly vip: string;
  /** The LB's count of ICMP errors it encapsulated to a backend. */
  icmpToBackend(): bigint;
  /** be1's decap count. */
  decapCount(): bigint;
  /** be1's route to the client from the VIP (`… mtu 1280` once it learned the path MTU). */
  backendRoute(): Promise<string>;
  /** One download (up and down of 1 MiB, verified) from the client: its JSON summary. */
  download(timeoutMs: number): Promise<{ ok: boolean; ms?: number }>;
}

/**
 * Builds the rig for `family` and starts be1's server. Dispose it to close the BPF objects and
 * tear the namespaces down.
 */
export async function openPmtudRig(family: 4 | 6): Promise<PmtudRig> {
  const plan = PLANS[family];
  await using stack = new AsyncDisposableStack();
  const topo = stack.use(await buildTopology(plan));
  const pass = stack.use(BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`));
  const dp = stack.use(await Datapath.open({ pinDir: null }));
  const decap = stack.use(await DecapDatapath.open());
  dp.configure({ srcAddr: "10.11.1.2", encapPort: ENCAP_PORT, seed: 0 });
  await plan.configure(dp, decap);
  dp.attach("eth0", { netns: topo.ns("lb1"), mode: "native" });
  attachXdp(pass.program("hf_xdp_pass"), "l1", { netns: topo.ns("router") });
  decap.configure({ encapPort: ENCAP_PORT, mssMax: 1432 });
  decap.attach("eth0", { netns: topo.ns("be1") });
  const server = topo.spawnDeno("be1", PEER, {
    args: ["server", "be1", plan.vip, String(PORT)],
    permissions: ["--allow-net"],
  });
  await server.waitForLine((l) => l.includes("listening"));
  const owned = stack.move();
  return {
    family,
    topo,
    vip: plan.vip,
    icmpToBackend: () => dp.reasons().tx_icmp_to_backend,
    decapCount: () => decap.stats().decap,
    backendRoute: async () =>
      (await topo.exec("be1", [...plan.ip, "route", "get", plan.client, "from", plan.vip]))
        .stdout,
    download: (timeoutMs) => download(topo, plan.vip, timeoutMs),
    [Symbol.asyncDispose]: () => owned.disposeAsync(),
  };
}

async function download(
  topo: Topology,
  vip: string,
  timeoutMs: number,
): Promise<{ ok: boolean; ms?: number }> {
  const argv = [Deno.execPath(), "run", "--quiet", "--allow-net", PEER, "bulk", vip];
  const out = await topo.exec("client", [...argv, `${PORT}`, `${BYTES}`, `${timeoutMs}`], {
    check: false,
    timeoutMs: timeoutMs + 30_000,
  });
  const line = out.stdout.trim().split("\n").filter((l) => l.startsWith("{")).pop();
  if (line === undefined) throw new Error(`bulk printed no summary: ${JSON.stringify(out)}`);
  return JSON.parse(line) as { ok: boolean; ms?: number };
}

/**
 * The control: the router's "too big" ICMP to the VIP is dropped on its way out (as an LB that
 * keeps ICMP for itself would) — the download black-holes at the 1280 link, the LB sees no ICMP
 * and be1 never learns the path MTU. Route caches are flushed afterwards for the next step.
 */
export async function assertHangsWithoutTooBig(rig: PmtudRig): Promise<void> {
  const plan = PLANS[rig.family];
  const table = `hf_pmtud${rig.family}`;
  const nft = (cmd: string) => rig.topo.exec("router", ["nft", ...cmd.split(" ")]);
  await nft(`add table inet ${table}`);
  await nft(`add chain inet ${table} out { type filter hook output priority 0 ; }`);
  await nft(`add rule inet ${table} out ${plan.tooBig} drop`);
  try {
    const before = rig.icmpToBackend();
    const r = await rig.download(4000);
    strictEqual(r.ok, false, "full-size DSR replies black-hole at the 1280 link");
    strictEqual(rig.icmpToBackend(), before, `no ${plan.tooBigName} reached the LB`);
    const route = await rig.backendRoute();
    strictEqual(route.includes("mtu 1280"), false, "be1 never learned the path MTU");
  } finally {
    await nft(`delete table inet ${table}`);
  }
  await rig.topo.exec("client", [...plan.ip, "route", "flush", "cache"]);
  await rig.topo.exec("be1", [...plan.ip, "route", "flush", "cache"]);
}

/**
 * The LB hands the router's "too big" ICMP to be1 encapsulated, be1 decapsulates it and lowers
 * its path MTU to 1280, and the download finishes (1 MiB each way, verified). Logs one line.
 */
export async function assertDownloadFinishes(rig: PmtudRig): Promise<void> {
  const plan = PLANS[rig.family];
  const before = rig.icmpToBackend();
  const decapBefore = rig.decapCount();
  const r = await rig.download(20_000);
  const route = await rig.backendRoute();
  console.log(JSON.stringify({
    level: "info",
    msg: rig.family === 4 ? "e2e pmtud" : "e2e pmtud ipv6",
    ok: r.ok,
    ms: r.ms,
    tx_icmp_to_backend: String(rig.icmpToBackend() - before),
    backend_route: route.trim(),
  }));
  strictEqual(r.ok, true, "1 MB each way, verified");
  strictEqual(
    rig.icmpToBackend() > before,
    true,
    `${plan.tooBigName} was encapsulated to the backend`,
  );
  strictEqual(rig.decapCount() > decapBefore, true, "and decapsulated there");
  strictEqual(route.includes("mtu 1280"), true, `be1 lowered its path MTU: ${route}`);
}
