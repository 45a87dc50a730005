/**
 * BGP for stateful LB nodes (`main.ts agent --bgp-config FILE`): the node announces its LB
 * addresses only while it is ready (`/readyz`: datapath attached, flows restored, selected as an
 * LB node) and, on shutdown, withdraws them first, waits for the routers to drop it, and only
 * then lets the agent stop. The addresses are bird static routes (announce mode `lb`,
 * node/bgp/bird_config.ts), followed by a short poll of what the agent says it serves.
 *
 * @module
 */

import { log as rootLog, type Logger } from "../../lib/log.ts";
import { sleep } from "../../lib/backoff.ts";
import { isIpv4 } from "../../lib/ipv4.ts";
import { parseBgpSettingsText } from "./settings.ts";
import { BirdSupervisor } from "./supervisor.ts";

/** Options of {@linkcode LbAnnouncer.start}. */
export interface LbAnnouncerOptions {
  /** bird's directory. */
  readonly dir: string;
  readonly log?: Logger;
  /** How often the wanted addresses are compared with the announced ones (default 100 ms). */
  readonly pollMs?: number;
  /** After withdrawing on shutdown, how long the routers get to drop this node (default 500 ms). */
  readonly withdrawWaitMs?: number;
}

/** Announces what `wanted()` returns (empty while not ready) until {@linkcode withdrawAndStop}. */
export class LbAnnouncer {
  readonly #bird: BirdSupervisor;
  readonly #wanted: () => readonly string[];
  readonly #options: LbAnnouncerOptions;
  readonly #log: Logger;
  readonly #stop = new AbortController();
  #loop: Promise<void> = Promise.resolve();

  private constructor(
    bird: BirdSupervisor,
    wanted: () => readonly string[],
    options: LbAnnouncerOptions,
    log: Logger,
  ) {
    this.#bird = bird;
    this.#wanted = wanted;
    this.#options = options;
    this.#log = log;
  }

  /**
   * Reads the BGP settings file (announce mode forced to `lb`), starts bird announcing what
   * `wanted()` says now (a bird a killed agent left is adopted with it: what it announced stays
   * announced when it is still wanted), then follows `wanted`.
   */
  static async start(
    settingsFile: string,
    wanted: () => readonly string[],
    options: LbAnnouncerOptions,
  ): Promise<LbAnnouncer> {
    const log = options.log ?? rootLog.with({ component: "bgp" });
    const { settings, problems } = parseBgpSettingsText(await Deno.readTextFile(settingsFile));
    const bird = await BirdSupervisor.start({ ...settings, announce: "lb" }, {
      dir: options.dir,
      problems,
      log,
      announced: [...new Set(wanted().filter(isIpv4))].sort(), // others: #sync logs them
    });
    if (bird.daemon.announced.length > 0) {
      log.info("announcing LB addresses", { addresses: bird.daemon.announced });
    }
    const announcer = new LbAnnouncer(bird, wanted, options, log);
    await announcer.#sync();
    announcer.#loop = announcer.#follow();
    return announcer;
  }

  /** The addresses announced now. */
  get announced(): readonly string[] {
    return this.#bird.daemon.announced;
  }

  async #sync(): Promise<void> {
    await this.#bird.announce(this.#wanted()).catch((error) =>
      this.#log.error("cannot change the announced LB addresses", { error })
    );
  }

  async #follow(): Promise<void> {
    const pollMs = this.#options.pollMs ?? 100;
    // Bounded by the signal; the count is a backstop (a year of 100 ms polls).
    for (let i = 0; i < 315_360_000 && !this.#stop.signal.aborted; i++) {
      await sleep(pollMs, this.#stop.signal).catch(() => {});
      if (!this.#stop.signal.aborted) await this.#sync();
    }
  }

  /** Withdraws every address, waits for the routers to drop this node, stops bird. */
  async withdrawAndStop(): Promise<void> {
    if (this.#stop.signal.aborted) return;
    this.#stop.abort();
    await this.#loop;
    const had = this.announced;
    await this.#bird.announce([]).catch((error) =>
      this.#log.error("cannot withdraw the LB addresses; stopping bird ends the sessions", {
        error,
      })
    );
    const waitMs = this.#options.withdrawWaitMs ?? 500;
    this.#log.info("withdrew LB addresses; waiting for the routers", {
      addresses: had,
      wait_ms: waitMs,
    });
    await sleep(waitMs);
    await this.#bird.stop();
  }
}
