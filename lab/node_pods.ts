/**
 * A node with pods behind veths, as a CNI makes them, for the node agent (`main.ts node`,
 * docs/backends.md) — shared by `tests/e2e/node_agent_test.ts` and `bench/backend.ts`:
 *
 * ```
 *  client ── c0 router ── l1 ── lb1 (`main.ts agent --config`, XDP: encapsulates to pod IPs)
 *              └─ n1 ── node1 eth0 (the uplink)
 *                        ├─ vp1 ── pod1 eth0 10.2.0.5/32, 2001:db8:2::5/128 (server :8080)
 *                        └─ vp2 ── pod2 eth0 10.2.0.6/32, 2001:db8:2::6/128 (server :8080)
 * ```
 *
 * Like Calico: /32 and /128 host routes on the node to each pod's veth, proxy ARP on the veths
 * (the pods' IPv4 default route is `dev eth0`), the node's veth end `fe80::1` as the pods' IPv6
 * gateway, and an nft rule on the node dropping what a pod sends from another address than its
 * own (`antiSpoofCounts`). The LB agent's services file is `default/web` (80 → 8080) over the
 * pods' IPv4 addresses and `default/web6` over their IPv6 ones. The caller runs the node agent.
 *
 * @module
 */

import { createTopology, type Topology } from "./netns.ts";
import { run } from "./command.ts";
import type { ExecResult } from "./command.ts";
import type { HostProcess } from "./host_process.ts";
import { unmountUnder } from "./_anycast_sweep.ts";
import { attachXdp, BpfObject, DEFAULT_OBJECT_DIR } from "../node/bpf/mod.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
/** The TCP peer the servers and clients run (lab/clients/lb_peer.ts). */
export const PEER = new URL("./clients/lb_peer.ts", import.meta.url).pathname;
export const POD_VIP = "10.0.100.1";
export const POD_VIP6 = "2001:db8:100::1";

/** A pod of the lab. */
export interface LabPod {
  readonly name: string;
  readonly host: string;
  readonly ip: string;
  readonly ip6: string;
  readonly veth: string;
}

export const LAB_PODS: readonly LabPod[] = [
  { name: "web-1", host: "pod1", ip: "10.2.0.5", ip6: "2001:db8:2::5", veth: "vp1" },
  { name: "web-2", host: "pod2", ip: "10.2.0.6", ip6: "2001:db8:2::6", veth: "vp2" },
];

/** The services file over `pods`: one service per family (port 80 → targetPort 8080). */
export function podServices(pods: readonly LabPod[]): string {
  const be = (a: (p: LabPod) => string) =>
    pods.map((p) => `      - { address: "${a(p)}:8080/TCP", portName: http }`).join("\n");
  return `services:
  - name: default/web
    frontends: [{ address: "${POD_VIP}:80/TCP", portName: http }]
    backends:
${be((p) => p.ip)}
  - name: default/web6
    frontends: [{ address: "[${POD_VIP6}]:80/TCP", portName: http }]
    backends:
${be((p) => `[${p.ip6}]`)}
`;
}

/** The node agent's pods file (`--pods`) for `pods`. */
export function podsFile(pods: readonly LabPod[]): string {
  return `pods:\n${
    pods.map((p) => `  - { name: default/${p.name}, ips: [${p.ip}, "${p.ip6}"] }`).join("\n")
  }\n`;
}

const ANTI_SPOOF = (pods: readonly LabPod[]) =>
  `table inet hf_antispoof {
  chain pods {
    type filter hook prerouting priority -150;
${
    pods.map((p) =>
      `    iifname "${p.veth}" ip saddr ${p.ip} counter accept
    iifname "${p.veth}" ip saddr != ${p.ip} counter drop
    iifname "${p.veth}" ip6 saddr ${p.ip6} counter accept
    iifname "${p.veth}" ip6 saddr != { ${p.ip6}, ::, fe80::/10 } counter drop`
    ).join("\n")
  }
  }
}
`;

/** The running lab. */
export interface NodePodsLab extends AsyncDisposable {
  readonly topo: Topology;
  readonly dir: string;
  /** Where the pods file and the services file are (rewrite them to change the lab). */
  readonly podsPath: string;
  readonly servicesPath: string;
  /** The LB agent (lb1). */
  readonly lb: HostProcess;
  /** Runs lab/clients/lb_peer.ts in the client with `args`. */
  peer(args: readonly string[], options?: { timeoutMs?: number; check?: boolean }): Promise<
    ExecResult
  >;
  /** Packets the anti-spoofing rules [accepted, dropped] over every pod, both families. */
  antiSpoofCounts(): Promise<[number, number]>;
}

