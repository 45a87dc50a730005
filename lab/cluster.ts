/**
 * A virtual Holdfast cluster in network namespaces, shared by the demo, the chaos scenarios and
 * the end-to-end tests. This file changes the cluster; `cluster_probe.ts` reads what it does.
 *
 * ```
 *                         ┌─ l1 ── lb1 (XDP LB + agent) ─┐
 *  client ── c0 router ───┼─ l2 ── lb2 ...               │ encapsulated (UDP) to backends
 *  10.1.0.2   (ECMP to    └─ lN ── lbN                   │
 *              the VIP)   ┌─ b1 ── be1 (decap, VIP on lo, echo server) ◀┘
 *                         ├─ bM ── beM        replies go straight to the client (DSR)
 *                         └─ r0 ── ctl (redis-server 10.9.0.2:6379, or a Redis Cluster)
 * ```
 *
 * LB node i: router side `l{i}` 10.2.i.1/24, node side `eth0` 10.2.i.2/24. Backend j: router side
 * `b{j}` 10.3.j.1/24, backend `eth0` 10.3.j.2/24. The router's route to the VIP is the ECMP route
 * its bird2 installs (`merge paths yes`, lab/_anycast_router.ts) from what the LB nodes announce:
 * each agent runs with `--bgp-config` (eBGP with BFD to 10.2.i.1, AS 65100+i), announcing its LB
 * IPs only once ready and withdrawing them first on SIGTERM (node/bgp/lb_announcer.ts);
 * `fib_multipath_hash_policy=1` spreads by 5-tuple. Services and backends reach every agent
 * through one JSON file (the file data source), rewritten when backends change.
 *
 * Dual stack by default (`ipv6: false`: IPv4 only; the Redis model's cluster is IPv4 only unless
 * asked): IPv6 on every link (lab/_cluster_plan.ts), `default/web6` on 2001:db8:100::1 over the
 * backends' IPv6 addresses (on `lo`, decap for both), `--src-addr6` on every agent, a second BGP
 * session per LB node announcing the /128. {@linkcode Cluster.startClient} takes the family. With
 * `udp: true` the IPv4 service takes UDP on its port too ({@linkcode Cluster.startUdpStream}).
 *
 * With `redisCluster: true` the store is a Redis Cluster of three masters with a replica each in
 * `ctl` (lab/_cluster_store.ts), agents given `--redis redis+cluster://…` and `--flow-buckets`.
 *
 * With `model: "redis"` agents follow the model a controller publishes in the cluster's Redis
 * instead of the services file (the test runs the API server and controller in `ctl`).
 *
 * @module
 */
import { run as runRoot } from "./command.ts";
import type { HostProcess } from "./host_process.ts";
import { createTopology, routerSpoke, type Topology } from "./netns.ts";
import type { RedisServer } from "./redis_server.ts";
import { ClusterStore } from "./_cluster_store.ts";
import { attachXdp, BpfObject, DecapDatapath, DEFAULT_OBJECT_DIR } from "../node/bpf/mod.ts";
import { addLocalVip6 } from "../node/bpf/mod.ts";
import { startConnectLoop, startHoldClient, startUdpStream } from "./_cluster_clients.ts";
import { DEFAULT_BFD } from "../node/bgp/mod.ts";
import { RouterBird } from "./_anycast_router.ts";
import { killBird, unmountUnder } from "./_anycast_sweep.ts";

export { unmountUnder };
import { waitRouteVias } from "./cluster_probe.ts";
import {
  addSpoke6,
  type AgentRelease,
  BACKEND_HEALTH_PORT,
  backendAddress,
  type ClusterOptions,
  clusterServices,
  DEFAULT_VIP6,
  ENCAP_PORT,
  HOST_SYSCTLS6,
  lbAddress,
  lbAddress6,
  lbAgentArgs,
  lbAgentCommand,
  type LbNode,
  lbNodeBgp,
  ROUTER_SYSCTLS,
} from "./_cluster_plan.ts";

export {
  type AgentRelease,
  BACKEND_HEALTH_PORT,
  backendAddress,
  backendAddress6,
  CLIENT_ADDRESS6,
  type ClusterOptions,
  lbAddress,
  lbAddress6,
} from "./_cluster_plan.ts";

const ECHO = new URL("./clients/tcp_echo.ts", import.meta.url).pathname;

