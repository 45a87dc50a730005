/**
 * The egress NAT lab: client pods, NAT pods running `main.ts egress`, an external server, two L2
 * segments (Linux bridges in switch namespaces), a real redis-server. Shared by the egress e2e
 * tests and `bench/egress.ts`.
 *
 * ```
 *  egc1 10.8.0.11 ─┐                    ┌─ int0 nat1 ext0 ─┐
 *  egc2 10.8.0.12 ─┼─ lan (br0 10.8.0.254, redis) ─┼─ int0 nat2 ext0 ─┼─ wan (br0) ─ ext 198.18.0.1
 *                  │                    └─ int0 natN ext0 ─┘          tcp echo :8080, udp echo :8081
 * ```
 *
 * NAT pod i: `int0` 10.8.0.2i/24, `ext0` 198.18.0.2i/24. Floating address k: 198.18.0.(100+k)
 * with gateway 10.8.0.(100+k); client egc(k+1) is source k, pinned to address k, and routes the
 * destination 198.18.0.0/24 via that gateway (the "moving gateway address": clients' routes never
 * change, the owner's gratuitous ARP moves the next hop). The server has no route back to the
 * clients' network, so a packet leaking with a private source never gets an answer.
 *
 * @module
 */
import { run } from "./command.ts";
import type { HostProcess } from "./host_process.ts";
import { createTopology, type LinkSpec, type Topology } from "./netns.ts";
import { type RedisServer, startRedis } from "./redis_server.ts";
import type { AgentRelease } from "./_cluster_plan.ts";
import {
  floatingAddress,
  gatewayAddress,
  labEgressConfig,
  REDIS_ADDR,
  SERVER,
  startEchoServer,
  TCP_PORT,
  UDP_PORT,
} from "./_egress_config.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const HOLD = new URL("./clients/hold_client.ts", import.meta.url).pathname;
const UDP_STREAM = new URL("./clients/udp_stream.ts", import.meta.url).pathname;
const LOOP = new URL("./clients/connect_loop.ts", import.meta.url).pathname;

export {
  floatingAddress,
  gatewayAddress,
  labEgressConfig,
  SERVER,
  TCP_PORT,
  UDP_PORT,
} from "./_egress_config.ts";

/** Options of {@linkcode createEgressLab}. */
export interface EgressLabOptions {
  /** NAT pods (default 2). */
  readonly natPods?: number;
  /** Floating addresses = client pods (default 2). */
  readonly addresses?: number;
  /** Conntrack sync on (default true); off is the baseline. */
  readonly sync?: boolean;
  /** Heartbeat interval and multiplier (default 100 ms × 3). */
  readonly healthCheck?: { intervalMs: number; multiplier: number };
  /** Print the agents' log lines to stderr. */
  readonly verbose?: boolean;
  /**
   * NAT agents read their config from the lab's Redis (`--egress lab/egress`, what the
   * controller publishes for an EgressNAT) instead of the file; publish it with
   * `lab.redis.cli(...publishEgressConfigArgs(config))`. Default false.
   */
  readonly configFromRedis?: boolean;
  /** Agents serve /metrics on 127.0.0.1:9470 in their pod (`lab/egress_checks.ts` reads it). */
  readonly metrics?: boolean;
  /** BGP mode (`lab/egress_bgp.ts`): a `bgp` section peering with `ext`, `--announce bgp`. */
  readonly bgp?: boolean;
}

/** A NAT pod of the lab. */
export interface NatPod {
  readonly name: string;
  readonly index: number;
  agent: HostProcess | null;
  /** The build its next agent runs (`lab/previous_release.ts`); unset: this checkout. */
  release?: AgentRelease;
}

/** A live egress lab; dispose it to tear everything down. */
export class EgressLab implements AsyncDisposable {
  readonly pods = new Map<string, NatPod>();
  server: { tcp: HostProcess; udp: HostProcess } | null = null;

