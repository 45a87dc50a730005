/**
 * The plan of the virtual cluster (lab/cluster.ts), which that file carries out: addresses of
 * both families, the sysctls that make IPv6 usable in fresh namespaces, each LB node's BGP
 * settings and agent command line, and the services file.
 *
 * IPv6 addresses mirror the IPv4 plan inside the documentation prefix 2001:db8::/32:
 *
 * | link                 | IPv4         | IPv6                        |
 * | -------------------- | ------------ | --------------------------- |
 * | client ↔ router `c0` | 10.1.0.0/24  | 2001:db8:1::/64             |
 * | LB node i ↔ `l{i}`   | 10.2.i.0/24  | 2001:db8:2:i::/64           |
 * | backend j ↔ `b{j}`   | 10.3.j.0/24  | 2001:db8:3:j::/64           |
 * | LB IP                | 10.0.100.1   | 2001:db8:100::1             |
 *
 * The router is `::1` on each link, the host `::2`. Every address is added with `nodad`, and DAD
 * is off in every namespace (`accept_dad=0`): a tentative address cannot be a BGP session's
 * source nor answer neighbour discovery for its first second. `keep_addr_on_down=1` keeps an LB
 * node's addresses across the link-down of a killed node (IPv6 flushes them otherwise), so a
 * returning node peers again from the same address.
 *
 * @module
 */
import type { Topology } from "./netns.ts";
import type { HostProcess } from "./host_process.ts";
import { DEFAULT_BFD } from "../node/bgp/mod.ts";
import { nodeBgpSettings, type RouterPeer } from "./_anycast_router.ts";

/** Port of the backends' HTTP health endpoint (`GET /healthz`) when the cluster has a health check. */
export const BACKEND_HEALTH_PORT = 8081;

/** Options of a virtual cluster. */
export interface ClusterOptions {
  /** LB nodes started at creation (default 2). */
  readonly lbNodes?: number;
  /** Backends started at creation (default 3). */
  readonly backends?: number;
  /** The service's LB IP (default 10.0.100.1). */
  readonly vip?: string;
  /** The service's port (default 8080). */
  readonly port?: number;
  /**
   * The IPv4 service on UDP `port` too (default false): backends echo datagrams there and log
   * each new peer (`lab/clients/tcp_echo.ts`); {@linkcode Cluster.startUdpStream} sends a stream.
   */
  readonly udp?: boolean;
  /**
   * Dual stack (default true with `model: "file"`, false with `"redis"`): IPv6 on every link and
   * a second service on the IPv6 LB IP {@linkcode ClusterOptions.vip6}; false: IPv4 only.
   */
  readonly ipv6?: boolean;
  /** The IPv6 service's LB IP (default 2001:db8:100::1). */
  readonly vip6?: string;
  /** Share flows through Redis (default true); false = Maglev only, the baseline. */
  readonly flowSync?: boolean;
  /** Log agents' lines to this process's stderr (default false). */
  readonly verbose?: boolean;
  /**
   * Where agents read the LB model: `"file"` (default) the services file this class writes;
   * `"redis"` the model in the cluster's Redis (`agent --model redis`), which someone else
   * publishes (a controller); the services file is then not written.
   */
  readonly model?: "file" | "redis";
  /**
   * The service's `healthCheck` in the services file (node/lb/sources/health_check.ts), e.g.
   * `{ kind: "http", port: BACKEND_HEALTH_PORT, path: "/healthz", intervalMs: 100 }`; backends
   * then serve `GET /healthz` on {@linkcode BACKEND_HEALTH_PORT}. Default none (no probing).
   */
  readonly healthCheck?: Readonly<Record<string, unknown>>;
  /**
   * Run a Redis Cluster (three masters, a replica each) in `ctl` instead of one Redis
   * (lab/_cluster_store.ts; default false).
   */
  readonly redisCluster?: boolean;
  /** With `redisCluster`: hash tags per LB IP, every agent's `--flow-buckets` (default 1). */
  readonly flowBuckets?: number;
  /** More `main.ts agent` arguments for every agent, e.g. `["--policy-follow", PATH]`. */
  readonly agentArgs?: readonly string[];
  /**
   * The release LB agents run (default this checkout): another build's `main.ts` and `deno.json`
   * (`lab/previous_release.ts`); {@linkcode Cluster.setRelease} changes it per node.
   */
  readonly release?: AgentRelease;
}

