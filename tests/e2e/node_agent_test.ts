/**
 * `main.ts node` end to end in network namespaces (issue 22, docs/backends.md): pods get the LB's
 * traffic with nothing set inside them — no `main.ts decap`, no LB IP on their `lo`.
 *
 * ```
 *  client ── c0 router ── l1 ── lb1 (`main.ts agent`, XDP: encapsulates to the pod IPs)
 *  10.10.0.2   │
 *              └─ n1 ── node1 eth0 10.12.1.2 (uplink: tc hf_node_in / hf_node_out)
 *                        ├─ vp1 ── pod1 eth0 10.2.0.5/32 (server on :8080)   /32 host routes,
 *                        └─ vp2 ── pod2 eth0 10.2.0.6/32 (server on :8080)   proxy ARP, and nft
 *                                                    drops what a pod sends from another address
 * ```
 *
 * The Service is port 80 → targetPort 8080. The node agent follows the model in Redis (published
 * by a test controller from the same services as the LB agent's file) and a pods file; it runs
 * in this process with `--netns` (its programs go on node1's uplink). Replies go straight from
 * node1 to the client (DSR) with the LB IP and port as source.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest, until } from "../harness/mod.ts";
import { createTopology, run, type Topology } from "../../lab/mod.ts";
import { unmountUnder } from "../../lab/cluster.ts";
import { startRedis } from "../../lab/redis_server.ts";
import {
  attachTc,
  attachXdp,
  BpfMap,
  BpfObject,
  DEFAULT_OBJECT_DIR,
  NODE_TC_FILTER,
  NodeDatapath,
} from "../../node/bpf/mod.ts";
import { decodeNodeFlow, decodeNodeSvc } from "../../node/bpf/node_structs.ts";
import { NODE_REASONS, u32 } from "../../node/bpf/mod.ts";
import { connectModelStore } from "../../controller/model/mod.ts";
import { startTestController } from "../../controller/model/_testing.ts";
import { captureLogs } from "../../lib/log.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const PEER = new URL("../../lab/clients/lb_peer.ts", import.meta.url).pathname;
const VIP = "10.0.100.1";
const VIP6 = "2001:db8:100::1";
const PODS = [
  { name: "web-1", host: "pod1", ip: "10.2.0.5", ip6: "2001:db8:2::5", veth: "vp1" },
  { name: "web-2", host: "pod2", ip: "10.2.0.6", ip6: "2001:db8:2::6", veth: "vp2" },
] as const;
type Pod = typeof PODS[number];

/** The Service in both families (one service per family: frontends pair with backends so). */
const services = (pods: readonly Pod[]) =>
  `services:
  - name: default/web
    frontends: [{ address: ${VIP}:80/TCP, portName: http }]
    backends:
${pods.map((p) => `      - { address: ${p.ip}:8080/TCP, portName: http }`).join("\n")}
  - name: default/web6
    frontends: [{ address: "[${VIP6}]:80/TCP", portName: http }]
    backends:
${pods.map((p) => `      - { address: "[${p.ip6}]:8080/TCP", portName: http }`).join("\n")}
`;
const podsFile = (pods: readonly Pod[]) =>
  `pods:\n${
    pods.map((p) => `  - { name: default/${p.name}, ips: [${p.ip}, "${p.ip6}"] }`).join("\n")
  }\n`;

/** Calico-like anti-spoofing on the node: a pod's packets must carry its own address. */
const NFT = `table inet hf_antispoof {
  chain pods {
    type filter hook prerouting priority -150;
${
  PODS.map((p) =>
    `    iifname "${p.veth}" ip saddr ${p.ip} counter accept
    iifname "${p.veth}" ip saddr != ${p.ip} counter drop
    iifname "${p.veth}" ip6 saddr ${p.ip6} counter accept
    iifname "${p.veth}" ip6 saddr != { ${p.ip6}, ::, fe80::/10 } counter drop`
  ).join("\n")
}
  }
}
`;

/**
 * IPv6 beside the IPv4 plan (added here, without DAD): 2001:db8:1X::/64 on the links, the pods'
 * /128 on their eth0 with the node's veth end as their gateway (fe80::1, as Calico's), /128 host
 * routes on the node, the router's routes to the LB IP and the pods' prefix.
 */
