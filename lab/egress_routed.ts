/**
 * The egress lab on a routed pod network (docs/egress.md "Steering client pods"): nodes reach
 * each other only through a router, each node routes its own pod /24 to its pods' veths, and no
 * client pod shares an L2 segment with a NAT pod. The client node runs the node agent
 * (`main.ts node --egress-steer`), the NAT nodes one NAT pod each (`main.ts egress --egress
 * lab/egress`, config from Redis). Shared by tests/netns/egress_steer_test.ts and bench/egress.ts.
 *
 * ```
 *  cp1 10.244.1.2 ─ cn1 ─┐                       ┌─ nn1 ─ nat1 int0 10.244.2.2  ext0 198.18.0.21 ─┐
 *   (client pod)  (node) ├─ router (lo 10.10.0.1 ├─ nn2 ─ nat2 int0 10.244.3.2  ext0 198.18.0.22 ─┼─ wan ─ ext 198.18.0.1
 *                        │   redis)              │                                                  │  (server, no route back
 * ```                                                                                                   to 10.244/16)
 *
 * With `clientNodes` > 1, client node i > 1 is `cn{i}` (net 10.10.{i+2}, client pod `cp{i}`
 * 10.244.{i+2}.2), each with its own node agent. The router has no route to 198.18.0.0/24: a
 * client packet that is not steered dies there. The floating address 198.18.0.100 moves on the
 * external segment by gratuitous ARP as in lab/egress.ts.
 *
 * @module
 */
import type { HostProcess } from "./host_process.ts";
import { createTopology, type Topology } from "./netns.ts";
import { run } from "./command.ts";
import { type RedisServer, startRedis } from "./redis_server.ts";
import { unmountUnder } from "./_anycast_sweep.ts";
import { startEchoServer } from "./_egress_config.ts";
import { publishEgressConfigArgs } from "../controller/egress/redis_config.ts";
import type { EgressConfig } from "../controller/egress/config.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const CLIENTS = new URL("./clients/", import.meta.url).pathname;

export const SERVER = "198.18.0.1";
export const FLOATING = "198.18.0.100";
export const CLIENT_IP = "10.244.1.2";

/** Client node i (1-based): its name, its pod's, the /24 index of both. */
export function clientNode(i: number): { node: string; pod: string; net: number; ip: string } {
  const net = i === 1 ? 1 : i + 2;
  return { node: `cn${i}`, pod: `cp${i}`, net, ip: `10.244.${net}.2` };
}
export const REDIS = "10.10.0.1";
export const TCP_PORT = 8080;
export const UDP_PORT = 8081;
export const NATS = ["nat1", "nat2"] as const;

/** NAT pod i's (1-based) pod address. */
export function natIp(i: number): string {
  return `10.244.${i + 1}.2`;
}

/** The config the controller would publish for the lab's EgressNAT (lab/egress). */
export function routedConfig(clientNodes = 1): EgressConfig {
  return {
    name: "lab/egress",
    destinations: ["198.18.0.0/24"],
    addresses: [{ address: FLOATING, gateway: "10.244.9.100" }],
    sources: Array.from({ length: clientNodes }, (_, i) => ({
      prefix: `${clientNode(i + 1).ip}/32`,
      address: FLOATING,
    })),
    peers: NATS.map((name, i) => ({ name, address: natIp(i + 1) })),
    interfaces: { internal: "int0", external: "ext0" },
    healthCheck: { intervalMs: 100, multiplier: 3 },
    ports: { health: 7946, sync: 7947 },
    snatPorts: "10000-29999",
    sync: true,
  };
}

/** A live routed egress lab; dispose it to tear everything down. */
export class RoutedEgressLab implements AsyncDisposable {
  readonly nat = new Map<string, HostProcess | null>();
  /** The node agents by client node name. */
  readonly nodes = new Map<string, HostProcess>();
  server: { tcp: HostProcess; udp: HostProcess } | null = null;

  constructor(
    readonly topo: Topology,
    readonly redis: RedisServer,
    readonly dir: string,
    readonly clientNodes: number,
  ) {}

  /** cn1's node agent (the last started). */
  get node(): HostProcess | null {
    return this.nodes.get("cn1") ?? null;
  }

  /** Publishes the config and the client pods (one per client node), as the controller does. */
  async publish(
    clients = Array.from({ length: this.clientNodes }, (_, i) => {
      const c = clientNode(i + 1);
      return { pod: `lab/client-${i + 1}`, node: c.node, ips: [c.ip], address: FLOATING };
    }),
  ) {
    const config = routedConfig(this.clientNodes);
    await this.redis.cli(...publishEgressConfigArgs(config, undefined, clients));
  }

