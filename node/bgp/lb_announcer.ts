/**
 * BGP for stateful LB nodes (`main.ts agent --bgp-config FILE`, or with `--model redis` the
 * model's `bgp` section, {@linkcode LbModelBgp}): the node announces its LB
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
import { isIpv6 } from "../../lib/ipv6.ts";
import { splitHostPort } from "../lb/tables/address.ts";
import { type BgpProblem, type BgpSettings, parseBgpSettingsText } from "./settings.ts";
import { BirdSupervisor } from "./supervisor.ts";
import { lbNodeBgpSettings, type ModelBgp } from "../../controller/model/settings.ts";

/** The part of a services config the announced LB IPs come from (e.g. a `FileConfig`). */
export interface AnnouncedFrontends {
  readonly services: readonly { readonly frontends: readonly { readonly address: string }[] }[];
}

/**
 * The LB IPs an LB node announces: every frontend's IP of both families in `config`
 * (`IP:PORT/PROTO`, `[IPv6]:PORT/PROTO`), united with `extra` (`--vip`), sorted, unique. Unlike
 * the LB IPs whose flows are shared, IPv6 ones are announced whether or not their flows are shared:
 * the datapath serves them either way.
 *
 * @example
 * ```ts
 * import { announcedLbIps } from "./lb_announcer.ts";
 * const config = {
 *   services: [{ frontends: [{ address: "10.0.100.1:80/TCP" }, { address: "[2001:db8:100::1]:80/TCP" }] }],
 * };
 * const ips = announcedLbIps(config, ["10.0.100.9"]);
 * if (ips.join() !== "10.0.100.1,10.0.100.9,2001:db8:100::1") throw new Error(ips.join());
 * ```
 */