  constructor(
    readonly topo: Topology,
    readonly redis: RedisServer,
    readonly configPath: string,
    readonly options: EgressLabOptions,
  ) {
    for (let i = 1; i <= (options.natPods ?? 2); i++) {
      this.pods.set(`nat${i}`, { name: `nat${i}`, index: i, agent: null });
    }
  }

  #pod(name: string): NatPod {
    const pod = this.pods.get(name);
    if (!pod) throw new Error(`No NAT pod "${name}" in the egress lab`);
    return pod;
  }

  /** Starts NAT pod `name`'s agent and waits for its `ready` line. */
  async startNat(name: string): Promise<HostProcess> {
    const pod = this.#pod(name);
    if (pod.agent) throw new Error(`NAT pod "${name}" already runs an agent`);
    const agent = this.topo.spawn(name, [
      Deno.execPath(),
      "run",
      ...(pod.release ? ["--config", pod.release.config] : []),
      "-P=egress",
      "--quiet",
      pod.release?.main ?? MAIN,
      "egress",
      ...(this.options.configFromRedis
        ? ["--egress", "lab/egress", "--redis", `redis://${REDIS_ADDR}:6379`]
        : ["--config", this.configPath]),
      "--name",
      name,
      ...(this.options.sync ?? true ? [] : ["--no-sync"]),
      ...(this.options.metrics ? ["--metrics-addr", "127.0.0.1:9470"] : []),
      ...(this.options.bgp ? ["--announce", "bgp", "--bgp-dir", `${this.redis.dir}/${name}`] : []),
    ], { stderr: "inherit" });
    pod.agent = agent;
    if (this.options.verbose) agent.tailToStderr();
    await agent.waitForLine((l) => l.includes('"msg":"ready"'), { timeoutMs: 30_000 });
    return agent;
  }

  /** Starts every NAT pod, one after the other. */
  async startAll(): Promise<void> {
    for (const name of this.pods.keys()) await this.startNat(name);
  }

  /** A hard death: both links of the pod down, then its agent SIGKILLed. Returns the time (ms). */
  async killNat(name: string): Promise<number> {
    const pod = this.#pod(name);
    const at = Date.now();
    await this.topo.exec(name, ["ip", "link", "set", "dev", "int0", "down"]);
    await this.topo.exec(name, ["ip", "link", "set", "dev", "ext0", "down"]);
    await pod.agent?.stop("SIGKILL");
    pod.agent = null;
    return at;
  }

  /** A hang: the agent SIGSTOPped (its kernel keeps forwarding). Returns the time (ms). */
  async hangNat(name: string): Promise<number> {
    const agent = this.#pod(name).agent;
    if (!agent) throw new Error(`NAT pod "${name}" runs no agent to stop`);
    const at = Date.now();
    await run(["kill", "-STOP", String(agent.pid)]);
    return at;
  }

  /** Resumes a hung agent. */
  async resumeNat(name: string): Promise<void> {
    const agent = this.#pod(name).agent;
    if (agent) await run(["kill", "-CONT", String(agent.pid)], { check: false });
  }

  /** Planned stop: SIGTERM (the agent drains, then exits); resolves with its exit code. */
  async drainNat(name: string, graceMs = 10_000): Promise<number> {
    const pod = this.#pod(name);
    const status = await pod.agent?.stop("SIGTERM", graceMs);
    pod.agent = null;
    return status?.code ?? 0;
  }

  /**
   * Brings a killed pod's links back up and starts its agent again. The floating /32s it held
   * go first, before the links are up: they would answer ARP beside the new owner until the new
   * agent removes them (docs/egress.md, "restart after SIGKILL").
   */
  async restartNat(name: string): Promise<HostProcess> {
    const leftovers = Array.from(
      { length: this.options.addresses ?? 2 },
      (_, k) =>
        `addr del ${floatingAddress(k)}/32 dev ext0\naddr del ${gatewayAddress(k)}/32 dev int0\n`,
    );
    await this.topo.exec(name, ["ip", "-force", "-batch", "-"], {
      stdin: leftovers.join(""),
      check: false,
    });
    await this.topo.exec(name, ["ip", "link", "set", "dev", "int0", "up"]);
    await this.topo.exec(name, ["ip", "link", "set", "dev", "ext0", "up"]);
    return await this.startNat(name);
  }

  /** Cuts (or heals) the pod's port on the internal segment: a partition, the agent runs on. */
  async partitionNat(name: string, cut: boolean): Promise<void> {
    await this.topo.setLink("lan", `n${this.#pod(name).index}`, !cut);
  }

  /**
   * Which pods hold floating address k now: the /32 on an ext0 that is up, from `ip addr` in
   * each pod (a killed pod's downed interface keeps its addresses but serves nothing).
   */
  async holders(k: number): Promise<string[]> {
    const names = [...this.pods.keys()];
    const held = await Promise.all(names.map(async (name) => {
      const argv = ["ip", "-4", "-o", "addr", "show", "dev", "ext0", "up"];
      const r = await this.topo.exec(name, argv, { check: false });
      return r.stdout.includes(` ${floatingAddress(k)}/32 `);
    }));
    return names.filter((_, i) => held[i]);
  }

  /** Waits until exactly one pod holds floating address k (other than `not`); returns it. */
  async waitForOwner(k: number, options: { not?: string; timeoutMs?: number } = {}) {
    const deadline = Date.now() + (options.timeoutMs ?? 10_000);
    let seen: string[] = [];
    while (Date.now() < deadline) {
      seen = await this.holders(k);
      if (seen.length === 1 && seen[0] !== options.not) return seen[0]!;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(
      `No single owner of ${floatingAddress(k)} within ${options.timeoutMs ?? 10_000} ms ` +
        `(holders ${JSON.stringify(seen)}, not ${JSON.stringify(options.not ?? null)})`,
    );
  }

  /**
   * Waits until every floating address has exactly one holder and none moved for `stableMs`
   * (default 2,500: longer than the ownership's 2 s rebalance delay after a pod joins, so the
   * start-up assignment and hand-backs to a returning pod are over); returns the owners.
   */
  async settle(options: { stableMs?: number; timeoutMs?: number } = {}): Promise<string[]> {
    const stableMs = options.stableMs ?? 2_500, timeoutMs = options.timeoutMs ?? 20_000;
    const count = this.options.addresses ?? 2;
    const deadline = Date.now() + timeoutMs;
    let last = "", since = Date.now(), owners: string[][] = [];
    while (Date.now() < deadline) {
      owners = await Promise.all(Array.from({ length: count }, (_, k) => this.holders(k)));
      const key = JSON.stringify(owners);
      if (key !== last) [last, since] = [key, Date.now()];
      else if (owners.every((o) => o.length === 1) && Date.now() - since >= stableMs) {
        return owners.map((o) => o[0]!);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`Floating addresses did not settle within ${timeoutMs} ms: ${last}`);
  }

  /** Starts the external server's TCP and UDP echo. */
  async startServer(): Promise<void> {
    this.server = await startEchoServer(this.topo);
  }

  /**
   * `count` long-lived TCP connections from client k for `durationMs`, an echo exchange on each
   * every `intervalMs` (default 100; seconds make them idle ones) (hold_client).
   */
  async startTcp(
    k: number,
    count: number,
    durationMs: number,
    intervalMs = 100,
  ): Promise<HostProcess> {
    const client = this.topo.spawnDeno(`egc${k + 1}`, HOLD, {
      args: [SERVER, TCP_PORT, count, durationMs, intervalMs].map(String),
      permissions: ["--allow-net"],
    });
    await client.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
    return client;
  }

  /**
   * New connections from client k every `intervalMs` for `durationMs`, each doing `exchanges`
   * echo exchanges `gapMs` apart (connect_loop).
   */
  async startConnectLoop(
    k: number,
    durationMs: number,
    intervalMs: number,
    exchanges = 1,
    gapMs = 0,
  ): Promise<HostProcess> {
    const client = this.topo.spawnDeno(`egc${k + 1}`, LOOP, {
      args: [SERVER, TCP_PORT, durationMs, intervalMs, exchanges, gapMs].map(String),
      permissions: ["--allow-net"],
    });
    await client.waitForLine((l) => l.includes('"msg":"started"'), { timeoutMs: 10_000 });
    return client;
  }

  /** A UDP stream from client k (one datagram and echo every `intervalMs`). */
  async startUdp(k: number, durationMs: number, intervalMs = 100): Promise<HostProcess> {
    const client = this.topo.spawnDeno(`egc${k + 1}`, UDP_STREAM, {
      args: [SERVER, String(UDP_PORT), String(durationMs), String(intervalMs), `egc${k + 1}`],
      permissions: ["--allow-net"],
    });
    await client.waitForLine((l) => l.includes('"msg":"started"'), { timeoutMs: 10_000 });
    return client;
  }

  /** Tears the lab down: processes, namespaces, Redis and its directory (with the config). */
  async [Symbol.asyncDispose](): Promise<void> {
    for (const name of this.pods.keys()) await this.resumeNat(name);
    await this.topo.destroy();
    await this.redis[Symbol.asyncDispose]();
  }
}

/** Builds the lab (namespaces, bridges, Redis, config); NAT agents and clients are started after. */
export async function createEgressLab(options: EgressLabOptions = {}): Promise<EgressLab> {
  const n = options.natPods ?? 2, m = options.addresses ?? 2;
  const clients = Array.from({ length: m }, (_, k) => `egc${k + 1}`);
  const nats = Array.from({ length: n }, (_, i) => `nat${i + 1}`);
  const links: LinkSpec[] = [
    ...clients.map((host, k) => ({
      a: { host, ifname: "eth0", address: `10.8.0.${11 + k}/24` },
      b: { host: "lan", ifname: `c${k + 1}` },
    })),
    ...nats.flatMap((host, i) => [
      {
        a: { host, ifname: "int0", address: `10.8.0.${21 + i}/24` },
        b: { host: "lan", ifname: `n${i + 1}` },
      },
      {
        a: { host, ifname: "ext0", address: `198.18.0.${21 + i}/24` },
        b: { host: "wan", ifname: `n${i + 1}` },
      },
    ]),
    {
      a: { host: "ext", ifname: "eth0", address: `${SERVER}/24` },
      b: { host: "wan", ifname: "s0" },
    },
  ];
  const topo = await createTopology({
    hosts: [
      { name: "lan" },
      { name: "wan" },
      ...clients.map((name) => ({ name })),
      ...nats.map((name) => ({ name })),
      { name: "ext" },
    ],
    links,
    routes: clients.map((host, k) => ({ host, to: "198.18.0.0/24", via: gatewayAddress(k) })),
  });
  let redis: RedisServer | null = null;
  try {
    for (
      const [sw, ports] of [["lan", links.filter((l) => l.b.host === "lan")], [
        "wan",
        links.filter((l) => l.b.host === "wan"),
      ]] as const
    ) {
      await topo.exec(sw, "ip link add br0 type bridge stp_state 0 forward_delay 0".split(" "));
      for (const l of ports) {
        await topo.exec(sw, ["ip", "link", "set", "dev", l.b.ifname, "master", "br0"]);
      }
      await topo.exec(sw, ["ip", "link", "set", "dev", "br0", "up"]);
    }
    await topo.exec("lan", ["ip", "addr", "add", `${REDIS_ADDR}/24`, "dev", "br0"]);
    redis = await startRedis({ netns: topo.ns("lan"), bind: REDIS_ADDR });
    const configPath = `${redis.dir}/egress.json`;
    await Deno.writeTextFile(configPath, JSON.stringify(labEgressConfig(options), null, 2));
    return new EgressLab(topo, redis, configPath, options);
  } catch (err) {
    await redis?.[Symbol.asyncDispose]();
    await topo.destroy();
    throw err;
  }
}
