/**
 * The anycast lab: a router namespace running bird2 (eBGP to every node, BFD, `merge paths yes`
 * into its kernel), N node namespaces each running `main.ts anycast` (which owns the node's
 * bird), pods as HTTP servers inside the node namespaces, and a client behind the router.
 * Services and pods live in one state file every agent follows, as the Kubernetes API would be.
 *
 * ```
 *  client 10.8.0.2 ── 10.8.0.1 router ── 10.9.1.1 ─ 10.9.1.2 n1 (lo: LB /32 while a pod is ready)
 *                                     ├─ 10.9.2.1 ─ 10.9.2.2 n2
 *                                     └─ 10.9.3.1 ─ 10.9.3.2 n3
 * ```
 *
 * The router's view of an LB address comes from `ip -o monitor route` ({@linkcode RouteWatch}),
 * so tests and the bench see each nexthop change the moment the kernel makes it.
 *
 * @module
 */

import { waitEstablishedSince } from "./_bird_session.ts";
import { createTopology, type LinkSpec, type RouteSpec, type Topology } from "./netns.ts";
import type { HostProcess } from "./host_process.ts";
import { run } from "./command.ts";
import { ANYCAST_DIR_PREFIX, sweepStaleAnycastDirs } from "./_anycast_sweep.ts";

export { sweepStaleAnycastDirs };
import { type Relay, relayIntoNamespace } from "./_anycast_kube.ts";
import { type BfdSettings, DEFAULT_BFD } from "../node/bgp/mod.ts";
import type { AnycastService, LocalPod } from "../node/anycast/model.ts";
import {
  routeGateways,
  routerBirdConfig,
  RouteWatch,
  untilRouteCommunity,
} from "./_anycast_router.ts";
import { addAnycastIpv6, anycastNodeBgp, anycastSysctls6 } from "./_anycast_ipv6.ts";
import { RedirectParts } from "./_anycast_redirect.ts";
import { agentCommand } from "./_anycast_agent.ts";
import type { AgentRelease } from "./_cluster_plan.ts";

export { RouteWatch };

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const HTTP = new URL("./_anycast_http.ts", import.meta.url).pathname;

/** Options of {@linkcode AnycastLab.create}. */
export interface AnycastLabOptions {
  /** Node namespaces (default 3). */
  readonly nodes?: number;
  /** The services (default one, `default/web` on 10.0.100.10:80 selecting `app: web`). */
  readonly services?: readonly AnycastService[];
  /** BFD timers on every session (default 100 ms × 3). */
  readonly bfd?: BfdSettings;
  /** Prefix the nodes announce from (default 10.0.100.0/24). */
  readonly prefix?: string;
  /**
   * Follow the Kubernetes API (lab/kube/ server on this namespace's loopback at `port`) instead
   * of the state file: each node reaches it through a relay (lab/_anycast_kube.ts).
   */
  readonly kube?: {
    readonly port: number;
    readonly kubeconfig: string;
    /** No `--bgp-config`: BGP from the LoadBalancerConfig's `spec.bgp` (the test writes it). */
    readonly bgpFromConfig?: boolean;
  };
  /**
   * Run stateful LB agents instead (`main.ts agent --datapath memory --bgp-config`, with this
   * services file): they announce the file's LB IPs once ready and withdraw first on SIGTERM.
   */
  readonly stateful?: { readonly servicesFile: string };
  /**
   * Flow redirection (`main.ts anycast --redirect`): Redis in the router namespace, each node's
   * hf_lb and decap on its eth0 (lab/_anycast_redirect.ts). TX checksum offload is off on the
   * node links and the client's (shared FINDINGS: XDP_TX over veth).
   */
  readonly redirect?: boolean;
  /**
   * Dual stack (lab/_anycast_ipv6.ts): IPv6 on every link and a second BGP session per node
   * over IPv6 carrying its /128s from 2001:db8:100::/64.
   */
  readonly ipv6?: boolean;
  /** The build the agents run (`lab/previous_release.ts`; default this checkout). */
  readonly release?: AgentRelease;
}

/** One node of the lab. */
export interface AnycastNode {
  readonly name: string;
  /** The node's address on its link to the router (the router's nexthop for it). */
  readonly address: string;
  /** The agent (`main.ts anycast`). */
  readonly agent: HostProcess;
  /** Its bird directory (bird.pid, bird.ctl, bird.log). */
  readonly birdDir: string;
}

