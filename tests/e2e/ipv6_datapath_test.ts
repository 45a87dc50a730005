/**
 * The IPv6 datapath end to end in network namespaces, real packets through the real kernel
 * (docs/contracts.md "IPv6"): IPv6 clients reach a v6 VIP through one XDP LB node, encapsulated
 * over each backend's family, decapsulated by tc on the backend, answered directly (DSR):
 *
 * ```
 *   client ── c0 router ── l1 ── lb1 (XDP hf_lb; neighbor discovery passes to its kernel)
 *  2001:db8:10::2           │  outer IPv6 + UDP ──▶ b1 ── be1  (IPv6 backend, VIP6 on lo)
 *                           │  outer IPv4 + UDP ──▶ b2 ── be2  (IPv4 backend, VIP6 on lo;
 *                           │                                   replies over IPv6)
 * ```
 *
 * VIP6 port 80 → be1 (outer IPv6), port 81 → be2 (outer IPv4, decap switches the frame to IPv6).
 * The backends' side is set up as an operator does: `main.ts decap --iface eth0` in each backend
 * namespace, which takes VIP6 from `lo` (its counters are read from the map of the program it left
 * attached). The LB is `main.ts agent` as an operator runs it: a services file with the IPv6
 * frontends (`[VIP6]:80` → an IPv6 backend, `[VIP6]:81` → an IPv4 one) and `--src-addr6`; its
 * control plane writes hf_services6 / hf_backends6 / hf_backends and the Maglev tables, read
 * back here from the pinned maps. Addresses are added with `nodad` (no duplicate-address-detection
 * wait).
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { openTcMap } from "../harness/tc_maps.ts";
import { createTopology, HostProcess, startRedis, type Topology } from "../../lab/mod.ts";
import { attachXdp, BpfMap, BpfObject, DEFAULT_OBJECT_DIR } from "../../node/bpf/mod.ts";
import { countersByName } from "../../node/bpf/datapath.ts";
import { DECAP_REASONS, REASONS } from "../../node/bpf/consts.ts";
import { decodeServiceKey6 } from "../../node/bpf/structs6.ts";
import { formatIpv6 } from "../../lib/ipv6.ts";

const PEER = new URL("../../lab/clients/lb_peer.ts", import.meta.url).pathname;
const ROOT = new URL("../../", import.meta.url).pathname;
/** `main.ts decap` under the `agent` permission set, as README gives it to operators. */
const DECAP = [
  Deno.execPath(),
  ...["run", "-P=agent", "--no-prompt", "--quiet", "--config", `${ROOT}deno.json`],
  ...[`${ROOT}main.ts`, "decap", "--iface", "eth0", "--encap-port", "6080"],
  ...["--mss", String(1500 - 40 - 28)],
];
const VIP6 = "2001:db8:100::1";
/** The LB's services file: one service per port, each over one backend of one family. */
const SERVICES = `services:
  - name: default/web6
    frontends: ["[${VIP6}]:80/TCP"]
    backends: ["[2001:db8:12::2]:80/TCP"]
  - name: default/web4
    frontends: ["[${VIP6}]:81/TCP"]
    backends: ["10.12.2.2:81/TCP"]
`;

/**
 * `main.ts agent` on lb1 (`--netns`: bpffs stays this mount namespace's), file-driven, flow
 * sharing on (one LB node here; sharing IPv6 flows between nodes: ipv6_flow_sharing_test.ts).
 */
function agentArgv(netns: string, pinDir: string, config: string, redis: string): string[] {
  return [
    Deno.execPath(),
    ...["run", "-P=agent", "--no-prompt", "--quiet", "--config", `${ROOT}deno.json`],
    ...[`${ROOT}main.ts`, "agent", "--node-name", "lb1", "--config", config],
    ...["--redis", redis, "--listen", "none", "--pin-dir", pinDir, "--netns", netns],
    ...["--attach", "eth0", "--src-addr", "10.11.1.2", "--encap-port", "6080", "--seed", "7"],
    ...["--src-addr6", "2001:db8:11::2"],
  ];
}

