/**
 * The anycast lab's router: bird2 peering with every node (eBGP, one AS per node so their paths
 * merge), BFD on every session, and a kernel protocol with `merge paths yes` so the router's
 * kernel gets one multipath route per anycast /32 (shared FINDINGS: BGP with bird2). A peer at
 * an IPv6 address is an IPv6 session (the `ipv6` channel; node/bgp/bird_config.ts says why a
 * session per family): its /128s go to the kernel's IPv6 table, multipath the same way.
 *
 * @module
 */

import type { BfdSettings } from "../node/bgp/mod.ts";
import type { HostProcess } from "./host_process.ts";
import type { Topology } from "./netns.ts";
import { waitEstablishedSince } from "./_bird_session.ts";

/** The router's AS number. */
export const ROUTER_ASN = 65000;

/** One node as the router peers with it. */
export interface RouterPeer {
  readonly name: string;
  readonly address: string;
  readonly asn: number;
}

/**
 * The `--bgp-config` (node/bgp/settings.ts) of a node peering with the router at
 * `routerAddress`: router id = its address, its own AS, the router as its one peer with BFD.
 */
export function nodeBgpSettings(
  node: Omit<RouterPeer, "name">,
  routerAddress: string,
  options: { bfd: BfdSettings; prefix: string },
) {
  return {
    routerId: node.address,
    localAsn: node.asn,
    prefixes: [options.prefix],
    peers: [{ address: routerAddress, asn: ROUTER_ASN, bfd: options.bfd }],
  };
}

/** bird.conf of the router. */
export function routerBirdConfig(
  routerId: string,
  peers: readonly RouterPeer[],
  options: { bfd: BfdSettings; logFile: string },
): string {
  const { intervalMs, multiplier } = options.bfd;
  const lines = [
    `log "${options.logFile}" all;`,
    `router id ${routerId};`,
    `protocol device { scan time 10; }`,
    `protocol kernel hf_kernel { ipv4 { import none; export all; }; merge paths yes limit 16; }`,
    `protocol kernel hf_kernel6 { ipv6 { import none; export all; }; merge paths yes limit 16; }`,
    `protocol bfd hf_bfd { }`,
  ];
  for (const p of peers) {
    const v6 = p.address.includes(":");
    lines.push(
      `protocol bgp hf_${p.name.replaceAll("-", "_")}${v6 ? "_v6" : ""} {`,
      `  local as ${ROUTER_ASN};`,
      `  neighbor ${p.address} as ${p.asn};`,
      `  connect delay time 1;`,
      `  error wait time 1, 10;`,
      `  bfd { min rx interval ${intervalMs} ms; min tx interval ${intervalMs} ms;` +
        ` multiplier ${multiplier}; };`,
      // IPv6: the node's global address as next hop, like IPv4's (bird 2.0.12 picks it here
      // without the option too: tests/netns/bgp_ipv6_test.ts passes either way; said explicitly).
      v6
        ? `  ipv6 { import all; export none; next hop prefer global; };`
        : `  ipv4 { import all; export none; };`,
      `}`,
    );
  }
  return lines.join("\n") + "\n";
}

/**
 * The gateways of `prefix`'s route in `ip -o route show` / `ip -o monitor route` output, or
 * null when the line is about another prefix. A `Deleted` line means no gateway; a nexthop
 * flagged `linkdown` is skipped (the kernel does not use it with ignore_routes_with_linkdown).
 *
 * @example
 * ```ts
 * import { routeGateways } from "./_anycast_router.ts";
 * const line = "10.0.100.10 proto bird metric 32 \\tnexthop via 10.9.1.2 dev r-n1 weight 1 " +
 *   "\\tnexthop via 10.9.2.2 dev r-n2 weight 1 linkdown";
 * if (routeGateways(line, "10.0.100.10")?.join() !== "10.9.1.2") throw new Error();
 * if (routeGateways("Deleted 10.0.100.10 via 10.9.1.2 dev r-n1", "10.0.100.10")?.length !== 0) {
 *   throw new Error();
 * }
 * ```
 */
export function routeGateways(line: string, prefix: string): string[] | null {
  const deleted = line.startsWith("Deleted ");
  const rest = deleted ? line.slice(8) : line;
  const dst = rest.trim().split(/\s+/)[0];
  if (dst !== prefix && dst !== `${prefix}/32` && dst !== `${prefix}/128`) return null;
  if (deleted) return [];
  const hops = rest.split(/\\t|\t|nexthop/).slice(1);
  const parts = hops.length > 0 ? hops : [rest];
  return parts.flatMap((h) => {
    const m = /via (\S+)/.exec(h);
    return m && !/\blinkdown\b/.test(h) ? [m[1]!] : [];
  });
}

/**
 * Waits (bounded by `timeoutMs`) until the route to `prefix` that `birdc` (a router's) shows
 * carries the BGP `community` (`65000:100`); throws with its `show route all` when it does not.
 */