/** A running virtual cluster; dispose to tear it down. */
export class Cluster implements AsyncDisposable {
  /** The service's LB IP. */
  readonly vip: string;
  /** The service's port. */
  readonly port: number;
  /** The IPv6 service's LB IP; null: the cluster is IPv4 only. */
  readonly vip6: string | null;
  /** Whether agents share flows through Redis (false: the baseline). */
  readonly flowSync: boolean;
  /** Where agents read the LB model (see {@linkcode ClusterOptions.model}). */
  readonly model: "file" | "redis";
  /** LB nodes by index, including killed ones (agent null, out of the route). */
  readonly lbNodes = new Map<number, LbNode>();
  /** Backends' echo servers by index. */
  readonly backends = new Map<number, HostProcess>();
  readonly #verbose: boolean;
  readonly #healthCheck: Readonly<Record<string, unknown>> | undefined;
  readonly #udp: boolean;
  readonly #agentArgs: readonly string[];
  readonly #release: AgentRelease | undefined;
  readonly #releases = new Map<number, AgentRelease | undefined>();
  readonly #handles: Disposable[] = [];
  #pass: BpfObject | null = null;
  #router: RouterBird | null = null;

  private constructor(
    readonly topo: Topology,
    /** The flow store: one Redis, or a Redis Cluster (`redisCluster`). */
    readonly store: ClusterStore,
    readonly configPath: string,
    readonly dir: string,
    options: ClusterOptions,
  ) {
    this.vip = options.vip ?? "10.0.100.1";
    this.port = options.port ?? 8080;
    this.flowSync = options.flowSync ?? true;
    this.model = options.model ?? "file";
    this.vip6 = (options.ipv6 ?? this.model === "file") ? options.vip6 ?? DEFAULT_VIP6 : null;
    this.#verbose = options.verbose ?? false;
    this.#healthCheck = options.healthCheck;
    this.#udp = options.udp ?? false;
    this.#agentArgs = options.agentArgs ?? [];
    this.#release = options.release;
  }

  /** The build LB node i's agent runs from its next start (undefined: this checkout). */
  setRelease(i: number, release: AgentRelease | undefined): void {
    this.#releases.set(i, release);
  }

  /** The single Redis (throws with `redisCluster`: see {@linkcode Cluster.store}). */
  get redis(): RedisServer {
    if (!this.store.server) throw new Error("This cluster's store is a Redis Cluster");
    return this.store.server;
  }

