/**
 * Declarative topologies in network namespaces: hosts, veth links, addresses, routes
 * (including ECMP multipath), sysctls; commands and Deno subprocesses run inside a host.
 *
 * Every namespace is named `hf-<pid>-<host>` after the process that made it, so parallel
 * runs never collide and a sweep can tell stale ones (their process is gone) from live ones.
 * `await using topo = await createTopology(spec)` tears everything down when the scope ends:
 * spawned processes first, then the namespaces (which removes their veths).
 *
 * @example
 * ```ts ignore
 * await using topo = await createTopology({
 *   hosts: [{ name: "client" }, { name: "server", loopback: ["10.0.100.1/32"] }],
 *   links: [{ a: { host: "client", ifname: "eth0", address: "10.1.0.1/24" },
 *             b: { host: "server", ifname: "eth0", address: "10.1.0.2/24" } }],
 * });
 * const out = await topo.exec("client", ["ping", "-c1", "10.1.0.2"]);
 * ```
 *
 * @module
 */

import { type ExecOptions, type ExecResult, processAlive, run } from "./command.ts";
import { HostProcess, type SpawnOptions } from "./host_process.ts";

const PREFIX = "hf-";

/** One host (network namespace). */
export interface HostSpec {
  /** Short name, unique in the topology, e.g. `lb1`. */
  readonly name: string;
  /** `sysctl` settings applied after links exist, e.g. `{"net.ipv4.ip_forward": 1}`. */
  readonly sysctls?: Readonly<Record<string, string | number>>;
  /** Addresses (CIDR) put on `lo`, e.g. an LB IP `10.0.100.1/32`. */
  readonly loopback?: readonly string[];
}

/** One end of a veth link. */
export interface LinkEnd {
  /** Host the interface lives in. */
  readonly host: string;
  /** Interface name inside the host's namespace (≤ 15 characters). */
  readonly ifname: string;
  /** Address in CIDR form, optional. */
  readonly address?: string;
  /** Turn TX checksum offload off on this end (see FINDINGS: XDP_TX over veth). */
  readonly txChecksumOff?: boolean;
}

/** A veth pair between two hosts. */
export interface LinkSpec {
  /** One end. */
  readonly a: LinkEnd;
  /** The other end. */
  readonly b: LinkEnd;
  /** MTU of both ends (default the kernel's, 1500). */
  readonly mtu?: number;
}

/** A route in one host; several `via` make an ECMP multipath route. */
export interface RouteSpec {
  /** Host the route is added in. */
  readonly host: string;
  /** Destination prefix, e.g. `10.0.100.1/32` or `default`. */
  readonly to: string;
  /** Next hop, or several for an ECMP route. */
  readonly via?: string | readonly string[];
  /** Output interface. */
  readonly dev?: string;
  /** Preferred source address. */
  readonly src?: string;
  /** Extra `ip route` words, e.g. `["advmss", "1400"]`. */
  readonly extra?: readonly string[];
}

/** The whole topology. */
export interface TopologySpec {
  /** Hosts, created first. */
  readonly hosts: readonly HostSpec[];
  /** Veth links between hosts. */
  readonly links?: readonly LinkSpec[];
  /** Routes, added last. */
  readonly routes?: readonly RouteSpec[];
}

/** Options of {@linkcode routerSpoke}. */
export interface SpokeOptions {
  /** The router's host name (default `router`). */
  readonly router?: string;
  /** TX checksum offload off on the router's end (see FINDINGS: XDP_TX over veth). */
  readonly routerTxChecksumOff?: boolean;
  /** TX checksum offload off on the host's end. */
  readonly hostTxChecksumOff?: boolean;
}

/**
 * A host hung off a router: the link between the router's `routerIfname` (`NET.1/24`) and the
 * host's `eth0` (`NET.2/24`), and the host's default route through the router.
 *
 * @example
 * ```ts
 * import { routerSpoke } from "./netns.ts";
 * const { link, route } = routerSpoke("be1", "b1", "10.3.1");
 * if (link.a.address !== "10.3.1.1/24" || link.b.address !== "10.3.1.2/24") throw new Error();
 * if (route.host !== "be1" || route.via !== "10.3.1.1") throw new Error("route");
 * ```
 */
export function routerSpoke(
  host: string,
  routerIfname: string,
  net: string,
  options: SpokeOptions = {},
): { link: LinkSpec; route: RouteSpec } {
  const router = options.router ?? "router";
  const routerEnd: LinkEnd = { host: router, ifname: routerIfname, address: `${net}.1/24` };
  const hostEnd: LinkEnd = { host, ifname: "eth0", address: `${net}.2/24` };
  return {
    link: {
      a: options.routerTxChecksumOff ? { ...routerEnd, txChecksumOff: true } : routerEnd,
      b: options.hostTxChecksumOff ? { ...hostEnd, txChecksumOff: true } : hostEnd,
    },
    route: { host, to: "default", via: `${net}.1` },
  };
}

