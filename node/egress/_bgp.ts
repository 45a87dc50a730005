/**
 * BGP for a NAT pod's floating addresses (`main.ts egress --announce bgp|both`, docs/egress.md
 * "BGP mode"): the pod's own bird (node/bgp/, announce mode `lb`: static routes the agent names)
 * announces the /32 (/128) of exactly the addresses this pod owns, to the peers of the config's
 * `bgp` section, so a router forwards the replies and new connections to the current owner.
 *
 * Order: the address holder (`_address_holder.ts`, one writer per address) calls
 * {@linkcode EgressBgp.announce} on assume and {@linkcode EgressBgp.withdraw} on forfeit, and a
 * forfeit completes (so the lease is released, on a planned handover) only once bird has applied
 * the withdrawal. The standby announces only after it holds the lease, which Redis gives it only
 * after that release or after the old lease expired (fencing epochs, controller/egress/lease.ts).
 * An agent that cannot withdraw itself (stopped, starving, killed) is covered by the
 * {@linkcode BirdWatchdog}: bird is killed by the lease deadline the agent last reported.
 *
 * Readiness: the pod's Established sessions are followed (`node/bgp/_sessions.ts`); `onReady`
 * hears when the pod turns ready (a session is up) or not ready (none for
 * {@linkcode SESSION_LOSS_GRACE_MS}), and the agent says so in its heartbeats, so no pod hands a
 * floating address to this one (nor does this one take one) while its announcement would reach
 * no router (`ownership.ts` `AssignmentCache`). Logged: `BGP session established: taking
 * floating addresses` (sessions, `waited_ms`) and `no BGP session established: taking no floating
 * addresses` (`for_ms`).
 *
 * Changes are applied one at a time (one `birdc configure` each, coalesced: a change waits only
 * for the one running, then the latest wanted set is applied).
 *
 * @module
 */

import { log as rootLog, type Logger } from "../../lib/log.ts";
import { sleep } from "../../lib/backoff.ts";
import { BirdSupervisor } from "../bgp/supervisor.ts";
import {
  type EgressBgp as EgressBgpSection,
  egressBirdSettings,
} from "../../controller/egress/bgp_config.ts";
import { BirdWatchdog } from "./_bgp_watchdog.ts";
import { BirdSessions } from "../bgp/_sessions.ts";

/** How often the watchdog is told the deadline (well inside the ownership's 200 ms window). */
export const WATCHDOG_FEED_MS = 20;

/**
 * How long a withdrawal waits after `birdc configure` returned before it counts as done: bird
 * sends the UPDATE from its main loop, which may sleep until the next wake of its control socket
 * (node/bgp/_waker.ts, every 50 ms). Two wakes, so that on a planned handover (the lease is
 * released after the withdrawal) the old owner's withdrawal is on the wire well before the
 * successor's announcement: a cluster run on a loaded machine saw the router list both for a
 * moment without it.
 */
export const WITHDRAW_SETTLE_MS = 100;

/** How long a pod that was ready may have no Established session before it is not ready. */
export const SESSION_LOSS_GRACE_MS = 2_000;

/** Options of {@linkcode EgressBgp.start}. */
export interface EgressBgpOptions {
  /** bird's directory (config, control socket, pid file, log). */
  readonly dir: string;
  /** This pod's address (its peer address in the config): bird's router id. */
  readonly routerId: string;
  /** Every floating address of the config (only their host routes are ever exported). */
  readonly floating: readonly string[];
  /**
   * Until when (`performance.now()`) this pod may use `addr`: the ownership's fencing deadline
   * (`EgressOwnership.validUntil`); undefined when it does not own it.
   */
  readonly validUntil: (addr: string) => number | undefined;
  /** Hears whether at least one BGP session is Established (first call: when one is, or not). */
  readonly onReady?: (ready: boolean) => void;
  readonly log?: Logger;
}

/** A NAT pod's BGP speaker; see the module doc. */
export class EgressBgp {
  readonly #bird: BirdSupervisor;
  readonly #o: EgressBgpOptions;
  readonly #log: Logger;
  /** Addresses wanted announced, with the latest lease deadline known for each. */
  readonly #wanted = new Map<string, number>();
  /** Deadlines of addresses withdrawn but maybe still announced (until the withdrawal applies). */
  readonly #leaving = new Map<string, number>();
  #chain: Promise<void> = Promise.resolve();
  #watchdog: BirdWatchdog;
  #timer: ReturnType<typeof setInterval>;
  #sessions: BirdSessions;
  #ready = false;
  #downSince = performance.now();
  #lossTimer?: ReturnType<typeof setTimeout>;
  #stopped = false;