  /** Starts NAT pod `name`'s agent; waits for `ready`. */
  async startNat(name: string, verbose = false): Promise<HostProcess> {
    const p = this.topo.spawn(name, [
      Deno.execPath(),
      "run",
      "-P=egress",
      "--quiet",
      MAIN,
      "egress",
      ...["--egress", "lab/egress", "--redis", `redis://${REDIS}:6379`, "--name", name],
    ], { stderr: "inherit" });
    this.nat.set(name, p);
    if (verbose) p.tailToStderr();
    await p.waitForLine((l) => l.includes('"msg":"ready"'), { timeoutMs: 30_000 });
    return p;
  }

  /** Starts a client node's agent with steering; waits for `egress steering started`. */
  async startNode(verbose = false, extra: string[] = [], node = "cn1"): Promise<HostProcess> {
    await Deno.mkdir(`${this.dir}/bpffs/${node}`, { recursive: true });
    const p = this.topo.spawn(node, [
      Deno.execPath(),
      "run",
      "-P=node",
      "--quiet",
      MAIN,
      "node",
      ...["--node-name", node, "--pods", `${this.dir}/pods.yaml`, "--config"],
      ...[
        `${this.dir}/services.yaml`,
        "--uplink",
        "eth0",
        "--pin-dir",
        `${this.dir}/bpffs/${node}`,
      ],
      ...["--listen", "none", "--egress-steer", "--redis", `redis://${REDIS}:6379`, ...extra],
    ], { stderr: "inherit" });
    this.nodes.set(node, p);
    if (verbose) p.tailToStderr();
    await p.waitForLine((l) => l.includes('"msg":"egress steering started"'), {
      timeoutMs: 30_000,
    });
    return p;
  }

  /** A hard death: the pod's links down, then its agent SIGKILLed. */
  async killNat(name: string): Promise<void> {
    await this.topo.exec(name, ["ip", "link", "set", "dev", "int0", "down"]);
    await this.topo.exec(name, ["ip", "link", "set", "dev", "ext0", "down"]);
    await this.nat.get(name)?.stop("SIGKILL");
    this.nat.set(name, null);
  }

  /** Brings a killed NAT pod back: its leftover /32s removed, links up, agent started. */
  async restartNat(name: string, verbose = false): Promise<HostProcess> {
    const gateway = routedConfig().addresses[0]!.gateway;
    await this.topo.exec(name, ["ip", "-force", "-batch", "-"], {
      stdin: `addr del ${FLOATING}/32 dev ext0\naddr del ${gateway}/32 dev int0\n`,
      check: false,
    });
    await this.topo.exec(name, ["ip", "link", "set", "dev", "int0", "up"]);
    await this.topo.exec(name, ["ip", "link", "set", "dev", "ext0", "up"]);
    // The default route through the node went with int0.
    const gw = natIp(NATS.indexOf(name as (typeof NATS)[number]) + 1).replace(/\.2$/, ".1");
    await this.topo.exec(name, ["ip", "route", "replace", "default", "via", gw]);
    return await this.startNat(name, verbose);
  }

  /** The NAT pods holding the floating address on an ext0 that is up. */
  async holders(): Promise<string[]> {
    const seen: string[] = [];
    for (const name of NATS) {
      const argv = ["ip", "-4", "-o", "addr", "show", "dev", "ext0", "up"];
      const r = await this.topo.exec(name, argv, { check: false });
      if (r.stdout.includes(` ${FLOATING}/32 `)) seen.push(name);
    }
    return seen;
  }