/** Lists network namespaces whose names start with `hf-`. */
export async function listHfNamespaces(): Promise<string[]> {
  const { stdout } = await run(["ip", "netns", "list"]);
  return stdout.split("\n").map((l) => l.trim().split(/\s+/)[0] ?? "").filter((n) =>
    n.startsWith(PREFIX)
  );
}

/**
 * Removes stale `hf-` namespaces: those made by a process that no longer runs, or named without
 * a pid. Live ones of concurrent test processes are left alone. Kills processes still inside a
 * stale namespace first. Returns the names removed.
 */
export async function sweepStaleNamespaces(): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await listHfNamespaces()) {
    const m = /^hf-(\d+)-/.exec(name);
    if (m && await processAlive(Number(m[1]))) continue;
    await killNamespaceProcesses(name);
    await run(["ip", "netns", "del", name], { check: false });
    removed.push(name);
  }
  return removed;
}

/**
 * SIGKILLs every process left in namespace `ns`. `Deno.kill` needs unrestricted `--allow-run`; under
 * a permission set that lists commands (`-P=netns`) it is refused, so those pids go to `kill(1)`.
 */
async function killNamespaceProcesses(ns: string): Promise<void> {
  const { stdout } = await run(["ip", "netns", "pids", ns], { check: false });
  const refused: string[] = [];
  for (const pid of stdout.split("\n").map((s) => Number(s.trim())).filter((n) => n > 0)) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch (e) {
      if (e instanceof Deno.errors.NotCapable || e instanceof Deno.errors.PermissionDenied) {
        refused.push(String(pid));
      } /* else: already gone */
    }
  }
  if (refused.length > 0) await run(["kill", "-KILL", ...refused], { check: false });
}

/** A live topology. Dispose it (`await using`) to tear it down. */
export class Topology implements AsyncDisposable {
  readonly #processes: HostProcess[] = [];
  readonly #namespaces: Map<string, string>;

  /** A topology over existing namespaces (host name → namespace name); usually made by createTopology. */
  constructor(namespaces: Map<string, string> = new Map()) {
    this.#namespaces = namespaces;
  }

