/**
 * A throwaway `redis-server` for the lab, tests and benches: free loopback port (or inside a
 * namespace), no persistence, its own temp dir (`/tmp/hf-redis-<pid>-*`), stopped and removed when
 * disposed. Restartable on the same port, to show what happens while Redis is away.
 *
 * @example
 * ```ts ignore
 * await using redis = await startRedis();
 * const client = createClient({ url: redis.url });
 * ```
 *
 * @module
 */
import { processAlive, run } from "./command.ts";

/** An ACL user to create at start: `user NAME on >PASSWORD` plus the given rules. */
export interface RedisAclUser {
  /** User name. */
  readonly name: string;
  /** Password. */
  readonly password: string;
  /** ACL rules, default `["~*", "&*", "+@all"]`. */
  readonly rules?: readonly string[];
}

/** Options for {@linkcode startRedis}. */
export interface StartRedisOptions {
  /** `requirepass` for the default user. */
  readonly password?: string;
  /** ACL users to create at start. */
  readonly aclUsers?: readonly RedisAclUser[];
  /** Milliseconds to wait for the server to accept connections (default 10,000). */
  readonly readyTimeoutMs?: number;
  /**
   * Run inside this network namespace (e.g. `topo.ns("ctl")`), listening on `bind`, so agents in
   * other lab namespaces reach it over the lab network. Default: the caller's, on 127.0.0.1.
   */
  readonly netns?: string;
  /** Address to listen on (default 127.0.0.1). */
  readonly bind?: string;
  /** Port (default: a free loopback port; with `netns` default 6379). */
  readonly port?: number;
  /** More `redis-server` arguments (e.g. `--cluster-enabled yes`, `lab/redis_cluster.ts`). */
  readonly extraArgs?: readonly string[];
}

/** A running throwaway redis-server. */
export class RedisServer implements AsyncDisposable {
  #child: Deno.ChildProcess | null = null;

  /** A server on `port` with its files in `dir`; started by startRedis. */
  constructor(readonly port: number, readonly dir: string, readonly options: StartRedisOptions) {}

  /** `redis://127.0.0.1:PORT` (no credentials). */
  get url(): string {
    return `redis://${this.options.bind ?? "127.0.0.1"}:${this.port}`;
  }

  /** PID of the current server process, or null when stopped. */
  get pid(): number | null {
    return this.#child?.pid ?? null;
  }

  /** Starts the server (again) on the same port and waits until it answers PING. */
  async start(): Promise<void> {
    if (this.#child) throw new Error(`redis-server on port ${this.port} is already running`);
    const args = [
      "--port",
      String(this.port),
      "--bind",
      this.options.bind ?? "127.0.0.1",
      "--dir",
      this.dir,
      "--save",
      "",
      "--appendonly",
      "no",
      "--daemonize",
      "no",
      "--protected-mode",
      "no",
      "--loglevel",
      "warning",
      "--logfile",
      `${this.dir}/redis.log`,
      "--pidfile",
      `${this.dir}/redis.pid`,
    ];
    if (this.options.password) args.push("--requirepass", this.options.password);
    args.push(...(this.options.extraArgs ?? []));
    for (const u of this.options.aclUsers ?? []) {
      args.push("--user", u.name, "on", `>${u.password}`, ...(u.rules ?? ["~*", "&*", "+@all"]));
    }
    const argv = this.options.netns
      ? ["ip", "netns", "exec", this.options.netns, "redis-server", ...args]
      : ["redis-server", ...args];
    this.#child = new Deno.Command(argv[0]!, {
      args: argv.slice(1),
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    await waitForPing(this, this.options.readyTimeoutMs ?? 10_000, this.#child);
  }

  /** Stops the server (SIGKILL by default: an abrupt loss, as a crash would be). */
  async stop(signal: Deno.Signal = "SIGKILL"): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#child = null;
    try {
      child.kill(signal);
    } catch { /* exited */ }
    await child.status;
    try {
      await child.stderr.cancel();
    } catch { /* consumed */ }
  }

  /** Runs one `redis-cli` command against this server (from its namespace) and returns stdout. */
  async cli(...args: string[]): Promise<string> {
    return (await run(cliArgv(this, args), { timeoutMs: 5_000 })).stdout;
  }

  /** Stop, then start again on the same port. */
  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Stops the server and removes its directory. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }
}