  /**
   * The one NAT pod holding the floating address, other than `not`, once it held it for
   * `stableMs` (default 2,500: past the ownership's 2 s rebalance delay after a pod joins).
   */
  async owner(options: { not?: string; stableMs?: number; timeoutMs?: number } = {}) {
    const stableMs = options.stableMs ?? 2_500, timeoutMs = options.timeoutMs ?? 20_000;
    const deadline = Date.now() + timeoutMs;
    let seen: string[] = [], last = "", since = Date.now();
    for (let i = 0; i < 10_000 && Date.now() < deadline; i++) {
      seen = await this.holders();
      const key = seen.join();
      if (key !== last) [last, since] = [key, Date.now()];
      else if (seen.length === 1 && seen[0] !== options.not && Date.now() - since >= stableMs) {
        return seen[0]!;
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`No steady single owner of ${FLOATING} within ${timeoutMs} ms: ${seen}`);
  }

  /** The external server's TCP and UDP echo. */
  async startServer(): Promise<void> {
    this.server = await startEchoServer(this.topo, {
      server: SERVER,
      tcpPort: TCP_PORT,
      udpPort: UDP_PORT,
    });
  }

  /** `count` long-lived TCP connections from client pod `pod`, an exchange every `intervalMs`. */
  async startTcp(
    count: number,
    durationMs: number,
    intervalMs = 100,
    pod = "cp1",
  ): Promise<HostProcess> {
    const c = this.topo.spawnDeno(pod, `${CLIENTS}hold_client.ts`, {
      args: [SERVER, TCP_PORT, count, durationMs, intervalMs].map(String),
      permissions: ["--allow-net"],
    });
    await c.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
    return c;
  }

  /** A UDP stream from client pod `pod` (a datagram and its echo every `intervalMs`). */
  async startUdp(durationMs: number, intervalMs = 100, pod = "cp1"): Promise<HostProcess> {
    const c = this.topo.spawnDeno(pod, `${CLIENTS}udp_stream.ts`, {
      args: [SERVER, String(UDP_PORT), String(durationMs), String(intervalMs), pod],
      permissions: ["--allow-net"],
    });
    await c.waitForLine((l) => l.includes('"msg":"started"'), { timeoutMs: 10_000 });
    return c;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.topo.destroy();
    await this.redis[Symbol.asyncDispose]();
    await unmountUnder(this.dir);
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }
}

/** Builds the routed lab with Redis, the config files of the node agent, and nothing running. */
export async function createRoutedEgressLab(clientNodes = 1): Promise<RoutedEgressLab> {
  const fwd = { "net.ipv4.ip_forward": 1 };
  const nodes = [
    ...Array.from({ length: clientNodes }, (_, i) => ({ ...clientNode(i + 1), podIf: "eth0" })),
    { node: "nn1", pod: "nat1", podIf: "int0", net: 2 },
    { node: "nn2", pod: "nat2", podIf: "int0", net: 3 },
  ];
  const topo = await createTopology({
    hosts: [
      { name: "router", sysctls: fwd, loopback: [`${REDIS}/32`] },
      ...nodes.flatMap((n) => [{ name: n.node, sysctls: fwd }, { name: n.pod }]),
      { name: "wan" },
      { name: "ext" },
    ],
    links: [
      ...nodes.flatMap((n) => [
        {
          a: { host: "router", ifname: `r${n.net}`, address: `10.10.${n.net}.1/24` },
          b: { host: n.node, ifname: "eth0", address: `10.10.${n.net}.2/24` },
        },
        {
          a: { host: n.node, ifname: `v${n.pod}`, address: `10.244.${n.net}.1/24` },
          b: { host: n.pod, ifname: n.podIf, address: `10.244.${n.net}.2/24` },
        },
      ]),
      ...NATS.map((pod, i) => ({
        a: { host: pod, ifname: "ext0", address: `198.18.0.${21 + i}/24` },
        b: { host: "wan", ifname: `n${i + 1}` },
      })),
      {
        a: { host: "ext", ifname: "eth0", address: `${SERVER}/24` },
        b: { host: "wan", ifname: "s0" },
      },
    ],
    routes: nodes.flatMap((n) => [
      { host: "router", to: `10.244.${n.net}.0/24`, via: `10.10.${n.net}.2` },
      { host: n.node, to: "default", via: `10.10.${n.net}.1` },
      { host: n.pod, to: "default", via: `10.244.${n.net}.1` },
    ]),
  });
  let redis: RedisServer | null = null;
  try {
    await topo.exec("wan", "ip link add br0 type bridge stp_state 0 forward_delay 0".split(" "));
    for (const port of ["n1", "n2", "s0"]) {
      await topo.exec("wan", ["ip", "link", "set", "dev", port, "master", "br0"]);
    }
    await topo.exec("wan", ["ip", "link", "set", "dev", "br0", "up"]);
    redis = await startRedis({ netns: topo.ns("router"), bind: REDIS });
    const dir = await Deno.makeTempDir({ prefix: `hf-${Deno.pid}-steer-` });
    await Deno.writeTextFile(`${dir}/pods.yaml`, "pods: []\n");
    await Deno.writeTextFile(`${dir}/services.yaml`, "services: []\n");
    await Deno.mkdir(`${dir}/bpffs`);
    await run(["mount", "-t", "bpf", "bpf", `${dir}/bpffs`]);
    return new RoutedEgressLab(topo, redis, dir, clientNodes);
  } catch (err) {
    await redis?.[Symbol.asyncDispose]();
    await topo.destroy();
    throw err;
  }
}