async function addIpv6(topo: Topology): Promise<void> {
  const addr = (host: string, a: string, dev: string) =>
    topo.exec(host, ["ip", "-6", "addr", "add", a, "dev", dev, "nodad"]);
  const route = (host: string, ...r: string[]) =>
    topo.exec(host, ["ip", "-6", "route", "add", ...r]);
  for (const host of ["router", "node1"]) {
    await topo.exec(host, ["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]);
  }
  for (const [host, rdev, n] of [["client", "c0", 10], ["lb1", "l1", 11], ["node1", "n1", 12]]) {
    await addr("router", `2001:db8:${n}::1/64`, rdev as string);
    await addr(host as string, `2001:db8:${n}::2/64`, "eth0");
    await route(host as string, "default", "via", `2001:db8:${n}::1`);
  }
  await route("router", `${POD_VIP6}/128`, "via", "2001:db8:11::2");
  await route("router", "2001:db8:2::/64", "via", "2001:db8:12::2");
  for (const p of LAB_PODS) {
    await addr("node1", "fe80::1/64", p.veth);
    await addr(p.host, `${p.ip6}/128`, "eth0");
    await route(p.host, "default", "via", "fe80::1", "dev", "eth0");
    await route("node1", `${p.ip6}/128`, "dev", p.veth);
  }
}

/** Builds the lab, starts the pods' servers and the LB agent (ready). */
export async function startNodePodsLab(): Promise<NodePodsLab> {
  const dir = await Deno.makeTempDir({ prefix: `hf-${Deno.pid}-nodepods-` });
  const topo = await createTopology({
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
          ...Object.fromEntries(LAB_PODS.map((p) => [`net.ipv4.conf.${p.veth}.proxy_arp`, 1])),
        },
      },
      ...LAB_PODS.map((p) => ({ name: p.host })),
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
        // TX checksum offload off on the uplink: the kernel finishes a pod's partial checksum
        // (CHECKSUM_PARTIAL, after hf_node_out rewrote it) in software before it leaves, as a
        // NIC would, so a wrong pseudo-header seed reaches the client as a bad checksum (veths
        // alone would carry it unverified).
        b: { host: "node1", ifname: "eth0", address: "10.12.1.2/24", txChecksumOff: true },
      },
      ...LAB_PODS.map((p) => ({
        a: { host: "node1", ifname: p.veth },
        b: { host: p.host, ifname: "eth0", address: `${p.ip}/32` },
      })),
    ],
    routes: [
      { host: "client", to: "default", via: "10.10.0.1" },
      { host: "lb1", to: "default", via: "10.11.1.1" },
      { host: "node1", to: "default", via: "10.12.1.1" },
      { host: "router", to: `${POD_VIP}/32`, via: "10.11.1.2" },
      { host: "router", to: "10.2.0.0/24", via: "10.12.1.2" },
      ...LAB_PODS.map((p) => ({ host: "node1", to: `${p.ip}/32`, dev: p.veth })),
      ...LAB_PODS.map((p) => ({ host: p.host, to: "default", dev: "eth0" })),
    ],
  });
  // lb1's bpffs is a mount in the root mount namespace (`ip netns exec` gives the agent a
  // private one, where /sys/fs/bpf is not bpffs), as lab/cluster.ts does.
  const lbPin = `${dir}/bpffs-lb1`;
  const pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
  const teardown = async () => {
    await topo.destroy();
    pass[Symbol.dispose]();
    await unmountUnder(dir);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    await addIpv6(topo);
    await Deno.mkdir(lbPin);
    await run(["mount", "-t", "bpf", "bpf", lbPin]);
    await Deno.writeTextFile(`${dir}/nft.conf`, ANTI_SPOOF(LAB_PODS));
    await topo.exec("node1", ["nft", "-f", `${dir}/nft.conf`]);
    const servicesPath = `${dir}/services.yaml`, podsPath = `${dir}/pods.yaml`;
    await Deno.writeTextFile(servicesPath, podServices(LAB_PODS));
    await Deno.writeTextFile(podsPath, podsFile(LAB_PODS));
    for (const p of LAB_PODS) {
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
      ...["--attach", "eth0", "--src-addr", "10.11.1.2", "--src-addr6", "2001:db8:11::2"],
      ...["--config", servicesPath, "--no-flow-sync", "--pin-dir", lbPin, "--listen", "none"],
    ], { stderr: "null" });
    await lb.waitForLine((l) => l.includes('"msg":"ready"'), { timeoutMs: 30_000 });
    return {
      topo,
      dir,
      podsPath,
      servicesPath,
      lb,
      peer: (args, o = {}) =>
        topo.exec("client", [
          ...[Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp", PEER],
          ...args,
        ], { timeoutMs: o.timeoutMs ?? 90_000, check: o.check ?? true }),
      antiSpoofCounts: async () => {
        const out = await topo.exec("node1", ["nft", "list", "table", "inet", "hf_antispoof"]);
        let accepted = 0, dropped = 0;
        for (const m of out.stdout.matchAll(/counter packets (\d+) bytes \d+ (accept|drop)/g)) {
          if (m[2] === "accept") accepted += Number(m[1]);
          else dropped += Number(m[1]);
        }
        return [accepted, dropped];
      },
      [Symbol.asyncDispose]: teardown,
    };
  } catch (e) {
    await teardown();
    throw e;
  }
}