  /** Adds a host (namespace with `lo` up and its loopback addresses) to a live topology. */
  async addHost(host: HostSpec): Promise<void> {
    if (!/^[a-z0-9][a-z0-9-]{0,30}$/.test(host.name)) {
      throw new Error(`Invalid host name "${host.name}": use [a-z0-9-], at most 31 characters`);
    }
    if (this.#namespaces.has(host.name)) throw new Error(`Duplicate host name "${host.name}"`);
    const ns = `${PREFIX}${Deno.pid}-${host.name}`;
    this.#namespaces.set(host.name, ns);
    await run(["ip", "netns", "add", ns]);
    await this.exec(host.name, ["ip", "link", "set", "lo", "up"]);
    for (const addr of host.loopback ?? []) {
      await this.exec(host.name, ["ip", "addr", "add", addr, "dev", "lo"]);
    }
    for (const [key, value] of Object.entries(host.sysctls ?? {})) {
      await this.exec(host.name, ["sysctl", "-q", "-w", `${key}=${value}`]);
    }
  }

  /** Adds a veth link between two hosts of a live topology, with addresses, and brings it up. */
  async addLink(link: LinkSpec): Promise<void> {
    for (const end of [link.a, link.b]) {
      if (end.ifname.length > 15) {
        throw new Error(`Interface name "${end.ifname}" is longer than 15 characters`);
      }
    }
    const mtu = link.mtu ? ["mtu", String(link.mtu)] : [];
    await run([
      "ip",
      "link",
      "add",
      "name",
      link.a.ifname,
      "netns",
      this.ns(link.a.host),
      ...mtu,
      "type",
      "veth",
      "peer",
      "name",
      link.b.ifname,
      "netns",
      this.ns(link.b.host),
      ...mtu,
    ]);
    for (const end of [link.a, link.b]) {
      if (end.address) {
        await this.exec(end.host, ["ip", "addr", "add", end.address, "dev", end.ifname]);
      }
      await this.exec(end.host, ["ip", "link", "set", "dev", end.ifname, "up"]);
      if (end.txChecksumOff) await this.exec(end.host, ["ethtool", "-K", end.ifname, "tx", "off"]);
    }
  }

  /** Adds or replaces a route in a live topology. */
  async addRoute(route: RouteSpec): Promise<void> {
    await this.exec(route.host, routeArgv(route));
  }

  /** The namespace name of a host, e.g. `hf-1234-lb1`. */
  ns(host: string): string {
    const ns = this.#namespaces.get(host);
    if (ns === undefined) throw new Error(`Unknown host "${host}" in topology`);
    return ns;
  }

  /** Host names in this topology. */
  get hosts(): string[] {
    return [...this.#namespaces.keys()];
  }

  /** Runs a command inside a host and waits for it. */
  exec(host: string, argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    return run(["ip", "netns", "exec", this.ns(host), ...argv], options);
  }

  /** Starts a long-running command inside a host; killed at teardown. */
  spawn(host: string, argv: readonly string[], options: SpawnOptions = {}): HostProcess {
    const full = ["ip", "netns", "exec", this.ns(host), ...argv];
    const child = new Deno.Command(full[0]!, {
      args: full.slice(1),
      env: options.env,
      stdin: options.stdin ?? "null",
      stdout: options.stdout ?? "piped",
      stderr: options.stderr ?? "piped",
    }).spawn();
    const proc = new HostProcess(host, argv, child, (options.stdout ?? "piped") === "piped");
    this.#processes.push(proc);
    return proc;
  }

  /**
   * Starts `deno run` of a script inside a host with explicit permission flags, e.g.
   * `["--allow-net"]`; stdout piped for {@linkcode HostProcess.waitForLine}.
   */
  spawnDeno(
    host: string,
    script: string,
    options: {
      args?: readonly string[];
      permissions?: readonly string[];
      env?: Record<string, string>;
      stderr?: "piped" | "inherit" | "null";
    } = {},
  ): HostProcess {
    return this.spawn(host, [
      Deno.execPath(),
      "run",
      "--quiet",
      "--no-prompt",
      ...(options.permissions ?? []),
      script,
      ...(options.args ?? []),
    ], { env: options.env, stderr: options.stderr ?? "inherit" });
  }

  /** Sets a link inside a host up or down. */
  async setLink(host: string, ifname: string, up: boolean): Promise<void> {
    await this.exec(host, ["ip", "link", "set", "dev", ifname, up ? "up" : "down"]);
  }

  /** Kills every spawned process, then deletes every namespace. Safe to call twice. */
  async destroy(): Promise<void> {
    await Promise.all(this.#processes.splice(0).map((p) => p.stop("SIGKILL", 1_000)));
    for (const ns of this.#namespaces.values()) {
      await killNamespaceProcesses(ns);
      await run(["ip", "netns", "del", ns], { check: false });
    }
    this.#namespaces.clear();
  }

  /** Tears the topology down (see destroy). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }
}

/** Options for {@linkcode createTopology}. */
export interface CreateTopologyOptions {
  /** Sweep stale `hf-` namespaces first (default true). */
  readonly sweep?: boolean;
}

/**
 * Builds a topology: namespaces with `lo` up, veth links created directly inside their
 * namespaces (no names in the caller's namespace), addresses, sysctls, routes. On any error the
 * partial topology is torn down before the error is rethrown.
 */
export async function createTopology(
  spec: TopologySpec,
  options: CreateTopologyOptions = {},
): Promise<Topology> {
  if (options.sweep ?? true) await sweepStaleNamespaces();
  const topo = new Topology();
  try {
    // Sysctls go after links so per-interface keys (net.ipv4.conf.IF.*) can be set.
    for (const host of spec.hosts) await topo.addHost({ ...host, sysctls: {} });
    for (const link of spec.links ?? []) await topo.addLink(link);
    for (const host of spec.hosts) {
      for (const [key, value] of Object.entries(host.sysctls ?? {})) {
        await topo.exec(host.name, ["sysctl", "-q", "-w", `${key}=${value}`]);
      }
    }
    for (const route of spec.routes ?? []) await topo.addRoute(route);
  } catch (err) {
    await topo.destroy();
    throw err;
  }
  return topo;
}

/** `ip route replace` argv for a route spec; several `via` become `nexthop` clauses. */
export function routeArgv(route: RouteSpec): string[] {
  const argv = ["ip", "route", "replace", route.to];
  const vias = route.via === undefined
    ? []
    : typeof route.via === "string"
    ? [route.via]
    : [...route.via];
  if (vias.length > 1) {
    for (const via of vias) {
      argv.push("nexthop", "via", via, ...(route.dev ? ["dev", route.dev] : []));
    }
  } else {
    if (vias[0]) argv.push("via", vias[0]);
    if (route.dev) argv.push("dev", route.dev);
  }
  if (route.src) argv.push("src", route.src);
  argv.push(...(route.extra ?? []));
  return argv;
}