async function addIpv6(topo: Topology): Promise<void> {
  const addr = (host: string, a: string, dev: string) =>
    topo.exec(host, ["ip", "-6", "addr", "add", a, "dev", dev, "nodad"]);
  const route = (host: string, ...r: string[]) =>
    topo.exec(host, ["ip", "-6", "route", "add", ...r]);
  for (const host of ["router", "node1"]) {
    await topo.exec(host, ["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]);
  }
  const links = [["client", "eth0", "c0", 10], ["lb1", "eth0", "l1", 11], [
    "node1",
    "eth0",
    "n1",
    12,
  ]];
  for (const [host, dev, rdev, n] of links) {
    await addr("router", `2001:db8:${n}::1/64`, rdev as string);
    await addr(host as string, `2001:db8:${n}::2/64`, dev as string);
    await route(host as string, "default", "via", `2001:db8:${n}::1`);
  }
  await route("router", `${VIP6}/128`, "via", "2001:db8:11::2");
  await route("router", "2001:db8:2::/64", "via", "2001:db8:12::2");
  for (const p of PODS) {
    await addr("node1", "fe80::1/64", p.veth);
    await addr(p.host, `${p.ip6}/128`, "eth0");
    await route(p.host, "default", "via", "fe80::1", "dev", "eth0");
    await route("node1", `${p.ip6}/128`, "dev", p.veth);
  }
}

function lastJson<T>(stdout: string): T {
  const line = stdout.trim().split("\n").filter((l) => l.startsWith("{")).pop();
  if (line === undefined) throw new Error(`no JSON line in output: ${JSON.stringify(stdout)}`);
  return JSON.parse(line) as T;
}

/** Packets counted by the anti-spoofing rules: [accepted, dropped] over both pods. */
function nftCounts(listing: string): [number, number] {
  let accepted = 0, dropped = 0;
  for (const m of listing.matchAll(/counter packets (\d+) bytes \d+ (accept|drop)/g)) {
    if (m[2] === "accept") accepted += Number(m[1]);
    else dropped += Number(m[1]);
  }
  return [accepted, dropped];
}

rootTest(
  "node agent: pods behind veths get the LB's traffic, DSR, restart, pod removal",
  async (t) => {
    const dir = await Deno.makeTempDir({ prefix: `hf-${Deno.pid}-node-` });
    // lb1's bpffs is a mount in the root mount namespace (`ip netns exec` gives the agent a
    // private one, where it could not see /sys/fs/bpf as bpffs): as lab/cluster.ts does.
    const lbPin = `${dir}/bpffs-lb1`;
    const nodePin = `/sys/fs/bpf/hf-${Deno.pid}-node1`;
    await using topo = await createTopology({
      hosts: [
        { name: "client" },
        {
          name: "router",
          sysctls: {
            "net.ipv4.ip_forward": 1,
            "net.ipv4.conf.all.rp_filter": 2,
            "net.ipv4.conf.default.rp_filter": 2,
          },
        },
        { name: "lb1" },
        {
          name: "node1",
          sysctls: {
            "net.ipv4.ip_forward": 1,
            ...Object.fromEntries(PODS.map((p) => [`net.ipv4.conf.${p.veth}.proxy_arp`, 1])),
          },
        },
        ...PODS.map((p) => ({ name: p.host })),
      ],
      links: [
        {
          a: { host: "client", ifname: "eth0", address: "10.10.0.2/24", txChecksumOff: true },
          b: { host: "router", ifname: "c0", address: "10.10.0.1/24" },
        },
        {
          a: { host: "router", ifname: "l1", address: "10.11.1.1/24", txChecksumOff: true },
          b: { host: "lb1", ifname: "eth0", address: "10.11.1.2/24" },
        },
        {
          a: { host: "router", ifname: "n1", address: "10.12.1.1/24" },
          b: { host: "node1", ifname: "eth0", address: "10.12.1.2/24" },
        },
        ...PODS.map((p) => ({
          a: { host: "node1", ifname: p.veth },
          b: { host: p.host, ifname: "eth0", address: `${p.ip}/32` },
        })),
      ],
      routes: [
        { host: "client", to: "default", via: "10.10.0.1" },
        { host: "lb1", to: "default", via: "10.11.1.1" },
        { host: "node1", to: "default", via: "10.12.1.1" },
        { host: "router", to: `${VIP}/32`, via: "10.11.1.2" },
        { host: "router", to: "10.2.0.0/24", via: "10.12.1.2" },
        ...PODS.map((p) => ({ host: "node1", to: `${p.ip}/32`, dev: p.veth })),
        ...PODS.map((p) => ({ host: p.host, to: "default", dev: "eth0" })),
      ],
    });
    await addIpv6(topo);
    await Deno.mkdir(lbPin);
    await run(["mount", "-t", "bpf", "bpf", lbPin]);
    await Deno.writeTextFile(`${dir}/nft.conf`, NFT);
    await topo.exec("node1", ["nft", "-f", `${dir}/nft.conf`]);
    await using redis = await startRedis();
    const store = connectModelStore({ url: redis.url });
    using logs = captureLogs();
    using pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
    const { main: nodeMain } = await import("../../node/backends/main.ts");
    const nodeAgent = () => {
      const stop = new AbortController();
      const exit = nodeMain([
        ...["--node-name", "node1", "--model", "redis", "--redis", redis.url],
        ...["--pods", `${dir}/pods.yaml`, "--netns", topo.ns("node1"), "--uplink", "eth0"],
        ...["--pin-dir", nodePin, "--listen", "none"],
      ], { signal: stop.signal });
      return { stop: async () => (stop.abort(), await exit), exit };
    };
    const applied = () => logs.records.filter((r) => r.msg === "node state applied").length;
    const pinned = (name: string) => BpfMap.fromPinned(`${nodePin}/${name}`);
    const nodeStats = () => {
      using m = pinned("hf_node_stat");
      const out: Record<string, bigint> = {};
      NODE_REASONS.forEach((n, i) => {
        const v = m.lookup(u32(i));
        let sum = 0n;
        for (let o = 0; v !== null && o < v.length; o += 8) {
          sum += new DataView(v.buffer, v.byteOffset).getBigUint64(o, true);
        }
        out[n] = sum;
      });
      return out;
    };
    const peer = (args: string[]) =>
      topo.exec("client", [
        Deno.execPath(),
        "run",
        "--quiet",
        "--allow-net",
        "--allow-read=/tmp",
        PEER,
        ...args,
      ], { timeoutMs: 90_000 });
    let agent: ReturnType<typeof nodeAgent> | null = null;
    try {
      await using _ctl = await startTestController(store, services(PODS));
      await Deno.writeTextFile(`${dir}/services.yaml`, services(PODS));
      await Deno.writeTextFile(`${dir}/pods.yaml`, podsFile(PODS));
      for (const p of PODS) {
        for (const ip of [p.ip, p.ip6]) {
          const server = topo.spawnDeno(p.host, PEER, {
            args: ["server", p.name, ip, "8080"],
            permissions: ["--allow-net"],
          });
          await server.waitForLine((l) => l.includes("listening"));
        }
      }
      attachXdp(pass.program("hf_xdp_pass"), "l1", { netns: topo.ns("router") });
      const lb = topo.spawn("lb1", [
        ...[Deno.execPath(), "run", "-P=agent", "--quiet", MAIN, "agent", "--node-name", "lb1"],
        ...[
          "--attach",
          "eth0",
          "--src-addr",
          "10.11.1.2",
          "--src-addr6",
          "2001:db8:11::2",
          "--config",
          `${dir}/services.yaml`,
        ],
        ...["--no-flow-sync", "--pin-dir", lbPin, "--listen", "none"],
      ], { stderr: "null" });
      await lb.waitForLine((l) => l.includes('"msg":"ready"'), { timeoutMs: 30_000 });
      agent = nodeAgent();
      await until("the node agent applied model and pods", () => applied() >= 1, 20_000);

      await t.step("each pod's frontend logged and in the maps, port 80 → target port 8080", () => {
        const lines = logs.records.map((r) => r.msg);
        for (const p of PODS) {
          for (
            const want of [
              `pod ${p.name} ${p.ip} serves ${VIP}:80/TCP → :8080`,
              `pod ${p.name} ${p.ip6} serves [${VIP6}]:80/TCP → :8080`,
            ]
          ) strictEqual(lines.includes(want), true, `log line "${want}"`);
        }
        using svc = pinned("hf_node_svc");
        using svc6 = pinned("hf_node_svc6");
        deepStrictEqual(
          [...svc.entries(), ...svc6.entries()].map(([k, v]) => decodeNodeSvc(k, v))
            .map((f) => `${f.pod} ${f.targetPort}`).sort(),
          PODS.flatMap((p) => [`${p.ip} 8080`, `${p.ip6} 8080`]).sort(),
        );
      });

      await t.step(
        "client connections reach both pods with the client's address, via DSR",
        async () => {
          for (const vip of [VIP, VIP6]) {
            const out = await peer(["client", vip, "80", "100", "10"]);
            const s = lastJson<
              {
                ok: number;
                failed: number;
                wrongPeer: number;
                spread: Record<string, number>;
                errors: string[];
              }
            >(out.stdout);
            strictEqual(s.failed, 0, `${vip}: failed connections: ${JSON.stringify(s.errors)}`);
            strictEqual(s.wrongPeer, 0, `${vip}: each pod saw the client's own address and port`);
            strictEqual(s.ok, 100, vip);
            for (const p of PODS) {
              strictEqual((s.spread[p.name] ?? 0) > 0, true, `${vip}: ${JSON.stringify(s.spread)}`);
            }
          }
          const st = nodeStats();
          strictEqual(st.nat_in! >= 200n, true, `nat_in ${st.nat_in}`);
          strictEqual(
            st.nat_out! >= 200n,
            true,
            `nat_out ${st.nat_out} (replies translated on egress)`,
          );
          const [accepted, dropped] = nftCounts(
            (await topo.exec("node1", ["nft", "list", "table", "inet", "hf_antispoof"])).stdout,
          );
          strictEqual(
            accepted > 0,
            true,
            "the replies passed the anti-spoofing rule with the pod's own address",
          );
          strictEqual(dropped, 0, "nothing a pod sent was dropped as spoofed");
        },
      );

      await t.step("a bulk transfer: the pod's SYN/ACK MSS clamped, no black hole", async () => {
        for (const vip of [VIP, VIP6]) {
          const before = nodeStats().mss_clamped!;
          const out = await peer(["bulk", vip, "80", String(1 << 20), "30000"]);
          const b = lastJson<{ ok: boolean }>(out.stdout);
          strictEqual(b.ok, true, `${vip}: ${out.stdout}`);
          strictEqual(nodeStats().mss_clamped! > before, true, `${vip}: SYN/ACK clamped`);
        }
      });

      await t.step(
        "node agent stopped and restarted: adopts, held connections keep working",
        async () => {
          const go = [1, 2].map((n) => `/tmp/hf-${Deno.pid}-node-go${n}`);
          for (const f of go) await Deno.remove(f).catch(() => {});
          const holder = topo.spawn("client", [
            ...[Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp", PEER],
            ...["hold", VIP, "80", "40", ...go],
          ]);
          const phase0 = JSON.parse(
            await holder.waitForLine((l) => l.includes('"phase":0'), { timeoutMs: 30_000 }),
          ) as { held: number };
          strictEqual(phase0.held, 40);
          strictEqual(await agent!.stop(), 0);
          agent = null;
          // No agent: the programs and pinned maps keep serving.
          await Deno.writeTextFile(go[0]!, "");
          const p1 = JSON.parse(
            await holder.waitForLine((l) => l.includes('"phase":1'), { timeoutMs: 30_000 }),
          ) as { same: number; broken: number; moved: number };
          deepStrictEqual(p1, { msg: "phase", phase: 1, same: 40, moved: 0, broken: 0 });
          const before = applied();
          agent = nodeAgent();
          await until(
            "the restarted node agent applied its state",
            () => applied() > before,
            20_000,
          );
          const start = logs.records.filter((r) => r.msg === "starting").pop() as
            | { adopted?: { frontends: number; flows: number } }
            | undefined;
          strictEqual(start?.adopted?.frontends, 2 * PODS.length, "adopted the pinned frontends");
          strictEqual((start?.adopted?.flows ?? 0) >= 40, true, "adopted the recorded flows");
          const last = logs.records.filter((r) => r.msg === "node state applied").pop();
          strictEqual(last?.added, 0, "nothing to rewrite after a restart");
          strictEqual(last?.removed, 0, "nothing removed after a restart");
          await Deno.writeTextFile(go[1]!, "");
          const p2 = JSON.parse(
            await holder.waitForLine((l) => l.includes('"phase":2'), { timeoutMs: 30_000 }),
          ) as { same: number; broken: number };
          deepStrictEqual(p2, { msg: "phase", phase: 2, same: 40, moved: 0, broken: 0 });
          for (const f of go) await Deno.remove(f).catch(() => {});
        },
      );

      await t.step(
        "measured, for docs/backends.md: the reverse translation on the pods' veths (tc ingress) " +
          "instead of the uplink is dropped by the anti-spoofing rule",
        async () => {
          // The same program on the host side of each pod's veth: it rewrites the pod's source
          // to the LB IP before netfilter sees the packet.
          using veth = await NodeDatapath.open({ pinDir: nodePin });
          const at = PODS.map((p) =>
            attachTc(veth.nodeOut, p.veth, {
              netns: topo.ns("node1"),
              direction: "ingress",
              filter: NODE_TC_FILTER,
            })
          );
          try {
            const listing = async () =>
              nftCounts(
                (await topo.exec("node1", ["nft", "list", "table", "inet", "hf_antispoof"])).stdout,
              );
            const [, droppedBefore] = await listing();
            const r = await topo.exec("client", [
              ...[Deno.execPath(), "run", "--quiet", "--allow-net", PEER],
              ...["client", VIP, "80", "1", "1"],
            ], { check: false, timeoutMs: 4_000 });
            const [, droppedAfter] = await listing();
            strictEqual(r.stdout.includes('"ok":1'), false, "no connection completes");
            strictEqual(droppedAfter > droppedBefore, true, "the pod's replies dropped as spoofed");
          } finally {
            for (const a of at) a.detach();
          }
        },
      );

      await t.step(
        "a pod deleted: its frontends and flows removed, the other pod serves all",
        async () => {
          const [kept, gone] = PODS;
          await _ctl.file.load(services([kept]));
          await Deno.writeTextFile(`${dir}/services.yaml`, services([kept]));
          await Deno.writeTextFile(`${dir}/pods.yaml`, podsFile([kept]));
          await until(
            "web-2's state removed (both families)",
            () =>
              [
                `pod ${gone.name} ${gone.ip} no longer serves ${VIP}:80/TCP: removed`,
                `pod ${gone.name} ${gone.ip6} no longer serves [${VIP6}]:80/TCP: removed`,
              ].every((line) => logs.records.some((r) => r.msg === line)),
            20_000,
          );
          {
            using svc = pinned("hf_node_svc");
            using svc6 = pinned("hf_node_svc6");
            deepStrictEqual(
              [...svc.entries(), ...svc6.entries()].map(([k, v]) => decodeNodeSvc(k, v).pod),
              [kept.ip, kept.ip6],
            );
            using flows = pinned("hf_node_flows");
            using flows6 = pinned("hf_node_flows6");
            const left = [...flows.entries(), ...flows6.entries()].map(([k, v]) =>
              decodeNodeFlow(k, v)
            );
            strictEqual(
              left.some((f) => f.pod === kept.ip6),
              true,
              "the kept pod's IPv6 flows stay",
            );
            strictEqual(
              left.some((f) => f.pod === gone.ip || f.pod === gone.ip6),
              false,
              "no flow of the deleted pod left",
            );
          }
          // The LB agent follows its file: once it has only web-1, every connection reaches it.
          await until(
            "connections all reach web-1",
            async () => {
              for (const vip of [VIP, VIP6]) {
                const out = await peer(["client", vip, "80", "20", "5"]);
                const s = lastJson<{ ok: number; spread: Record<string, number> }>(out.stdout);
                if (s.ok !== 20 || (s.spread[kept.name] ?? 0) !== 20) return false;
              }
              return true;
            },
            30_000,
            500,
          );
        },
      );
    } finally {
      await agent?.stop();
      await store.close().catch(() => {});
      await topo.destroy();
      await unmountUnder(dir);
      await Deno.remove(nodePin, { recursive: true }).catch(() => {});
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
);