export function announcedLbIps(
  config: AnnouncedFrontends | null,
  extra: readonly string[],
): string[] {
  const ips = new Set(extra);
  for (const s of config?.services ?? []) {
    for (const f of s.frontends) ips.add(splitHostPort(f.address.split("/")[0]!).ip);
  }
  return [...ips].filter((ip) => isIpv4(ip) || isIpv6(ip)).sort();
}

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
   * Reads the BGP settings file (announce mode forced to `lb`) and starts as
   * {@linkcode LbAnnouncer.startWith}.
   */
  static async start(
    settingsFile: string,
    wanted: () => readonly string[],
    options: LbAnnouncerOptions,
  ): Promise<LbAnnouncer> {
    const { settings, problems } = parseBgpSettingsText(await Deno.readTextFile(settingsFile));
    return await LbAnnouncer.startWith(settings, problems, wanted, options);
  }

  /**
   * Starts bird with `settings` (announce mode forced to `lb`) announcing what `wanted()` says
   * now (a bird a killed agent left is adopted with it: what it announced stays announced when
   * it is still wanted), then follows `wanted`. `problems`: refused peers, reported.
   */
  static async startWith(
    settings: BgpSettings,
    problems: readonly BgpProblem[],
    wanted: () => readonly string[],
    options: LbAnnouncerOptions,
  ): Promise<LbAnnouncer> {
    const log = options.log ?? rootLog.with({ component: "bgp" });
    const bird = await BirdSupervisor.start({ ...settings, announce: "lb" }, {
      dir: options.dir,
      problems,
      log,
      // Others: #sync logs them.
      announced: [...new Set(wanted().filter((a) => isIpv4(a) || isIpv6(a)))].sort(),
    });
    if (bird.daemon.announced.length > 0) {
      log.info("announcing LB addresses", { addresses: bird.daemon.announced });
    }
    const announcer = new LbAnnouncer(bird, wanted, options, log);
    await announcer.#sync();
    announcer.#loop = announcer.#follow();
    return announcer;
  }

  /**
   * New settings (peers, ASN, timers, communities) for the running bird: `birdc configure`, no
   * restart; only the sessions whose options changed restart, the others stay up.
   */
  async reload(settings: BgpSettings, problems: readonly BgpProblem[] = []): Promise<void> {
    await this.#bird.reload({ ...settings, announce: "lb" }, problems);
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

/** Options of {@linkcode LbModelBgp}. */
export interface LbModelBgpOptions extends LbAnnouncerOptions {
  readonly nodeName: string;
  /** The node's address (`--node-address`/`--src-addr`): the router id. None: no BGP (logged). */
  readonly routerId: string | undefined;
  /** `--bgp-config` was given: it wins, the model's section is ignored (logged once). */
  readonly fileWins?: boolean;
  /** The LB addresses to announce (empty while not ready). */
  readonly wanted: () => readonly string[];
}

/**
 * The model's BGP section (`controller/model/settings.ts`) for `main.ts agent --model redis`:
 * once {@linkcode arm}ed (the agent is ready), a section starts bird through
 * {@linkcode LbAnnouncer}; a changed one reloads it (`birdc configure`: peers added or removed,
 * the others' sessions stay up); a removed one withdraws and stops bird; one the controller
 * refused (or that fails validation here) keeps the running settings. Changes apply one at a time.
 */
export class LbModelBgp {
  readonly #o: LbModelBgpOptions;
  readonly #log: Logger;
  #latest: ModelBgp | undefined;
  #armed = false;
  #stopped = false;
  #chain: Promise<void> = Promise.resolve();
  #announcer: LbAnnouncer | null = null;
  #applied = "";
  #said = "";

  constructor(options: LbModelBgpOptions) {
    this.#o = options;
    this.#log = options.log ?? rootLog.with({ component: "bgp" });
  }

  /** The running announcer (null: no bird). */
  get announcer(): LbAnnouncer | null {
    return this.#announcer;
  }

  /** The model's section changed (`undefined`: none). Applied once armed. */
  set(bgp: ModelBgp | undefined): void {
    this.#latest = bgp;
    if (this.#armed) this.#schedule();
  }

  /** The agent is ready: applies the latest section from now on. */
  arm(): void {
    this.#armed = true;
    this.#schedule();
  }

  /** Resolves once every change handed over so far is applied (or refused). */
  settled(): Promise<void> {
    return this.#chain;
  }

  #schedule(): void {
    this.#chain = this.#chain.then(() => this.#apply()).catch((error) =>
      this.#log.error("cannot apply the BGP settings of the model; the running ones stay", {
        error,
      })
    );
  }

  /** Logs `msg` once while it stays the latest thing said. */
  #sayOnce(level: "warn" | "error", msg: string, fields: Record<string, unknown> = {}): void {
    if (this.#said === msg) return;
    this.#said = msg;
    this.#log[level](msg, fields);
  }

  async #apply(): Promise<void> {
    const bgp = this.#latest;
    if (this.#stopped) return;
    if (this.#o.fileWins) {
      if (bgp !== undefined) {
        this.#sayOnce("warn", "BGP settings of the model ignored: --bgp-config wins");
      }
      return;
    }
    if (bgp === undefined) {
      if (this.#announcer === null) return;
      this.#log.info("the model has no BGP section any more: withdrawing and stopping bird");
      const a = this.#announcer;
      this.#announcer = null;
      this.#applied = "";
      return await a.withdrawAndStop();
    }
    if ("refused" in bgp) {
      return this.#sayOnce(
        "warn",
        "BGP section refused by the controller; the running settings stay",
        {
          why: bgp.refused,
        },
      );
    }
    const routerId = this.#o.routerId;
    if (routerId === undefined) {
      return this.#sayOnce(
        "error",
        "cannot announce through BGP: no node address for the router id",
        {
          why: "no --node-address or --src-addr",
        },
      );
    }
    const { settings, problems } = lbNodeBgpSettings(bgp, this.#o.nodeName, routerId);
    const key = JSON.stringify(settings);
    if (key === this.#applied) return;
    if (this.#announcer === null) {
      this.#announcer = await LbAnnouncer.startWith(settings, problems, this.#o.wanted, this.#o);
      this.#log.info("BGP from the model: bird started", {
        routerId,
        peers: settings.peers.map((p) => p.address),
      });
    } else {
      await this.#announcer.reload(settings, problems);
    }
    this.#applied = key;
    this.#said = "";
  }

  /** Stops following; withdraws, waits for the routers and stops bird if it runs. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#chain;
    await this.#announcer?.withdrawAndStop();
    this.#announcer = null;
  }
}
