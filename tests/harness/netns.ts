/**
 * Declarative test topologies in network namespaces: hosts, veth links, addresses, routes
 * (including ECMP multipath), sysctls; commands and Deno subprocesses run inside a host.
 *
 * Every namespace is named `hf-<pid>-<host>` after the test process that made it, so parallel
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
  readonly a: LinkEnd;
  readonly b: LinkEnd;
  readonly mtu?: number;
}

/** A route in one host; several `via` make an ECMP multipath route. */
export interface RouteSpec {
  readonly host: string;
  /** Destination prefix, e.g. `10.0.100.1/32` or `default`. */
  readonly to: string;
  readonly via?: string | readonly string[];
  readonly dev?: string;
  readonly src?: string;
  /** Extra `ip route` words, e.g. `["advmss", "1400"]`. */
  readonly extra?: readonly string[];
}

/** The whole topology. */
export interface TopologySpec {
  readonly hosts: readonly HostSpec[];
  readonly links?: readonly LinkSpec[];
  readonly routes?: readonly RouteSpec[];
}

/** Result of a finished command. */
export interface ExecResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Options for running a command in a host. */
export interface ExecOptions {
  /** Throw when the exit code is not 0 (default true). */
  readonly check?: boolean;
  readonly env?: Record<string, string>;
  readonly stdin?: string;
  /** Kill the command after this many milliseconds (default 60,000). */
  readonly timeoutMs?: number;
}

/** Options for spawning a long-running process in a host. */
export interface SpawnOptions {
  readonly env?: Record<string, string>;
  /** Where stdout/stderr go: "piped" (default) to read them, "inherit" or "null". */
  readonly stdout?: "piped" | "inherit" | "null";
  readonly stderr?: "piped" | "inherit" | "null";
  readonly stdin?: "piped" | "null";
}

/** Error raised when a command the harness runs fails. */
export class CommandError extends Error {
  constructor(readonly argv: readonly string[], readonly result: ExecResult) {
    super(
      `Command failed with exit code ${result.code}: ${JSON.stringify(argv.join(" "))}: ${
        result.stderr.trim() || result.stdout.trim()
      }`,
    );
    this.name = "CommandError";
  }
}

/** Runs a command in the test's own namespace and returns its output. */
export async function run(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
  const [cmd, ...args] = argv;
  if (cmd === undefined) throw new TypeError("Cannot run an empty command");
  const child = new Deno.Command(cmd, {
    args,
    env: options.env,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (options.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(options.stdin));
    await w.close();
  }
  const timeoutMs = options.timeoutMs ?? 60_000;
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  }, timeoutMs);
  let out: Deno.CommandOutput;
  try {
    out = await child.output();
  } finally {
    clearTimeout(timer);
  }
  const result = {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
  if ((options.check ?? true) && result.code !== 0) throw new CommandError(argv, result);
  return result;
}

/**
 * Whether a process exists. Deno gates /proc behind --allow-all, so this asks `kill -0`.
 */
export async function processAlive(pid: number): Promise<boolean> {
  const { code } = await run(["kill", "-0", String(pid)], { check: false });
  return code === 0;
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

async function killNamespaceProcesses(ns: string): Promise<void> {
  const { stdout } = await run(["ip", "netns", "pids", ns], { check: false });
  for (const pid of stdout.split("\n").map((s) => Number(s.trim())).filter((n) => n > 0)) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch { /* gone */ }
  }
}

/** A process running inside a host, killed when the topology is torn down. */
export class HostProcess {
  #killed = false;
  /** Lines of stdout seen so far (the newest 10,000), drained continuously so the child never blocks. */
  readonly lines: string[] = [];
  #seen = 0;
  #waiters = new Set<() => void>();
  #pump: Promise<void> = Promise.resolve();

  constructor(
    readonly host: string,
    readonly argv: readonly string[],
    readonly child: Deno.ChildProcess,
    piped: boolean,
  ) {
    if (piped) this.#pump = this.#readLines();
  }

  get pid(): number {
    return this.child.pid;
  }

  async #readLines(): Promise<void> {
    let buffer = "";
    try {
      for await (const chunk of this.child.stdout.pipeThrough(new TextDecoderStream())) {
        buffer += chunk;
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          this.lines.push(buffer.slice(0, nl));
          this.#seen++;
          buffer = buffer.slice(nl + 1);
          if (this.lines.length > 10_000) this.lines.shift();
        }
        for (const wake of this.#waiters) wake();
      }
    } catch { /* stream cancelled at stop */ }
    for (const wake of this.#waiters) wake();
  }

  /** Sends a signal (default SIGTERM) and waits up to `graceMs` before SIGKILL. */
  async stop(signal: Deno.Signal = "SIGTERM", graceMs = 2_000): Promise<Deno.CommandStatus> {
    if (!this.#killed) {
      this.#killed = true;
      try {
        this.child.kill(signal);
      } catch { /* already exited */ }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const killLater = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        try {
          this.child.kill("SIGKILL");
        } catch { /* exited */ }
        resolve();
      }, graceMs);
    });
    const status = await Promise.race([this.child.status, killLater.then(() => this.child.status)]);
    clearTimeout(timer);
    await this.#pump;
    try {
      const stderr = this.child.stderr;
      if (!stderr.locked) await stderr.cancel();
    } catch { /* not piped */ }
    return status;
  }

  /**
   * Resolves with the first stdout line (from `fromLine` on, default the start) matching
   * `predicate`; rejects after `timeoutMs` or when the process closes its stdout.
   */
  async waitForLine(
    predicate: (line: string) => boolean,
    options: { timeoutMs?: number; fromLine?: number } = {},
  ): Promise<string> {
    const timeoutMs = options.timeoutMs ?? 15_000;
    const deadline = Date.now() + timeoutMs;
    let index = options.fromLine ?? 0;
    let closed = false;
    this.#pump.then(() => closed = true);
    while (Date.now() < deadline) {
      const offset = this.#seen - this.lines.length;
      for (; index < this.#seen; index++) {
        const line = this.lines[index - offset];
        if (line !== undefined && predicate(line)) return line;
      }
      if (closed) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.max(1, deadline - Date.now()));
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.#waiters.add(done);
      });
      this.#waiters.clear();
    }
    throw new Error(
      `${closed ? "Output closed" : `Timed out after ${timeoutMs} ms`} waiting for a line from ${
        JSON.stringify(this.argv.join(" "))
      } in host "${this.host}"; last lines: ${JSON.stringify(this.lines.slice(-5))}`,
    );
  }

  /** Number of stdout lines seen so far; pass as `fromLine` to wait only for newer ones. */
  get lineCount(): number {
    return this.#seen;
  }
}

/** A live topology. Dispose it (`await using`) to tear it down. */
export class Topology implements AsyncDisposable {
  readonly #processes: HostProcess[] = [];
  readonly #namespaces: Map<string, string>;

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