/** A live anycast lab. Dispose it (`await using`) to tear it down. */
export class AnycastLab implements AsyncDisposable {
  readonly nodes = new Map<string, AnycastNode>();
  readonly #pods = new Map<string, LocalPod>();
  readonly #podProcs = new Map<string, HostProcess>();
  readonly #relays: Relay[] = [];
  #monitor?: HostProcess;
  #redirect?: RedirectParts;
  #options: AnycastLabOptions = {};

  private constructor(
    readonly topo: Topology,
    readonly dir: string,
    public services: readonly AnycastService[],
  ) {}

  /** The state file every agent follows. */
  get statePath(): string {
    return `${this.dir}/state.json`;
  }

  /** The first service's first address and port, e.g. `10.0.100.10`. */
  get vip(): string {
    return this.services[0]!.addresses[0]!;
  }

  /**
   * Builds the lab: namespaces and links, the router's bird, one agent (and bird) per node;
   * resolves once every BGP session on the router is Established.
   */
  static async create(options: AnycastLabOptions = {}): Promise<AnycastLab> {
    const count = options.nodes ?? 3;
    const bfd = options.bfd ?? DEFAULT_BFD;
    const prefix = options.prefix ?? "10.0.100.0/24";
    const services = options.services ??
      [{
        name: "default/web",
        addresses: ["10.0.100.10"],
        ports: ["80/TCP"],
        selector: { app: "web" },
      }];
    await sweepStaleAnycastDirs();
    const names = Array.from({ length: count }, (_, i) => `n${i + 1}`);
    const csumOff = options.redirect ? { txChecksumOff: true } : {};
    const links: LinkSpec[] = [{
      a: { host: "router", ifname: "r-c", address: "10.8.0.1/24" },
      b: { host: "client", ifname: "eth0", address: "10.8.0.2/24", ...csumOff },
    }];
    const routes: RouteSpec[] = [{ host: "client", to: "default", via: "10.8.0.1" }];
    names.forEach((n, i) => {
      links.push({
        a: { host: "router", ifname: `r-${n}`, address: `10.9.${i + 1}.1/24`, ...csumOff },
        b: { host: n, ifname: "eth0", address: `10.9.${i + 1}.2/24`, ...csumOff },
      });
      routes.push({ host: n, to: "default", via: `10.9.${i + 1}.1` });
    });
    const v6 = anycastSysctls6(options.ipv6 ?? false);
    const topo = await createTopology({
      hosts: [
        {
          name: "router",
          sysctls: {
            "net.ipv4.ip_forward": 1,
            "net.ipv4.fib_multipath_hash_policy": 1,
            "net.ipv4.conf.all.ignore_routes_with_linkdown": 1,
            "net.ipv4.conf.all.rp_filter": 0,
            ...v6.router,
          },
        },
        { name: "client", sysctls: v6.host },
        ...names.map((name) => ({ name, sysctls: v6.host })),
      ],
      links,
      routes,
    });
    const dir = await Deno.makeTempDir({ prefix: `${ANYCAST_DIR_PREFIX}${Deno.pid}-` });
    const lab = new AnycastLab(topo, dir, services);
    lab.#options = options;
    try {
      await lab.#writeState();
      if (options.ipv6) await addAnycastIpv6(topo, names);
      const ipv6 = options.ipv6 ?? false;
      const bgp = names.map((name, i) => anycastNodeBgp(name, i, { bfd, prefix, ipv6 }));
      const peers = bgp.flatMap((b) => b.routerPeers);
      await Deno.writeTextFile(
        `${dir}/router.conf`,
        routerBirdConfig("10.9.0.1", peers, { bfd, logFile: `${dir}/router.log` }),
      );
      topo.spawn("router", [
        "bird",
        "-f",
        "-c",
        `${dir}/router.conf`,
        "-s",
        `${dir}/router.ctl`,
        "-P",
        `${dir}/router.pid`,
      ], { stdout: "null" });
      if (options.redirect) {
        const nodes = names.map((name, i) => ({ name, address: `10.9.${i + 1}.2` }));
        lab.#redirect = await RedirectParts.start(topo, dir, nodes);
      }
      for (const [i, name] of names.entries()) {
        await Deno.writeTextFile(`${dir}/${name}.bgp.json`, JSON.stringify(bgp[i]!.settings));
        const birdDir = `${dir}/${name}.bird`;
        if (options.kube) lab.#relays.push(relayIntoNamespace(topo.ns(name), options.kube.port));
        const command = agentCommand(lab, name, birdDir, options, lab.#redirect);
        const agent = topo.spawnDeno(name, options.release?.main ?? MAIN, command);
        lab.nodes.set(name, { name, address: `10.9.${i + 1}.2`, agent, birdDir });
      }
      for (const node of lab.nodes.values()) {
        const ready = options.stateful ? '"msg":"ready"' : '"msg":"anycast agent ready"';
        await node.agent.waitForLine((l) => l.includes(ready), {
          timeoutMs: options.redirect ? 40_000 : 20_000,
        });
      }
      await lab.waitEstablished();
    } catch (e) {
      await lab[Symbol.asyncDispose]();
      throw e;
    }
    return lab;
  }

  /** Waits until every BGP session of the router is Established (bounded by `timeoutMs`). */
  async waitEstablished(timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let out = "";
    for (let i = 0; i < 1_000 && Date.now() < deadline; i++) {
      out = (await this.birdc("show", "protocols")).stdout;
      const bgp = out.split("\n").filter((l) => /\sBGP\s/.test(l));
      const sessions = this.nodes.size * (this.#options.ipv6 ? 2 : 1);
      if (bgp.length === sessions && bgp.every((l) => l.includes("Established"))) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`Router BGP sessions not all Established after ${timeoutMs} ms:\n${out}`);
  }

  /**
   * When the router's session with `node` came up (epoch ms, bird's `Since`), once it is
   * Established (bounded by `timeoutMs`). Compare readings with `sameSession` (bird's print-time
   * clock conversion moves an unchanged session's reading by a millisecond).
   */
  sessionSince(node: string, timeoutMs = 5_000): Promise<number> {
    return waitEstablishedSince((...a) => this.birdc(...a), `hf_${node}`, timeoutMs);
  }

  /**
   * Waits (bounded by `timeoutMs`) until the router's route to `prefix` carries the BGP
   * `community` (`65000:100`); throws with the router's `show route all` when it does not.
   */
  untilCommunity(prefix: string, community: string, timeoutMs = 5_000): Promise<void> {
    return untilRouteCommunity((...a) => this.birdc(...a), prefix, community, timeoutMs);
  }

  /** `birdc` on the router's daemon. */
  birdc(...args: string[]): Promise<{ stdout: string }> {
    return this.topo.exec("router", ["birdc", "-s", `${this.dir}/router.ctl`, ...args], {
      check: false,
    });
  }

  /** Follows the router's route to `prefix` (default the VIP) from now on. */
  async watchRoute(prefix = this.vip): Promise<RouteWatch> {
    this.#monitor ??= this.topo.spawn("router", ["ip", "-o", "monitor", "route"]);
    // The monitor must be listening before the snapshot, or a change between them is lost.
    await new Promise((r) => setTimeout(r, 50));
    const from = this.#monitor.lineCount;
    const [family, host] = prefix.includes(":") ? ["-6", `${prefix}/128`] : ["-4", `${prefix}/32`];
    const now = await this.topo.exec("router", ["ip", family, "-o", "route", "show", host]);
    return new RouteWatch(prefix, this.#monitor, routeGateways(now.stdout, prefix) ?? [], from);
  }

  /**
   * Starts a pod — an HTTP server on `port` (default 80) in the node's namespace, answering with
   * its name; port 0 starts no server — and publishes it, ready unless `ready: false`.
   */
  async startPod(
    node: string,
    name: string,
    options: { labels?: Record<string, string>; ready?: boolean; port?: number } = {},
  ): Promise<void> {
    const port = options.port ?? 80;
    if (port > 0) {
      const proc = this.topo.spawnDeno(node, HTTP, {
        args: ["pod", name, String(port)],
        permissions: ["--allow-net"],
      });
      await proc.waitForLine((l) => l.includes('"msg":"listening"'));
      this.#podProcs.set(name, proc);
    }
    await this.setPod({
      name,
      node,
      labels: options.labels ?? { app: "web" },
      ready: options.ready ?? true,
      terminating: false,
    });
  }

  /** Kills a pod's process (the end of its grace period); the state is left as it was. */
  async stopPod(name: string): Promise<void> {
    await this.#podProcs.get(name)?.stop("SIGKILL", 1_000);
    this.#podProcs.delete(name);
  }

  /** Replaces the services (an operator editing them) and publishes the state. */
  async setServices(services: readonly AnycastService[]): Promise<void> {
    this.services = services;
    await this.#writeState();
  }

  /** Publishes a pod's new state (what the kubelet would report). */
  async setPod(pod: LocalPod): Promise<void> {
    this.#pods.set(pod.name, pod);
    await this.#writeState();
  }

  /** Marks a pod ready or terminating (it keeps serving). */
  async updatePod(
    name: string,
    change: Partial<Pick<LocalPod, "ready" | "terminating">>,
  ): Promise<void> {
    const pod = this.#pods.get(name);
    if (!pod) throw new Error(`Unknown pod "${name}"`);
    await this.setPod({ ...pod, ...change });
  }

  /** Stops a pod's process and removes it from the state. */
  async deletePod(name: string): Promise<void> {
    await this.stopPod(name);
    this.#pods.delete(name);
    await this.#writeState();
  }

  /** Starts the HTTP client load from the client namespace. */
  startLoad(durationMs: number, intervalMs = 20): HostProcess {
    return this.topo.spawnDeno("client", HTTP, {
      args: ["load", `http://${this.vip}:80/`, String(durationMs), String(intervalMs)],
      permissions: ["--allow-net"],
    });
  }

  /**
   * Kills a node's agent with SIGKILL (its bird keeps announcing, as after a crash; or `signal`)
   * and starts a new one — after `meanwhile` — which adopts that bird; resolves once it is ready.
   */
  async restartAgent(
    name: string,
    o: { signal?: Deno.Signal; meanwhile?: () => Promise<unknown>; release?: AgentRelease | null } =
      {},
  ): Promise<HostProcess> {
    const node = this.nodes.get(name);
    if (!node) throw new Error(`No node "${name}"`);
    await node.agent.stop(o.signal ?? "SIGKILL", 10_000);
    await o.meanwhile?.();
    // `release`: the build the new agent runs (null: this checkout; unset: the lab's).
    const opts = o.release === undefined
      ? this.#options
      : { ...this.#options, release: o.release ?? undefined };
    const command = agentCommand(this, name, node.birdDir, opts, this.#redirect);
    const agent = this.topo.spawnDeno(name, opts.release?.main ?? MAIN, command);
    this.nodes.set(name, { ...node, agent });
    const ready = this.#options.stateful ? '"msg":"ready"' : '"msg":"anycast agent ready"';
    await agent.waitForLine((l) => l.includes(ready), {
      timeoutMs: this.#redirect ? 40_000 : 20_000,
    });
    return agent;
  }

  /** Sends `signal` (`KILL`, `STOP`, `CONT`…) to a node's bird with `kill` (no --allow-run=all). */
  async signalBird(node: string, signal: string): Promise<void> {
    await run(["kill", `-${signal}`, String(await this.birdPid(node))]);
  }

  /** bird's pid on a node (the agent's child). */
  async birdPid(node: string): Promise<number> {
    return Number((await Deno.readTextFile(`${this.nodes.get(node)!.birdDir}/bird.pid`)).trim());
  }

  async #writeState(): Promise<void> {
    const tmp = `${this.statePath}.tmp`;
    await Deno.writeTextFile(
      tmp,
      JSON.stringify({ services: this.services, pods: [...this.#pods.values()] }),
    );
    await Deno.rename(tmp, this.statePath);
  }

  /** Tears everything down: processes (birds included), namespaces, the directory. */
  async [Symbol.asyncDispose](): Promise<void> {
    // The agents' birds are not the topology's children: kill whatever runs in our namespaces
    // with `kill` (Deno.kill needs --allow-run for everything, which test permission sets lack).
    for (const host of this.topo.hosts) {
      const { stdout } = await run(["ip", "netns", "pids", this.topo.ns(host)], { check: false });
      const pids = stdout.split("\n").map((s) => s.trim()).filter((s) => /^\d+$/.test(s));
      if (pids.length) await run(["kill", "-KILL", ...pids], { check: false });
    }
    await this.topo.destroy();
    await this.#redirect?.stop();
    for (const relay of this.#relays.splice(0)) relay.close();
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }
}