/** Finds a free TCP port on 127.0.0.1. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/**
 * Waits until the server answers PING (`+PONG`, or `NOAUTH` when a password is set: serving
 * either way), asking with `redis-cli` from inside the server's namespace when it has one.
 */
async function waitForPing(
  server: RedisServer,
  timeoutMs: number,
  child: Deno.ChildProcess,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  child.status.then(() => exited = true);
  const ping = cliArgv(server, ["ping"]);
  let last = "";
  while (Date.now() < deadline) {
    if (exited) {
      const err = await new Response(child.stderr).text().catch(() => "");
      throw new Error(`redis-server on ${server.url} exited during start: ${err.trim()}`);
    }
    const r = await run(ping, { check: false, timeoutMs: 2_000 });
    last = (r.stdout + r.stderr).trim();
    if (/PONG|NOAUTH/.test(last)) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(
    `redis-server on ${server.url} did not answer PING within ${timeoutMs} ms: ${last}`,
  );
}

/** `redis-cli` argv for one command to `server`, run inside its namespace when it has one. */
function cliArgv(server: RedisServer, args: readonly string[]): string[] {
  const where = server.options.netns ? ["ip", "netns", "exec", server.options.netns] : [];
  const to = ["-h", server.options.bind ?? "127.0.0.1", "-p", String(server.port)];
  const auth = server.options.password ? ["--no-auth-warning", "-a", server.options.password] : [];
  return [...where, "redis-cli", ...to, ...auth, ...args];
}

/** Starts a throwaway redis-server. Dispose it to stop it and remove its directory. */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  const dir = await Deno.makeTempDir({ prefix: `hf-redis-${Deno.pid}-` });
  const port = options.port ?? (options.netns ? 6379 : freePort());
  const server = new RedisServer(port, dir, options);
  try {
    await server.start();
  } catch (err) {
    await server[Symbol.asyncDispose]();
    throw err;
  }
  return server;
}

/**
 * PIDs of redis-servers started by the lab and still running, found through the pidfiles
 * in their `/tmp/hf-redis-<creator pid>-*` dirs (Deno gates /proc behind --allow-all).
 * With `staleOnly`, only those whose creating process is gone.
 */
export async function labRedisPids(
  options: { staleOnly?: boolean; owner?: (pid: number) => Promise<boolean> } = {},
): Promise<number[]> {
  const pids: number[] = [];
  const tmp = Deno.env.get("TMPDIR") ?? "/tmp";
  for (const entry of Deno.readDirSync(tmp)) {
    const m = /^hf-redis-(\d+)-/.exec(entry.name);
    if (!m || !entry.isDirectory) continue;
    if (options.staleOnly && await processAlive(Number(m[1]))) continue;
    if (options.owner && !(await options.owner(Number(m[1])))) continue;
    let pid: number;
    try {
      pid = Number(Deno.readTextFileSync(`${tmp}/${entry.name}/redis.pid`).trim());
    } catch {
      continue;
    }
    if (pid > 0 && await isRedisServer(pid)) pids.push(pid);
  }
  return pids;
}

async function isRedisServer(pid: number): Promise<boolean> {
  const { code, stdout } = await run(["ps", "-o", "comm=", "-p", String(pid)], { check: false });
  return code === 0 && stdout.trim() === "redis-server";
}

/** Kills redis-servers left behind by processes that no longer run; removes their dirs. */
export async function sweepStaleRedis(): Promise<number[]> {
  const pids = await labRedisPids({ staleOnly: true });
  for (const pid of pids) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch { /* gone */ }
  }
  const tmp = Deno.env.get("TMPDIR") ?? "/tmp";
  for (const entry of Deno.readDirSync(tmp)) {
    const m = /^hf-redis-(\d+)-/.exec(entry.name);
    if (m && !(await processAlive(Number(m[1])))) {
      await Deno.remove(`${tmp}/${entry.name}`, { recursive: true }).catch(() => {});
    }
  }
  return pids;
}
