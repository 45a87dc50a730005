/**
 * One bird2 daemon owned by the caller: started in the caller's network namespace (`bird -f`, so
 * it is our child and dies with a kill of its pid), reconfigured in place with
 * `birdc configure` (sessions whose options did not change stay up), stopped on dispose.
 * Its config, control socket, pid file and log live in one directory the caller owns.
 *
 * A bird outlives a killed agent (it keeps announcing while the datapath keeps forwarding). The
 * next start **adopts** it instead of starting a second one: when the directory's pid file names a
 * live bird of this directory's control socket in this network namespace (`/proc/PID`), the new
 * config is written and applied with `birdc configure` (no session flap, no withdrawal) and that
 * process is watched by polling its pid. A stale pid file, a dead or unrelated pid: a fresh start.
 *
 * @module
 */

import { log as rootLog, type Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import { sleep } from "../../lib/backoff.ts";
import { renderBirdConfig } from "./bird_config.ts";
import { adoptedBird, type BirdProcess, childBird, notOurBird } from "./_proc.ts";
import { BirdWaker } from "./_waker.ts";
import type { BgpProblem, BgpSettings } from "./settings.ts";

/** The daemon's metrics, on `registry` (lib/metrics.ts: registered per instance). */
const birdMetrics = (registry: Registry) => ({
  up: registry.gauge("holdfast_bgp_daemon_up", "1 while the node's bird daemon runs."),
  reloads: registry.counter("holdfast_bgp_reloads_total", "birdc configure runs by result.", {
    labelNames: ["result"],
  }),
  refused: registry.gauge(
    "holdfast_bgp_peers_refused",
    "Peers left out of the BGP configuration because their settings are bad.",
  ),
  peers: registry.gauge("holdfast_bgp_peers_configured", "Peers in the running BGP configuration."),
  adopted: registry.counter(
    "holdfast_bgp_daemon_adopted_total",
    "Times a starting agent adopted the bird a previous agent left running instead of starting one.",
  ),
});

/** Raised when bird or birdc fails; the message carries bird's own words. */
export class BirdError extends Error {
  override name = "BirdError";
}

/** One row of `birdc show protocols`. */
export interface BirdProtocol {
  readonly name: string;
  readonly proto: string;
  readonly state: string;
  /** The Info column, e.g. `Established`, `Active`, `Connect`. */
  readonly info: string;
}

/** Options of {@linkcode BirdDaemon.start}. */
export interface BirdStartOptions {
  /** Directory for bird.conf, bird.ctl, bird.pid and bird.log (created if missing). */
  readonly dir: string;
  /** Problems found while parsing the settings, reported (log line + metric) at start. */
  readonly problems?: readonly BgpProblem[];
  /** Logger (default the root logger with `component: "bgp"`). */
  readonly log?: Logger;
  /** How long to wait for the control socket (default 5,000 ms). */
  readonly readyTimeoutMs?: number;
  /** Announce mode `lb`: the addresses to announce from the start (default none). */
  readonly announced?: readonly string[];
  /** Where its metrics go (default the process registry, served at `/metrics`). */
  readonly registry?: Registry;
}

/** Logs each refused peer (one line naming it) and sets `holdfast_bgp_peers_refused`. */
export function reportBgpProblems(
  problems: readonly BgpProblem[],
  log: Logger,
  registry: Registry = processRegistry,
): void {
  for (const p of problems) {
    log.warn("BGP peer refused; the other peers keep announcing", {
      peer: p.peer,
      path: p.path,
      reason: p.message,
    });
  }
  birdMetrics(registry).refused.set(undefined, problems.length);
}

async function runTool(argv: string[], timeoutMs = 5_000): Promise<Deno.CommandOutput> {
  const child = new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
  }, timeoutMs);
  try {
    return await child.output();
  } finally {
    clearTimeout(timer);
  }
}

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** A running bird daemon. Dispose (`await using`) or {@linkcode BirdDaemon.stop} to end it. */
export class BirdDaemon implements AsyncDisposable {
  readonly #proc: BirdProcess;
  readonly #log: Logger;
  readonly #metrics: ReturnType<typeof birdMetrics>;
  #settings: BgpSettings;
  #announced: readonly string[];
  #stopped = false;
  #waker: BirdWaker | null = null;

  private constructor(
    proc: BirdProcess,
    readonly dir: string,
    settings: BgpSettings,
    log: Logger,
    announced: readonly string[],
    /** Where its metrics go. */
    readonly registry: Registry,
    /** Whether a previous agent started this bird (adopted, not our child). */
    readonly adopted = false,
  ) {
    this.#proc = proc;
    this.#settings = settings;
    this.#announced = announced;
    this.#log = log;
    this.#metrics = birdMetrics(registry);
  }

  /** The control socket path (`birdc -s`). */
  get socket(): string {
    return `${this.dir}/bird.ctl`;
  }