/** One LB node of the cluster: its index, namespace and agent (null while killed). */
export interface LbNode {
  readonly index: number;
  readonly host: string;
  agent: HostProcess | null;
  inRoute: boolean;
}

/** Which build an LB agent runs: its `main.ts` and the `deno.json` of its permission sets. */
export interface AgentRelease {
  readonly main: string;
  readonly config: string;
}

/** The UDP port of the encapsulation from LB nodes to backends. */
export const ENCAP_PORT = 6080;

/** LB node i's address on its link to the router: the router's next hop for it. */
export function lbAddress(i: number): string {
  return `10.2.${i}.2`;
}

/** Backend j's address (its echo server listens on the VIP; packets are encapsulated to this). */
export function backendAddress(j: number): string {
  return `10.3.${j}.2`;
}

/** The service's IPv6 LB IP by default (the IPv4 one is 10.0.100.1). */
export const DEFAULT_VIP6 = "2001:db8:100::1";

/** The IPv6 prefix LB nodes may announce /128s of (their BGP export gate). */
export const LB_PREFIX6 = "2001:db8:100::/48";

/** The client's IPv6 address. */
export const CLIENT_ADDRESS6 = "2001:db8:1::2";

/** LB node i's IPv6 address on its link to the router: the router's IPv6 next hop for it. */
export function lbAddress6(i: number): string {
  return `2001:db8:2:${i.toString(16)}::2`;
}

/** The router's IPv6 address on LB node i's link: the node's IPv6 BGP peer. */
export function lbRouterAddress6(i: number): string {
  return `2001:db8:2:${i.toString(16)}::1`;
}

/** Backend j's IPv6 address (IPv6 packets are encapsulated to this, in outer IPv6). */
export function backendAddress6(j: number): string {
  return `2001:db8:3:${j.toString(16)}::2`;
}

/** IPv6 sysctls of every host: no duplicate address detection, addresses kept on link down. */
export const HOST_SYSCTLS6: Readonly<Record<string, number>> = {
  "net.ipv6.conf.all.accept_dad": 0,
  "net.ipv6.conf.default.accept_dad": 0,
  "net.ipv6.conf.all.keep_addr_on_down": 1,
};

/**
 * The router's sysctls, both families: forwarding, ECMP by 5-tuple, link-down next hops skipped,
 * loose reverse-path filter (DSR replies come in on a backend's link, FINDINGS).
 */
export const ROUTER_SYSCTLS: Readonly<Record<string, number>> = {
  "net.ipv4.ip_forward": 1,
  "net.ipv4.fib_multipath_hash_policy": 1,
  "net.ipv4.conf.all.rp_filter": 2,
  "net.ipv4.conf.all.ignore_routes_with_linkdown": 1,
  ...HOST_SYSCTLS6,
  "net.ipv6.conf.all.forwarding": 1,
  "net.ipv6.fib_multipath_hash_policy": 1,
  "net.ipv6.conf.all.ignore_routes_with_linkdown": 1,
};

/**
 * IPv6 on a host's link to the router (made by `routerSpoke` for IPv4): `{net}::1/64` on the
 * router's `routerIfname`, `{net}::2/64` on the host's `eth0`, the host's IPv6 default route
 * through the router. Idempotent (`replace`), so a returning LB node can run it again.
 */
export async function addSpoke6(
  topo: Topology,
  host: string,
  routerIfname: string,
  net: string,
): Promise<void> {
  const add = (h: string, dev: string, address: string) =>
    topo.exec(h, ["ip", "-6", "addr", "replace", address, "dev", dev, "nodad"]);
  await add("router", routerIfname, `${net}::1/64`);
  await add(host, "eth0", `${net}::2/64`);
  await topo.exec(host, ["ip", "-6", "route", "replace", "default", "via", `${net}::1`]);
}

/**
 * LB node i's `--bgp-config` and the router's peers for it: eBGP, one AS per node (their paths
 * merge), BFD, LB IPs anywhere in 10/8; dual stack, a second session over IPv6 carries the IPv6
 * LB IP (a session per family: node/bgp/bird_config.ts).
 */