  private constructor(bird: BirdSupervisor, options: EgressBgpOptions, log: Logger) {
    this.#bird = bird;
    this.#o = options;
    this.#log = log;
    this.#watchdog = BirdWatchdog.start(bird.daemon.pid, log);
    this.#timer = setInterval(() => this.#feed(), WATCHDOG_FEED_MS);
    this.#sessions = BirdSessions.start(bird.daemon.socket, {
      log,
      onChange: (established) => this.#sessionsChanged(established),
    });
  }

  /**
   * Ready once a session is Established; not ready again as soon as none is while the pod holds
   * no address, else only after none has been for {@linkcode SESSION_LOSS_GRACE_MS} (a bird
   * restarted by its watchdog is back in about a second: the pod keeps its addresses, as the
   * other pods, as starved, would lose theirs too).
   */
  #sessionsChanged(established: readonly string[]): void {
    if (this.#stopped) return;
    const log = this.#log;
    if (established.length > 0) {
      clearTimeout(this.#lossTimer);
      this.#lossTimer = undefined;
      if (this.#ready) return;
      this.#ready = true;
      const waited_ms = Math.round(performance.now() - this.#downSince);
      log.info("BGP session established: taking floating addresses", {
        sessions: established,
        waited_ms,
      });
      this.#o.onReady?.(true);
      return;
    }
    if (!this.#ready || this.#lossTimer !== undefined) return;
    this.#downSince = performance.now();
    // Holding nothing, it must not be handed anything now; holding addresses, it keeps them for
    // the grace but takes no other meanwhile (`mayAcquire`).
    if (this.#wanted.size === 0) return this.#notReady();
    this.#lossTimer = setTimeout(() => this.#notReady(), SESSION_LOSS_GRACE_MS);
  }

  #notReady(): void {
    clearTimeout(this.#lossTimer);
    this.#lossTimer = undefined;
    if (this.#stopped || !this.#ready) return;
    this.#ready = false;
    this.#log.warn("no BGP session established: taking no floating addresses", {
      for_ms: Math.round(performance.now() - this.#downSince),
      holding: this.#wanted.size,
    });
    this.#o.onReady?.(false);
  }

  /** Whether the pod is ready (a session is up, or was until less than the grace ago). */
  get ready(): boolean {
    return this.#ready;
  }

  /**
   * Whether the pod may take an address it does not hold: not while it is still ready for the
   * grace with no session up (it keeps what it holds). When not ready, the assignment decides
   * (left out while another pod is ready; with none ready every pod counts).
   */
  get mayAcquire(): boolean {
    return !this.#ready || this.#sessions.established.length > 0;
  }

  /**
   * Starts (or adopts, node/bgp/bird.ts) the pod's bird announcing nothing: a bird a killed agent
   * left is reconfigured to announce nothing before this pod owns anything.
   */
  static async start(section: EgressBgpSection, options: EgressBgpOptions): Promise<EgressBgp> {
    const log = options.log ?? rootLog.with({ component: "egress-bgp" });
    let self: EgressBgp | null = null;
    const settings = egressBirdSettings(section, options.routerId, options.floating);
    const bird = await BirdSupervisor.start(settings, {
      dir: options.dir,
      log,
      announced: [],
      announcedNow: () => (self === null ? [] : self.validNow()),
    });
    self = new EgressBgp(bird, options, log);
    log.info("BGP speaker started", {
      dir: options.dir,
      routerId: options.routerId,
      localAsn: section.localAsn,
      peers: section.peers.map((p) => p.address),
      takes_addresses: "once a BGP session is established",
    });
    return self;
  }

  /** The addresses bird announces now (as last applied). */
  get announced(): readonly string[] {
    return this.#bird.daemon.announced;
  }

  /** bird's control socket (`birdc -s`). */
  get socket(): string {
    return this.#bird.daemon.socket;
  }

  /** Owned addresses whose lease is still valid now (what a restarted bird may announce). */
  validNow(): string[] {
    const now = performance.now();
    return [...this.#wanted.keys()].filter((a) => (this.#o.validUntil(a) ?? 0) > now);
  }

  /** Tells the watchdog (a new one for a restarted bird) the earliest deadline announced. */
  #feed(): void {
    if (this.#stopped) return;
    const pid = this.#bird.daemon.pid;
    // A new bird (restarted by the supervisor) gets a new watchdog; an ended one over the same
    // pid means bird was killed (or the watchdog was): nothing to watch until the restart.
    if (this.#watchdog.birdPid !== pid) {
      void this.#watchdog.stop();
      this.#watchdog = BirdWatchdog.start(pid, this.#log);
      // The new bird started with the addresses still valid (`validNow`): what the old one was
      // withdrawing is not announced any more. One started just before a withdrawal (with an
      // address no longer wanted) is killed at once; the next start leaves that address out.
      this.#leaving.clear();
      for (const a of this.#bird.daemon.announced) {
        if (!this.#wanted.has(a)) this.#leaving.set(a, 0);
      }
    }
    let deadline = Infinity;
    for (const [addr, last] of this.#wanted) {
      const now = this.#o.validUntil(addr) ?? last;
      this.#wanted.set(addr, now);
      deadline = Math.min(deadline, now);
    }
    for (const last of this.#leaving.values()) deadline = Math.min(deadline, last);
    this.#watchdog.feed(deadline);
  }

  /** Applies the wanted set after the change running now (one `birdc configure` at a time). */
  #apply(): Promise<void> {
    const run = this.#chain.then(async () => {
      const next = [...this.#wanted.keys()];
      await this.#bird.announce(next);
      for (const addr of this.#leaving.keys()) {
        if (!this.#wanted.has(addr)) this.#leaving.delete(addr);
      }
    });
    this.#chain = run.catch(() => {});
    return run;
  }

  /**
   * Announces `addr` (the holder's add, on assume): the watchdog learns its lease deadline
   * first, then bird announces it. Resolves once bird applied it; throws when bird refused.
   */
  async announce(addr: string): Promise<void> {
    if (this.#stopped) return;
    const deadline = this.#o.validUntil(addr);
    if (deadline === undefined || deadline <= performance.now()) {
      throw new Error(`Cannot announce ${addr}: its lease is no longer valid`);
    }
    this.#wanted.set(addr, deadline);
    this.#leaving.delete(addr);
    this.#feed();
    const t0 = performance.now();
    await this.#apply();
    this.#log.info("floating address announced", {
      address: addr,
      ms: Math.round((performance.now() - t0) * 10) / 10,
    });
  }

  /**
   * Withdraws `addr` (the holder's remove, on forfeit); resolves once bird applied it, or once
   * the bird that could not apply it is gone.
   */
  async withdraw(addr: string, why: string): Promise<void> {
    const last = this.#wanted.get(addr);
    if (last === undefined && !this.announced.includes(addr)) return;
    this.#wanted.delete(addr);
    this.#leaving.set(addr, last ?? performance.now());
    const t0 = performance.now();
    // Bounded: a bird that cannot apply it is killed, and the supervisor starts the next one with
    // the still-valid addresses only; one that started just before (with `addr`) is retried.
    for (let attempt = 1;; attempt++) {
      try {
        await this.#apply();
        break;
      } catch (err) {
        // The withdrawal must be done before the forfeit completes (a planned handover releases
        // the lease next): bird goes now (the watchdog kills it at once), its sessions with it.
        this.#log.error("cannot withdraw floating address; killing bird", {
          address: addr,
          attempt,
          err,
        });
        const daemon = this.#bird.daemon;
        this.#leaving.set(addr, performance.now());
        this.#feed();
        await Promise.race([daemon.exited, sleep(2_000)]);
        if (attempt >= 3) return;
      }
    }
    const ms = Math.round((performance.now() - t0) * 10) / 10;
    await sleep(WITHDRAW_SETTLE_MS);
    this.#log.info("floating address withdrawn", { address: addr, why, ms });
  }

  /** Withdraws everything, waits `waitMs` for the routers, stops bird and the watchdog. */
  async stop(waitMs = 0): Promise<void> {
    if (this.#stopped) return;
    const had = [...this.announced];
    for (const addr of [...this.#wanted.keys()]) await this.withdraw(addr, "agent stopping");
    this.#stopped = true;
    clearInterval(this.#timer);
    clearTimeout(this.#lossTimer);
    await this.#sessions.stop();
    if (had.length > 0 && waitMs > 0) await sleep(waitMs);
    await this.#watchdog.stop();
    await this.#bird.stop();
  }
}