  /** The config file bird reads. */
  get configPath(): string {
    return `${this.dir}/bird.conf`;
  }

  /** bird's pid (our child, or the adopted one). */
  get pid(): number {
    return this.#proc.pid;
  }

  /** Resolves when bird exits, whoever stopped it (an adopted one: within its poll period). */
  get exited(): Promise<Deno.CommandStatus> {
    return this.#proc.status;
  }

  /** Whether {@linkcode BirdDaemon.stop} was called (an exit before that is a crash). */
  get stopping(): boolean {
    return this.#stopped;
  }

  /** The settings of the running configuration. */
  get settings(): BgpSettings {
    return this.#settings;
  }

  /**
   * Adopts the bird a previous agent left running in `options.dir` (see the module doc) or
   * writes the config and starts `bird -f -c CONF -s SOCK -P PID` in the caller's namespace;
   * resolves once the control socket answers.
   *
   * @throws {BirdError} when bird refuses the config or does not come up in time.
   */
  static async start(settings: BgpSettings, options: BirdStartOptions): Promise<BirdDaemon> {
    const log = options.log ?? rootLog.with({ component: "bgp" });
    await Deno.mkdir(options.dir, { recursive: true });
    const conf = `${options.dir}/bird.conf`;
    const announced = options.announced ?? [];
    const registry = options.registry ?? processRegistry;
    const adopted = await BirdDaemon.#adopt(settings, options, log);
    if (adopted) return adopted;
    await Deno.writeTextFile(
      conf,
      renderBirdConfig(settings, { logFile: `${options.dir}/bird.log`, announced }),
    );
    reportBgpProblems(options.problems ?? [], log, registry);
    const child = new Deno.Command("bird", {
      args: ["-f", "-c", conf, "-s", `${options.dir}/bird.ctl`, "-P", `${options.dir}/bird.pid`],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const proc = childBird(child);
    const daemon = new BirdDaemon(proc, options.dir, settings, log, announced, registry);
    const deadline = Date.now() + (options.readyTimeoutMs ?? 5_000);
    let last = "";
    for (let i = 0; i < 500 && Date.now() < deadline; i++) {
      const exited = await Promise.race([
        child.status.then(() => true),
        sleep(10).then(() => false),
      ]);
      if (exited) {
        const err = text((await child.output().catch(() => ({ stderr: new Uint8Array() }))).stderr);
        throw new BirdError(`bird exited at start with config "${conf}": ${err.trim() || last}`);
      }
      const r = await runTool(["birdc", "-s", daemon.socket, "show", "status"], 1_000);
      if (r.success && text(r.stdout).includes("Daemon is up")) {
        daemon.#wake();
        daemon.#metrics.up.set(undefined, 1);
        daemon.#metrics.peers.set(undefined, settings.peers.length);
        log.info("bird started", {
          pid: child.pid,
          dir: options.dir,
          peers: settings.peers.map((p) => p.address),
          prefixes: settings.prefixes,
        });
        return daemon;
      }
      last = text(r.stdout).trim() || text(r.stderr).trim();
    }
    await daemon.stop();
    throw new BirdError(`bird did not answer on "${daemon.socket}" in time: ${last}`);
  }

  /**
   * The bird named by `DIR/bird.pid` when it is ours to adopt: configured with `settings`
   * (`birdc configure`) and watched; null (logged) when there is none to adopt.
   */
  static async #adopt(
    settings: BgpSettings,
    options: BirdStartOptions,
    log: Logger,
  ): Promise<BirdDaemon | null> {
    const pidText = (await Deno.readTextFile(`${options.dir}/bird.pid`).catch(() => "")).trim();
    if (!/^\d+$/.test(pidText)) return null;
    const pid = Number(pidText);
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") {
      log.warn("cannot check the bird pid file without --allow-ffi; starting a new bird", { pid });
      return null;
    }
    const why = notOurBird(pid, `${options.dir}/bird.ctl`);
    if (why !== null) {
      log.info("stale bird pid file; starting a new bird", { pid, why });
      return null;
    }
    const daemon = new BirdDaemon(
      adoptedBird(pid),
      options.dir,
      settings,
      log,
      options.announced ?? [],
      options.registry ?? processRegistry,
      true,
    );
    const status = await daemon.birdc("show", "status").catch((e) => e as Error);
    if (status instanceof Error || !status.includes("Daemon is up")) {
      // Hung or half-dead: it cannot be configured, so it is replaced.
      log.warn("the bird left running does not answer; killing it, starting a new one", {
        pid,
        why: status instanceof Error ? status.message : status.trim(),
      });
      daemon.#proc.kill("SIGKILL");
      await Promise.race([daemon.#proc.status, sleep(2_000)]);
      await daemon.#proc.release();
      return null;
    }
    reportBgpProblems(options.problems ?? [], log, daemon.registry);
    try {
      await daemon.#configure(settings, options.announced ?? []);
    } catch (e) {
      await daemon.#proc.release();
      throw e;
    }
    daemon.#wake();
    daemon.#metrics.up.set(undefined, 1);
    daemon.#metrics.adopted.inc();
    log.info("adopted bird", {
      pid,
      dir: options.dir,
      peers: settings.peers.map((p) => p.address),
      prefixes: settings.prefixes,
    });
    return daemon;
  }

  /**
   * Keeps bird's main loop from sleeping 3 s on a queued BGP update (node/bgp/_waker.ts says
   * why) for as long as this bird lives.
   */
  #wake(): void {
    const waker = BirdWaker.start(this.socket, { log: this.#log });
    this.#waker = waker;
    void this.#proc.status.then(() => waker.stop());
  }

  /** Runs `birdc -s SOCK ARGS…` and returns its stdout. */
  async birdc(...args: string[]): Promise<string> {
    const r = await runTool(["birdc", "-s", this.socket, ...args]);
    const out = text(r.stdout);
    if (!r.success) {
      throw new BirdError(`birdc ${args.join(" ")} failed: ${(text(r.stderr) || out).trim()}`);
    }
    return out;
  }

  /**
   * Rewrites the config from `settings` and applies it with `birdc configure` (no restart;
   * only protocols whose options changed restart). On a refused config bird keeps running the
   * previous one and this throws. Problems are reported as at start.
   */
  async reload(settings: BgpSettings, problems: readonly BgpProblem[] = []): Promise<void> {
    reportBgpProblems(problems, this.#log, this.registry);
    await this.#configure(settings, this.#announced);
    this.#log.info("bird reconfigured", { peers: settings.peers.map((p) => p.address) });
  }

  /** The addresses announced in mode `lb`. */
  get announced(): readonly string[] {
    return this.#announced;
  }

  /**
   * Announce mode `lb`: announces exactly `addresses` (static routes), withdrawing the others,
   * with `birdc configure` (sessions stay up).
   */
  async announce(addresses: readonly string[]): Promise<void> {
    const next = [...new Set(addresses)].sort();
    if (next.join() === this.#announced.join()) return;
    await this.#configure(this.#settings, next);
    this.#log.info("announcing LB addresses", { addresses: next });
  }

  /** Writes the config for `settings` + `announced` and applies it; rolls back if refused. */
  async #configure(settings: BgpSettings, announced: readonly string[]): Promise<void> {
    const previous = await Deno.readTextFile(this.configPath);
    const next = renderBirdConfig(settings, { logFile: `${this.dir}/bird.log`, announced });
    await Deno.writeTextFile(this.configPath, next);
    const out = await this.birdc("configure").catch((e) => e as Error);
    if (out instanceof Error || !/Reconfigur/.test(out)) {
      await Deno.writeTextFile(this.configPath, previous);
      this.#metrics.reloads.inc({ result: "refused" });
      const why = out instanceof Error ? out.message : out.trim();
      this.#log.error("bird refused the new configuration; the previous one stays", { why });
      throw new BirdError(`bird refused the configuration: ${why}`);
    }
    this.#settings = settings;
    this.#announced = announced;
    this.#metrics.reloads.inc({ result: "ok" });
    this.#metrics.peers.set(undefined, settings.peers.length);
  }

  /** `birdc show protocols`, parsed. */
  async protocols(): Promise<BirdProtocol[]> {
    return parseShowProtocols(await this.birdc("show", "protocols"));
  }

  /** Stops bird (SIGTERM, then SIGKILL after `graceMs`). Safe to call twice. */
  async stop(graceMs = 2_000): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#proc.kill("SIGTERM");
    const timer = setTimeout(() => this.#proc.kill("SIGKILL"), graceMs);
    await this.#proc.status;
    clearTimeout(timer);
    await this.#waker?.stop();
    await this.#proc.release();
    this.#metrics.up.set(undefined, 0);
    this.#log.info("bird stopped", { pid: this.#proc.pid, adopted: this.adopted });
  }

  /** Stops bird. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/**
 * Parses `birdc show protocols` output (after the `BIRD … ready.` banner).
 *
 * @example
 * ```ts
 * import { parseShowProtocols } from "./bird.ts";
 * const rows = parseShowProtocols(`BIRD 2.0.12 ready.
 * Name       Proto      Table      State  Since         Info
 * device1    Device     ---        up     20:01:02.123
 * hf_peer_10_9_1_1 BGP  ---        up     20:01:03.456  Established
 * `);
 * if (rows[1]?.info !== "Established" || rows[1]?.proto !== "BGP") throw new Error();
 * ```
 */
export function parseShowProtocols(out: string): BirdProtocol[] {
  const rows: BirdProtocol[] = [];
  for (const line of out.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f.length < 5 || f[0] === "Name" || line.startsWith("BIRD ")) continue;
    rows.push({ name: f[0]!, proto: f[1]!, state: f[3]!, info: f.slice(5).join(" ") });
  }
  return rows;
}