/** The IPv6 frontends in the pinned hf_services6, as `[VIP]:PORT`, sorted. */
function services6(pinDir: string): string[] {
  using m = BpfMap.fromPinned(`${pinDir}/hf_services6`);
  return m.entries().map(([k]) => {
    const key = decodeServiceKey6(k);
    return `[${key.address}]:${key.port}`;
  }).sort();
}
const CONNECTIONS = 200;
const BULK_BYTES = 1 << 20;

/** Addresses added after the topology, without DAD: [host, ifname, address]. */
const ADDRESSES6: Array<[string, string, string]> = [
  ["client", "eth0", "2001:db8:10::2/64"],
  ["router", "c0", "2001:db8:10::1/64"],
  ["router", "l1", "2001:db8:11::1/64"],
  ["lb1", "eth0", "2001:db8:11::2/64"],
  ["router", "b1", "2001:db8:12::1/64"],
  ["be1", "eth0", "2001:db8:12::2/64"],
  ["router", "b2", "2001:db8:13::1/64"],
  ["be2", "eth0", "2001:db8:13::2/64"],
  ["be1", "lo", `${VIP6}/128`],
  ["be2", "lo", `${VIP6}/128`],
];

async function setUp(topo: Topology): Promise<void> {
  for (const [host, dev, address] of ADDRESSES6) {
    await topo.exec(host, ["ip", "-6", "addr", "add", address, "dev", dev, "nodad"]);
  }
  await topo.exec("router", ["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]);
  for (
    const [host, via] of [["client", "2001:db8:10::1"], ["be1", "2001:db8:12::1"], [
      "be2",
      "2001:db8:13::1",
    ]]
  ) await topo.exec(host!, ["ip", "-6", "route", "replace", "default", "via", via!]);
  await topo.exec("router", [
    "ip",
    "-6",
    "route",
    "replace",
    `${VIP6}/128`,
    "via",
    "2001:db8:11::2",
  ]);
}

function lastJson<T>(stdout: string): T {
  const line = stdout.trim().split("\n").filter((l) => l.startsWith("{")).pop();
  if (line === undefined) throw new Error(`no JSON line in output: ${JSON.stringify(stdout)}`);
  return JSON.parse(line) as T;
}

rootTest(
  "IPv6 e2e: v6 clients through XDP to IPv6 and IPv4 backends, decap, DSR, MSS",
  async (t) => {
    await using topo = await createTopology({
      hosts: [
        { name: "client" },
        { name: "router", sysctls: { "net.ipv4.ip_forward": 1 } },
        {
          name: "lb1",
        },
        { name: "be1" },
        { name: "be2" },
      ],
      links: [
        {
          a: { host: "client", ifname: "eth0", txChecksumOff: true },
          b: { host: "router", ifname: "c0" },
        },
        {
          a: { host: "router", ifname: "l1", address: "10.11.1.1/24", txChecksumOff: true },
          b: { host: "lb1", ifname: "eth0", address: "10.11.1.2/24" },
        },
        { a: { host: "router", ifname: "b1" }, b: { host: "be1", ifname: "eth0" } },
        {
          a: { host: "router", ifname: "b2", address: "10.12.2.1/24" },
          b: { host: "be2", ifname: "eth0", address: "10.12.2.2/24" },
        },
      ],
      routes: [{ host: "be2", to: "default", via: "10.12.2.1" }],
    });
    await setUp(topo);
    using pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
    const pinDir = `/sys/fs/bpf/${topo.ns("lb1")}`;
    const dir = await Deno.makeTempDir({ prefix: "hf-ipv6-e2e-" });
    await Deno.writeTextFile(`${dir}/services.yaml`, SERVICES);
    await using redis = await startRedis();
    const [cmd, ...args] = agentArgv(topo.ns("lb1"), pinDir, `${dir}/services.yaml`, redis.url);
    const child = new Deno.Command(cmd!, { args, stdout: "piped", stderr: "inherit" }).spawn();
    const agent = new HostProcess("lb1-agent", [cmd!, ...args], child, true);
    attachXdp(pass.program("hf_xdp_pass"), "l1", { netns: topo.ns("router") });
    const decaps: BpfMap[] = []; // each backend's hf_decap_stat
    const stats = (i: number) => countersByName(decaps[i]!, DECAP_REASONS);
    try {
      const ready = await agent.waitForLine((l) => l.includes('"msg":"ready"'), {
        timeoutMs: 30_000,
      });
      strictEqual(JSON.parse(ready).src_addr6, "2001:db8:11::2", ready);
      await t.step(
        "the agent's control plane writes both IPv6 frontends and their backends",
        async () => {
          const want = `[${VIP6}]:80,[${VIP6}]:81`;
          for (let i = 0; i < 100 && services6(pinDir).join() !== want; i++) {
            await new Promise((r) => setTimeout(r, 100));
          }
          strictEqual(services6(pinDir).join(), want, "hf_services6 holds the file's frontends");
          using b6 = BpfMap.fromPinned(`${pinDir}/hf_backends6`);
          const v6 = b6.entries().filter(([, v]) => v.subarray(0, 16).some((x) => x !== 0));
          strictEqual(v6.map(([, v]) => formatIpv6(v)).join(), "2001:db8:12::2");
        },
      );
      for (const [host, port] of [["be1", 80], ["be2", 81]] as const) {
        const decap = await topo.exec(host, DECAP);
        const attached = lastJson<{ vips6: string[] }>(decap.stdout);
        strictEqual(attached.vips6.join(), VIP6, `main.ts decap on ${host} took VIP6 from lo`);
        decaps.push(await openTcMap(topo, host, "eth0", "hf_decap_stat"));
        const server = topo.spawnDeno(host, PEER, {
          args: ["server", host, VIP6, String(port)],
          permissions: ["--allow-net"],
        });
        await server.waitForLine((l) => l.includes("listening"));
      }
      const peer = (args: string[]) =>
        topo.exec(
          "client",
          [Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp", PEER, ...args],
          { timeoutMs: 90_000 },
        );

      for (const [port, backend, outer] of [[80, "be1", "IPv6"], [81, "be2", "IPv4"]] as const) {
        await t.step(
          `${CONNECTIONS} connections to [VIP6]:${port} reach ${backend} over outer ${outer}`,
          async () => {
            const out = await peer(["client", VIP6, String(port), String(CONNECTIONS), "20"]);
            const s = lastJson<
              {
                ok: number;
                failed: number;
                wrongPeer: number;
                spread: Record<string, number>;
                errors: string[];
              }
            >(out.stdout);
            strictEqual(s.failed, 0, `failed connections: ${JSON.stringify(s.errors)}`);
            strictEqual(s.wrongPeer, 0, "the server saw the client's own IPv6 address and port");
            strictEqual(s.spread[backend], CONNECTIONS, JSON.stringify(s.spread));
          },
        );
        await t.step(
          `1 MB each way to [VIP6]:${port}, IPv6 MSS clamped on ${backend}`,
          async () => {
            const d = port === 80 ? 0 : 1;
            const clamped = stats(d).mss_clamped;
            await peer(["bulk", VIP6, String(port), String(BULK_BYTES), "20000"]);
            strictEqual(stats(d).mss_clamped > clamped, true, "the SYN/ACK's MSS was clamped");
          },
        );
      }
      await t.step(
        "counters: new flows and hits on the LB, decap on both backends, ND passed",
        () => {
          using reasons = BpfMap.fromPinned(`${pinDir}/hf_reasons`);
          const r = countersByName(reasons, REASONS);
          strictEqual(r.tx_new >= BigInt(2 * CONNECTIONS), true, `tx_new ${r.tx_new}`);
          strictEqual(r.tx_hit > 0n, true);
          strictEqual(r.pass_icmp > 0n, true, "neighbor discovery reached lb1's kernel");
          for (const i of decaps.keys()) strictEqual(stats(i).decap > 0n, true);
        },
      );
      strictEqual((await agent.stop()).code, 0, "SIGTERM stops the agent with exit 0");
    } finally {
      for (const m of decaps) m[Symbol.dispose]();
      await agent.stop();
      await Deno.remove(pinDir, { recursive: true }).catch(() => {});
      await Deno.remove(dir, { recursive: true });
    }
  },
);
