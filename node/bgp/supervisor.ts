/**
 * Keeps the node's bird running: a bird that exits without being asked to (killed, crashed) is
 * started again with the latest settings, after a backoff (50 ms after a bird that ran
 * {@linkcode HEALTHY_RUN_MS}, growing to 5 s while it keeps dying sooner), and counted. The
 * addresses on `lo` are untouched meanwhile, so the restarted bird announces exactly what the
 * node holds; its routes follow its new sessions at once (node/bgp/_waker.ts).
 *
 * @module
 */

import { log as rootLog, type Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import { Backoff, sleep } from "../../lib/backoff.ts";
import { BirdDaemon } from "./bird.ts";
import type { BgpProblem, BgpSettings } from "./settings.ts";

/**
 * A bird that lived this long was healthy (it loaded its config and peered): the next restart
 * after it dies is immediate again (the backoff starts over) instead of continuing to grow —
 * a bird killed now and then would otherwise wait up to 5 s each time. A bird that keeps dying
 * sooner still backs off.
 */
export const HEALTHY_RUN_MS = 2_000;

/** The supervisor's metric, on `registry` (lib/metrics.ts: registered per instance). */
const restartsCounter = (registry: Registry) =>
  registry.counter(
    "holdfast_bgp_daemon_restarts_total",
    "Times the node's bird exited unasked and was started again.",
  );

/** Options of {@linkcode BirdSupervisor.start}. */
export interface BirdSupervisorOptions {
  /** bird's directory (config, socket, pid file, log). */
  readonly dir: string;
  readonly problems?: readonly BgpProblem[];
  readonly log?: Logger;
  /** Restarts allowed before giving up (default 1,000). */
  readonly maxRestarts?: number;
  /** Announce mode `lb`: the addresses to announce from the start (default none). */
  readonly announced?: readonly string[];
  /**
   * Announce mode `lb`: what a restarted bird announces, asked at the restart (default: the
   * addresses last given to {@linkcode BirdSupervisor.announce}). The egress NAT's owner passes
   * the addresses whose lease is still valid: a bird killed while the agent was stopped must not
   * come back announcing an address the agent lost meanwhile.
   */
  readonly announcedNow?: () => readonly string[];
  /** Where its metrics go (default the process registry, served at `/metrics`). */
  readonly registry?: Registry;
}

/** A bird daemon kept running until {@linkcode BirdSupervisor.stop}. */
export class BirdSupervisor implements AsyncDisposable {
  #daemon: BirdDaemon;
  #settings: BgpSettings;
  #problems: readonly BgpProblem[];
  #announced: readonly string[];
  #stopped = false;
  readonly #watch: Promise<void>;
  readonly #restarts: ReturnType<typeof restartsCounter>;

  private constructor(daemon: BirdDaemon, readonly options: BirdSupervisorOptions) {
    this.#daemon = daemon;
    this.#restarts = restartsCounter(options.registry ?? processRegistry);
    this.#settings = daemon.settings;
    this.#problems = options.problems ?? [];
    this.#announced = daemon.announced;
    this.#watch = this.#supervise();
  }

  /**
   * Starts bird, or adopts the one a previous agent left in `options.dir` (see
   * {@linkcode BirdDaemon.start}), and watches it.
   */
  static async start(
    settings: BgpSettings,
    options: BirdSupervisorOptions,
  ): Promise<BirdSupervisor> {
    return new BirdSupervisor(await BirdDaemon.start(settings, options), options);
  }

  /** The running daemon (a new one after each restart). */
  get daemon(): BirdDaemon {
    return this.#daemon;
  }

  /** Applies new settings to the running bird; a restart later uses them too. */
  async reload(settings: BgpSettings, problems: readonly BgpProblem[] = []): Promise<void> {
    await this.#daemon.reload(settings, problems);
    this.#settings = settings;
    this.#problems = problems;
  }

  /** Announce mode `lb`: announces exactly `addresses` (kept across restarts). */
  async announce(addresses: readonly string[]): Promise<void> {
    this.#announced = addresses;
    await this.#daemon.announce(addresses);
  }

  async #supervise(): Promise<void> {
    const log = this.options.log ?? rootLog.with({ component: "bgp" });
    const backoff = new Backoff({ minMs: 50, maxMs: 5_000 });
    let since = performance.now();
    for (let i = 0; i < (this.options.maxRestarts ?? 1_000); i++) {
      const status = await this.#daemon.exited;
      if (this.#stopped || this.#daemon.stopping) return;
      this.#restarts.inc();
      if (performance.now() - since >= HEALTHY_RUN_MS) backoff.reset();
      const delay = backoff.next();
      log.error("bird exited unasked; starting it again", {
        code: status.code,
        signal: status.signal,
        in_ms: Math.round(delay),
      });
      await sleep(delay);
      for (let attempt = 0; !this.#stopped && attempt < 100; attempt++) {
        try {
          this.#daemon = await BirdDaemon.start(this.#settings, {
            ...this.options,
            problems: this.#problems,
            announced: this.options.announcedNow?.() ?? this.#announced,
          });
          since = performance.now();
          break;
        } catch (e) {
          log.error("cannot start bird again", { error: e, attempt });
          await sleep(backoff.next());
        }
      }
      if (this.#stopped) return void await this.#daemon.stop();
    }
    log.error("bird keeps exiting; giving up", { restarts: this.options.maxRestarts ?? 1_000 });
  }

  /** Stops supervising and stops bird. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#daemon.stop();
  }

  /** Stops bird. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