  /** Builds the network, Redis, the backends and the LB nodes, and waits until all are ready. */
  static async create(options: ClusterOptions = {}): Promise<Cluster> {
    const client = routerSpoke("client", "c0", "10.1.0", { hostTxChecksumOff: true });
    const ctl = routerSpoke("ctl", "r0", "10.9.0");
    const topo = await createTopology({
      hosts: [
        { name: "client", sysctls: HOST_SYSCTLS6 },
        { name: "router", sysctls: ROUTER_SYSCTLS },
        { name: "ctl" },
      ],
      links: [client.link, ctl.link],
      routes: [client.route, ctl.route],
    });
    let store: ClusterStore | undefined;
    const dir = await Deno.makeTempDir({ prefix: `hf-cluster-${Deno.pid}-` });
    try {
      store = await ClusterStore.start(topo, options);
      const cluster = new Cluster(topo, store, `${dir}/services.json`, dir, options);
      if (cluster.vip6 !== null) await addSpoke6(topo, "client", "c0", "2001:db8:1");
      cluster.#router = await RouterBird.start(topo, "router", dir, {
        routerId: "10.9.0.1",
        bfd: DEFAULT_BFD,
      });
      for (let j = 1; j <= (options.backends ?? 3); j++) {
        await cluster.addBackend(j, { publish: false });
      }
      await cluster.writeConfig();
      for (let i = 1; i <= (options.lbNodes ?? 2); i++) await cluster.addLbNode(i);
      return cluster;
    } catch (err) {
      await topo.destroy();
      await store?.[Symbol.asyncDispose]();
      await unmountUnder(dir);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      throw err;
    }
  }

  /** The services file every agent follows: one frontend, the current backends. */
  async writeConfig(): Promise<void> {
    if (this.model === "redis") return; // the model's publisher owns services and backends
    const config = clusterServices(this, [...this.backends.keys()], {
      backendAddress,
      healthCheck: this.#healthCheck,
      udp: this.#udp,
    });
    const tmp = `${this.configPath}.tmp`;
    await Deno.writeTextFile(tmp, JSON.stringify(config, null, 2));
    await Deno.rename(tmp, this.configPath); // atomic: agents never read half a file
  }

  /** Adds backend j: namespace, link, decap on its eth0, VIP on lo, echo server on the VIP. */
  async addBackend(j: number, options: { publish?: boolean } = {}): Promise<void> {
    const host = `be${j}`;
    await this.topo.addHost({
      name: host,
      loopback: [`${this.vip}/32`, ...(this.vip6 === null ? [] : [`${this.vip6}/128`])],
      sysctls: { "net.ipv4.conf.all.rp_filter": 0, ...HOST_SYSCTLS6 },
    });
    const spoke = routerSpoke(host, `b${j}`, `10.3.${j}`); // eth0 at backendAddress(j)
    await this.topo.addLink(spoke.link);
    await this.topo.addRoute(spoke.route);
    if (this.vip6 !== null) {
      await addSpoke6(this.topo, host, `b${j}`, `2001:db8:3:${j.toString(16)}`);
    }
    // The backend side of the datapath: strip the outer headers of packets for a local VIP,
    // clamp the MSS of SYN/ACKs leaving from the VIP so encapsulated segments fit the MTU.
    const decap = await DecapDatapath.open();
    this.#handles.push(decap);
    decap.configure({ encapPort: ENCAP_PORT, mssMax: 1500 - 40 - 28 });
    decap.addLocalVip(this.vip);
    if (this.vip6 !== null) addLocalVip6(decap.object, this.vip6);
    decap.attach("eth0", { netns: this.topo.ns(host) });
    await this.startBackendServer(j);
    if (options.publish ?? true) await this.writeConfig();
  }

  /**
   * Starts (again) backend j's echo server (and health endpoint) — after a test killed it — and
   * waits until it listens. The backend's namespace, decap and place in the config are untouched.
   */
  async startBackendServer(j: number): Promise<void> {
    const host = `be${j}`;
    const health = this.#healthCheck ? [String(BACKEND_HEALTH_PORT)] : [];
    const server = this.topo.spawnDeno(host, ECHO, {
      args: [
        "server",
        this.vip6 ? `${this.vip},${this.vip6}` : this.vip,
        `${this.port}`,
        ...health,
      ],
      permissions: ["--allow-net"],
    });
    await server.waitForLine((l) => l.includes("listening"));
    this.backends.set(j, server);
  }

  /**
   * Backend j leaves the service: removed from the services file (agents purge its flows) and,
   * with `stopServer`, its server stops as a deleted pod's would.
   */
  async removeBackend(j: number, options: { stopServer?: boolean } = {}): Promise<void> {
    const server = this.backends.get(j);
    if (!server) throw new Error(`No backend ${j}`);
    this.backends.delete(j);
    await this.writeConfig();
    if (options.stopServer ?? true) await server.stop("SIGKILL");
  }

  /**
   * Starts LB node i — creating its namespace, link and BGP peering the first time, bringing a
   * killed one back — and waits until the router routes to it (its agent announces once ready).
   */
  async addLbNode(i: number): Promise<void> {
    const host = `lb${i}`;
    // eth0 at lbAddress(i); TX checksum offload off where TCP enters the XDP veth (FINDINGS:
    // XDP_TX drops partial sums).
    const spoke = routerSpoke(host, `l${i}`, `10.2.${i}`, { routerTxChecksumOff: true });
    const net6 = `2001:db8:2:${i.toString(16)}`;
    if (!this.lbNodes.has(i)) {
      await this.topo.addHost({ name: host, sysctls: HOST_SYSCTLS6 });
      await this.topo.addLink(spoke.link);
      // XDP_TX on a veth delivers only if the peer has a native XDP program (FINDINGS).
      this.#pass ??= BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
      attachXdp(this.#pass.program("hf_xdp_pass"), `l${i}`, { netns: this.topo.ns("router") });
      // The node's bpffs lives in the root mount namespace: `ip netns exec` gives each process a
      // private mount namespace, and pins made on a mount inside it would die with the agent.
      const bpffs = this.bpffs(i);
      await Deno.mkdir(bpffs, { recursive: true });
      await runRoot(["mount", "-t", "bpf", "bpf", bpffs]);
      this.lbNodes.set(i, { index: i, host, agent: null, inRoute: false });
      const { settings, routerPeers } = lbNodeBgp(i, this.vip6 !== null);
      await Deno.writeTextFile(this.#bgpConfig(i), JSON.stringify(settings));
      await this.#router!.setPeers([...this.#router!.peers, ...routerPeers]);
    }
    const node = this.lbNodes.get(i)!;
    await this.topo.setLink(host, "eth0", true);
    // Setting the link down (killLbNode) deleted the routes through it: without the default
    // route a returning node's agent cannot reach Redis and never becomes ready.
    await this.topo.addRoute(spoke.route);
    if (this.vip6 !== null) await addSpoke6(this.topo, host, `l${i}`, net6);
    await this.startAgent(i);
    node.inRoute = true;
    await this.waitRoute();
  }

  #bgpConfig(i: number): string {
    return `${this.dir}/lb${i}.bgp.json`;
  }

  /** LB node i's bird directory (its bird outlives a killed agent; the next adopts it). */
  birdDir(i: number): string {
    return `${this.dir}/lb${i}.bird`;
  }

  /** The bpffs mount where LB node i's agent pins its maps. */
  bpffs(i: number): string {
    return `${this.dir}/bpffs-lb${i}`;
  }

  /** Starts (or restarts) the agent of LB node i; waits for it to report ready (and announce). */
  async startAgent(i: number): Promise<void> {
    const node = this.lbNodes.get(i);
    if (!node) throw new Error(`No LB node ${i}`);
    // A killed agent's bird still announces (the datapath kept forwarding): the new agent
    // adopts it (no session flap) and announces what it serves once ready.
    const args = lbAgentArgs(i, {
      dualStack: this.vip6 !== null,
      configPath: this.model === "redis" ? null : this.configPath,
      pinDir: this.bpffs(i),
      redisUrl: this.store.url,
      bgpConfig: this.#bgpConfig(i),
      birdDir: this.birdDir(i),
      flowSync: this.flowSync,
      flowBuckets: this.store.buckets,
      extra: this.#agentArgs,
    });
    const release = this.#releases.has(i) ? this.#releases.get(i) : this.#release;
    node.agent = this.topo.spawn(node.host, lbAgentCommand(release, args), {
      stderr: this.#verbose ? "inherit" : "null",
    });
    if (this.#verbose) node.agent.tailToStderr();
    await node.agent.waitForLine((l) => l.includes('"msg":"ready"'), { timeoutMs: 30_000 });
    if (node.inRoute) await this.waitRoute(); // a restarted agent: announced again
  }

  /**
   * Kills the agent of LB node i without touching its datapath (XDP and pinned maps stay) or its
   * bird, which keeps announcing: traffic continues, as after an agent crash.
   */
  async killAgent(i: number): Promise<void> {
    const node = this.lbNodes.get(i);
    await node?.agent?.stop("SIGKILL");
    if (node) node.agent = null;
  }

  /**
   * LB node i dies: its link goes down, its agent and bird are killed; resolves once the
   * router's bird has withdrawn it (link down and BFD: milliseconds).
   */
  async killLbNode(i: number): Promise<void> {
    const node = this.lbNodes.get(i);
    if (!node) throw new Error(`No LB node ${i}`);
    await this.topo.setLink(node.host, "eth0", false);
    await this.killAgent(i);
    await killBird(`${this.birdDir(i)}/bird.pid`, this.birdDir(i));
    node.inRoute = false;
    await this.waitRoute();
  }

  /**
   * Waits (≤ `timeoutMs`) until the router's routes to the LB IPs (both, dual stack) go exactly
   * through the LB nodes in service (those added and not killed), as their announcements and BGP
   * make them.
   */
  async waitRoute(timeoutMs = 15_000): Promise<void> {
    const serving = [...this.lbNodes.values()].filter((n) => n.inRoute).map((n) => n.index);
    await waitRouteVias(this, serving.map(lbAddress), timeoutMs);
    if (this.vip6 !== null) await waitRouteVias(this, serving.map(lbAddress6), timeoutMs, 6);
  }

  /**
   * Starts the long-lived client: `count` connections for `durationMs` to the IPv4 LB IP, or
   * with `family: 6` to the IPv6 one (a dual-stack cluster).
   */
  startClient(
    count: number,
    durationMs: number,
    o: { family?: 4 | 6; progressMs?: number } = {},
  ): Promise<HostProcess> {
    return startHoldClient(this.topo, this.#target(o.family), count, durationMs, o);
  }

  /** Starts short connections, one every `intervalMs` for `durationMs`, to the LB IP of `family`. */
  startConnectLoop(durationMs: number, intervalMs: number, o: { family?: 4 | 6 } = {}) {
    return startConnectLoop(this.topo, this.#target(o.family), durationMs, intervalMs);
  }

  /** Starts a UDP stream (one source port) to the IPv4 LB IP's UDP port (`udp: true`). */
  startUdpStream(durationMs: number, intervalMs: number): Promise<HostProcess> {
    return startUdpStream(this.topo, this.#target(4), durationMs, intervalMs);
  }

  #target(family: 4 | 6 = 4): { vip: string; port: number } {
    const vip = family === 6 ? this.vip6 : this.vip;
    if (vip === null) throw new Error("Cannot start an IPv6 client: the cluster is IPv4 only");
    return { vip, port: this.port };
  }

  /** Tears the cluster down: processes, namespaces, BPF handles, bpffs mounts, Redis, temp dir. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.topo.destroy();
    for (const h of this.#handles.splice(0)) h[Symbol.dispose]();
    this.#pass?.[Symbol.dispose]();
    await unmountUnder(this.dir);
    await this.store[Symbol.asyncDispose]();
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }
}