export function lbNodeBgp(
  i: number,
  dualStack: boolean,
): { settings: ReturnType<typeof nodeBgpSettings>; routerPeers: RouterPeer[] } {
  const peer = { name: `lb${i}`, address: lbAddress(i), asn: 65100 + i };
  const settings = nodeBgpSettings(peer, `10.2.${i}.1`, { bfd: DEFAULT_BFD, prefix: "10.0.0.0/8" });
  const routerPeers = [peer];
  if (dualStack) {
    settings.prefixes.push(LB_PREFIX6);
    settings.peers.push({ ...settings.peers[0]!, address: lbRouterAddress6(i) });
    routerPeers.push({ ...peer, address: lbAddress6(i) });
  }
  return { settings, routerPeers };
}

/** What LB node i's agent is started with (see {@linkcode lbAgentArgs}). */
export interface LbAgentPlan {
  readonly dualStack: boolean;
  /** `--config FILE`, or null: `--model redis`. */
  readonly configPath: string | null;
  readonly pinDir: string;
  readonly redisUrl: string;
  readonly bgpConfig: string;
  readonly birdDir: string;
  readonly flowSync: boolean;
  /** Flow buckets per LB IP (`--flow-buckets`; 1: the flag is left out). */
  readonly flowBuckets?: number;
  readonly extra: readonly string[];
}

const MAIN = new URL("../main.ts", import.meta.url).pathname;

/** The argv of an LB agent of `release` (undefined: this checkout) with `main.ts` arguments. */
export function lbAgentCommand(release: AgentRelease | undefined, args: readonly string[]) {
  return [
    Deno.execPath(),
    "run",
    ...(release ? ["--config", release.config] : []),
    "-P=agent",
    "--quiet",
    release?.main ?? MAIN,
    ...args,
  ];
}

/** The `main.ts` arguments of LB node i's agent. */
export function lbAgentArgs(i: number, plan: LbAgentPlan): string[] {
  return [
    ...["agent", "--node-name", `lb${i}`, "--attach", "eth0", "--src-addr", lbAddress(i)],
    ...(plan.dualStack ? ["--src-addr6", lbAddress6(i)] : []),
    ...["--encap-port", String(ENCAP_PORT)],
    ...(plan.configPath === null ? ["--model", "redis"] : ["--config", plan.configPath]),
    ...["--pin-dir", plan.pinDir, "--redis", plan.redisUrl],
    ...["--bgp-config", plan.bgpConfig, "--bgp-dir", plan.birdDir],
    // No --vip: the agent follows its config's frontends (the cluster's LB IPs among them).
    ...(plan.flowSync ? [] : ["--no-flow-sync"]),
    ...((plan.flowBuckets ?? 1) > 1 ? ["--flow-buckets", String(plan.flowBuckets)] : []),
    ...plan.extra,
  ];
}

/** The services file's shape (node/lb/sources/file_source.ts). */
interface ServicesFile {
  readonly services: readonly Record<string, unknown>[];
}

/**
 * The services file of the cluster: `default/web` on the IPv4 LB IP over the IPv4 backends and,
 * dual stack, `default/web6` on the IPv6 LB IP over the same backends' IPv6 addresses (an IPv4
 * frontend may not have IPv6 backends: one service per family).
 */
export function clusterServices(
  vips: { readonly vip: string; readonly vip6: string | null; readonly port: number },
  backends: readonly number[],
  options: {
    readonly backendAddress: (j: number) => string;
    readonly healthCheck?: Readonly<Record<string, unknown>>;
    /** The IPv4 service on UDP too (port name `udp`). */
    readonly udp?: boolean;
  },
): ServicesFile {
  const sorted = [...backends].sort((a, b) => a - b);
  const service = (
    name: string,
    frontend: string,
    backend: (j: number) => string,
    protocols: readonly ("TCP" | "UDP")[] = ["TCP"],
  ) => {
    const portName = (p: string) => p === "TCP" ? "http" : "udp";
    return {
      name,
      flowKeyMode: "five-tuple",
      frontends: protocols.map((p) => ({
        address: `${frontend}:${vips.port}/${p}`,
        portName: portName(p),
      })),
      backends: protocols.flatMap((p) =>
        sorted.map((j) => ({ address: `${backend(j)}:${vips.port}/${p}`, portName: portName(p) }))
      ),
      ...(options.healthCheck ? { healthCheck: options.healthCheck } : {}),
    };
  };
  return {
    services: [
      service(
        "default/web",
        vips.vip,
        options.backendAddress,
        options.udp ? ["TCP", "UDP"] : ["TCP"],
      ),
      ...(vips.vip6 === null
        ? []
        : [service("default/web6", `[${vips.vip6}]`, (j) => `[${backendAddress6(j)}]`)]),
    ],
  };
}