export async function untilRouteCommunity(
  birdc: (...args: string[]) => Promise<{ stdout: string }>,
  prefix: string,
  community: string,
  timeoutMs: number,
): Promise<void> {
  const shown = `(${community.replace(":", ",")})`;
  const deadline = Date.now() + timeoutMs;
  let routes = "";
  for (let i = 0; i < 1_000 && Date.now() < deadline; i++) {
    routes = (await birdc("show", "route", "all", prefix)).stdout;
    if (routes.includes(shown)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`The router's route to ${prefix} never carried ${community}:\n${routes}`);
}

/** Follows the router's route to one prefix through `ip -o monitor route`. */
export class RouteWatch {
  #gateways: string[] = [];
  #seen = 0;

  /**
   * Reads `monitor` (an `ip -o monitor route` process) for `prefix`: `initial` are the gateways
   * of a snapshot taken once the monitor had printed `fromLine` lines.
   */
  constructor(
    readonly prefix: string,
    readonly monitor: HostProcess,
    initial: string[],
    fromLine: number,
  ) {
    this.#gateways = initial.sort();
    this.#seen = fromLine;
  }

  /** The gateways the kernel uses now (as far as the monitor has told). */
  get gateways(): string[] {
    this.#drain();
    return [...this.#gateways];
  }

  #drain(): void {
    const offset = this.monitor.lineCount - this.monitor.lines.length;
    for (; this.#seen < this.monitor.lineCount; this.#seen++) {
      const line = this.monitor.lines[this.#seen - offset];
      const g = line === undefined ? null : routeGateways(line, this.prefix);
      if (g) this.#gateways = g.sort();
    }
  }

  /**
   * Resolves with `performance.now()` at the moment the gateways satisfy `want` (checked on
   * every monitor line); rejects after `timeoutMs` naming what was seen.
   */
  async until(want: (gateways: string[]) => boolean, timeoutMs = 10_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (let i = 0; i < 100_000 && Date.now() < deadline; i++) {
      if (want(this.gateways)) return performance.now();
      await this.monitor.waitForLine(() => true, {
        fromLine: this.#seen,
        timeoutMs: Math.max(1, deadline - Date.now()),
      }).catch(() => {});
    }
    if (want(this.gateways)) return performance.now();
    throw new Error(
      `Router route to ${this.prefix} did not reach the wanted nexthops in ${timeoutMs} ms; ` +
        `it has ${JSON.stringify(this.#gateways)}`,
    );
  }
}

/** Options of {@linkcode RouterBird.start}. */
export interface RouterBirdOptions {
  /** The router's BGP router id (one of its addresses). */
  readonly routerId: string;
  /** BFD timers on every session. */
  readonly bfd: BfdSettings;
  /** Peers configured at start (more with {@linkcode RouterBird.setPeers}). */
  readonly peers?: readonly RouterPeer[];
}

/**
 * A router namespace's bird2 ({@linkcode routerBirdConfig}): started in `host` with its config,
 * control socket, pid file and log in `dir`; peers changed with `birdc configure` (sessions of
 * unchanged peers stay up). Stopped with the topology (it is one of its processes).
 */
export class RouterBird {
  #peers: RouterPeer[];

  private constructor(
    readonly topo: Topology,
    readonly host: string,
    readonly dir: string,
    readonly options: RouterBirdOptions,
  ) {
    this.#peers = [...(options.peers ?? [])];
  }

  /** Writes the config, starts bird and waits until its control socket answers (≤ 5 s). */
  static async start(
    topo: Topology,
    host: string,
    dir: string,
    options: RouterBirdOptions,
  ): Promise<RouterBird> {
    const bird = new RouterBird(topo, host, dir, options);
    await bird.#write();
    topo.spawn(
      host,
      ["bird", "-f", "-c", bird.#conf, "-s", bird.socket, "-P", `${dir}/router.pid`],
      {
        stdout: "null",
      },
    );
    const deadline = Date.now() + 5_000;
    for (let i = 0; i < 500 && Date.now() < deadline; i++) {
      if ((await bird.birdc("show", "status")).stdout.includes("Daemon is up")) return bird;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`Router bird in "${host}" did not answer on "${bird.socket}" within 5 s`);
  }

  /** The control socket. */
  get socket(): string {
    return `${this.dir}/router.ctl`;
  }

  get #conf(): string {
    return `${this.dir}/router.conf`;
  }

  /** The peers configured now. */
  get peers(): readonly RouterPeer[] {
    return this.#peers;
  }

  /** Makes `peers` the configured ones (`birdc configure`; other sessions stay up). */
  async setPeers(peers: readonly RouterPeer[]): Promise<void> {
    this.#peers = [...peers];
    await this.#write();
    const out = (await this.birdc("configure")).stdout;
    if (!/Reconfigured|Reconfiguration in progress/.test(out)) {
      throw new Error(`Router bird refused its new config "${this.#conf}": ${out.trim()}`);
    }
  }

  /**
   * When the session with peer `name` (`hf_<name>`) came up (epoch ms), once Established (bounded
   * by `timeoutMs`); compare readings with `sameSession` from `_bird_session.ts`.
   */
  sessionSince(name: string, timeoutMs = 5_000): Promise<number> {
    return waitEstablishedSince(
      (...a) => this.birdc(...a),
      `hf_${name.replaceAll("-", "_")}`,
      timeoutMs,
    );
  }

  /** `birdc -s SOCKET ARGS…` in the router's namespace (never throws for birdc's exit code). */
  birdc(...args: string[]): Promise<{ stdout: string }> {
    return this.topo.exec(this.host, ["birdc", "-s", this.socket, ...args], { check: false });
  }

  async #write(): Promise<void> {
    await Deno.writeTextFile(
      this.#conf,
      routerBirdConfig(this.options.routerId, this.#peers, {
        bfd: this.options.bfd,
        logFile: `${this.dir}/router.log`,
      }),
    );
  }
}
