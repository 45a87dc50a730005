/**
 * One floating address's lease as this pod sees it: standby → acquiring → owner → forfeited |
 * released → standby. An {@link AddressLease} acquires, renews and releases the Redis lease
 * (`controller/egress/lease.ts`), keeps the fencing timer that forfeits the moment its window
 * closes, polls the lease as first standby, honours a "want" (rebalance) read by the renew, and
 * runs the `assume`/`forfeit` callbacks of its address one after the other. The coordinator
 * (`ownership.ts`) decides which pod each address is assigned to and calls {@link AddressLease.step}
 * every renew period and on membership changes; the rules are in its module doc. Metrics:
 * `ownershipMetrics` (`_ownership_metrics.ts`); log lines "address assumed" (epoch, reason), "address forfeited"
 * (why), "address released".
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import type { OwnershipMetrics } from "./_ownership_metrics.ts";
import type { LeaseStore } from "../../controller/egress/lease.ts";
import type { HealthView } from "./health.ts";
import type { Assignment } from "./assign.ts";

/** Where this pod stands with one address. */
export type AddressState = "standby" | "acquiring" | "owner" | "forfeited" | "released";

/** The callbacks and identity a lease uses (part of `EgressOwnershipOptions`). */
export interface LeaseCallbacks {
  /** This pod's name (as in the heartbeats). */
  readonly self: string;
  /** Which pods are up and draining. */
  readonly health: HealthView;
  /** Takes the address into use (addresses, gratuitous ARP). */
  readonly assume: (addr: string, epoch: number) => Promise<void>;
  /** Stops using the address now (fencing). */
  readonly forfeit: (addr: string, why: string) => Promise<void>;
  /**
   * False while this pod must take no address it does not hold (BGP: no session up right now,
   * though still ready for the grace); it keeps what it holds. Default: always true.
   */
  readonly mayAcquire?: () => boolean;
  /** Before a planned release: flush the conntrack sync. */
  readonly beforeHandover?: (addr: string) => Promise<void>;
}

/** What the coordinator gives each of its leases (shared, read-only to them). */
export interface LeaseHost {
  /** The coordinator's options: the callbacks are called on this object. */
  readonly calls: LeaseCallbacks;
  readonly leases: LeaseStore;
  readonly holderId: string;
  readonly ttlMs: number;
  readonly marginMs: number;
  readonly rebalanceDelayMs: number;
  readonly log: Logger;
  readonly metrics: OwnershipMetrics;
  /** The coordinator is running (started, not stopped). */
  running(): boolean;
  /** The coordinator is draining (takes nothing). */
  draining(): boolean;
  /** `performance.now()` of the last membership change. */
  membershipChangedAt(): number;
  /** The assignment names this pod for `addr` now (its owner, or its first standby). */
  named(addr: string, asStandby: boolean): boolean;
}

/** Bound on `beforeHandover` (a flush must not hold an address hostage). */
export const HANDOVER_FLUSH_TIMEOUT_MS = 2_000;

/** This pod's lease of one floating address and its state machine; see the module doc. */
export class AddressLease {
  readonly #h: LeaseHost;
  #state: AddressState = "standby";
  /** Epoch of the lease while owner (or of the last one held). */
  #epoch = 0;
  /** performance.now() past which the address must not be used (fencing). */
  #validUntil = 0;
  /** assume() was called for the current epoch (and forfeit() not yet). */
  #inUse = false;
  /** Delays the first use after a fresh lease store. */
  #useTimer?: ReturnType<typeof setTimeout>;
  /** The latest assume/forfeit callback (the next one runs after it: one writer per address). */
  #ops: Promise<void> = Promise.resolve();
  /** A renew is in flight. */
  #renewing = false;
  /** An acquire or standby poll is in flight. */
  #busy = false;
  /** A planned handover is under way. */
  #handingOver = false;
  /** The fencing timer. */
  #fence?: ReturnType<typeof setTimeout>;
  /** As first standby: when the lease was first seen free. */
  #freeSince?: number;
  /** The holder seen in the last failed acquire or poll. */
  #lastHolder?: string;
  /** No acquire before this (after a failed assume). */
  #retryAt?: number;

  constructor(readonly addr: string, host: LeaseHost) {
    this.#h = host;
    host.metrics.owner.set({ address: addr }, 0);
  }

  get state(): AddressState {
    return this.#state;
  }
  /** The epoch of the lease held (or last held). */
  get epoch(): number {
    return this.#epoch;
  }
  /** assume() was called for the current epoch and forfeit() not yet. */
  get inUse(): boolean {
    return this.#inUse;
  }

  /** Until when (`performance.now()`) the address may be used; undefined: not owner. */
  get validUntil(): number | undefined {
    return this.#state === "owner" ? this.#validUntil : undefined;
  }

  /** Stops the timers (the coordinator stops); releases nothing. */
  halt(): void {
    clearTimeout(this.#fence);
    clearTimeout(this.#useTimer);
  }

  /** One decision with the address's current assignment `a` (every renew period, on changes). */
  async step(a: Assignment | undefined): Promise<void> {
    const h = this.#h;
    const now = performance.now();
    if (this.#state === "owner") {
      if (now >= this.#validUntil) return void this.#forfeit("lease not renewed in time");
      if (!this.#renewing) await this.#renew(a);
      return;
    }
    if (this.#busy || h.draining() || !a || now < (this.#retryAt ?? 0)) return;
    if (h.calls.mayAcquire?.() === false) return void (this.#freeSince = undefined);
    if (a.owner === h.calls.self) {
      this.#state = "acquiring";
      return await this.#acquire(a);
    }
    if (this.#state === "acquiring") this.#state = "standby";
    if (a.standbys[0] !== h.calls.self) {
      this.#freeSince = undefined;
      return;
    }
    // First standby: take a lease that stays free for a whole ttl (the owner lost Redis).
    this.#busy = true;
    try {
      if (await this.#freeForTtl()) await this.#acquire(a, "lease free", true);
    } catch {
      /* Redis away: nothing to decide */
    } finally {
      this.#busy = false;
    }
  }

  /** Forfeit first, then release: the lease is free only once the address is out of use. */
  async forfeitAndRelease(why: string): Promise<void> {
    const epoch = this.#epoch;
    await this.#forfeit(why);
    await this.#release(epoch);
  }

  /** Planned handover: flush, forfeit, release (renewals go on until the forfeit). */
  async handover(why: string): Promise<void> {
    if (this.#state !== "owner" || this.#handingOver) return;
    this.#handingOver = true;
    const epoch = this.#epoch;
    const { calls, log } = this.#h;
    try {
      if (calls.beforeHandover) {
        await withTimeout(calls.beforeHandover(this.addr), HANDOVER_FLUSH_TIMEOUT_MS, "flush")
          .catch((err) => log.warn("flush before handover failed", { address: this.addr, err }));
      }
      if (this.#state !== "owner" || this.#epoch !== epoch) return;
      await this.forfeitAndRelease(why);
    } finally {
      this.#handingOver = false;
    }
  }

  async #acquire(a: Assignment, reason?: string, nested = false): Promise<void> {
    const h = this.#h;
    if (!nested) this.#busy = true;
    const sentAt = performance.now();
    try {
      const acquiring = h.leases.acquire(this.addr, h.holderId, h.ttlMs, h.calls.self);
      const r = await this.#call("acquire", acquiring);
      if (!r.acquired) {
        this.#lastHolder = r.holder;
        return;
      }
      // Stopped, draining, or the assignment moved while the acquire was in flight (e.g. this
      // pod's BGP session went down): the lease goes back instead of the address being assumed.
      if (!h.running() || h.draining() || !h.named(this.addr, reason === "lease free")) {
        return void await h.leases.release(this.addr, h.holderId, r.epoch).catch(() => {});
      }
      // An answer too late to use: the next acquire (same holder) extends the lease and retries.
      if (performance.now() >= sentAt + h.ttlMs - h.marginMs) return;
      const why = reason ?? this.#takeoverReason(a);
      this.#becomeOwner(r.epoch, sentAt, why, r.fresh === true);
    } catch {
      /* Redis away: retry next tick */
    } finally {
      if (!nested) this.#busy = false;
    }
  }

  #becomeOwner(epoch: number, sentAt: number, reason: string, fresh: boolean): void {
    const h = this.#h;
    const address = this.addr;
    this.#state = "owner";
    this.#epoch = epoch;
    this.#validUntil = sentAt + h.ttlMs - h.marginMs;
    this.#armFence();
    const use = () => {
      this.#useTimer = undefined;
      if (this.#state !== "owner" || this.#epoch !== epoch || !h.running()) return;
      if (fresh && !h.named(address, reason === "lease free")) {
        return void this.forfeitAndRelease("no longer named after the wait");
      }
      this.#inUse = true;
      h.metrics.takeovers.inc({ reason });
      h.log.info("address assumed", { address, epoch, reason });
      // Renewals go on while assume runs (it may take a while: addresses, ARP); it starts once
      // an earlier forfeit of this address has finished (one writer per address).
      this.#serialOp(() => {
        h.metrics.owner.set({ address }, 1);
        h.metrics.epoch.set({ address }, epoch);
        return h.calls.assume(address, epoch);
      }).catch(async (err) => {
        h.log.error("assume failed", { address, epoch, err });
        if (this.#state !== "owner" || this.#epoch !== epoch) return;
        this.#retryAt = performance.now() + 1_000;
        await this.forfeitAndRelease(`assume failed: ${(err as Error).message}`);
      });
    };
    if (!fresh) return use();
    // Redis had no epoch counter: it may have lost a lease someone still uses. Wait it out.
    const wait_ms = h.ttlMs;
    h.log.info("lease store was empty: waiting", { address, epoch, wait_ms });
    this.#useTimer = setTimeout(use, h.ttlMs);
  }

  async #renew(a: Assignment | undefined): Promise<void> {
    const h = this.#h;
    this.#renewing = true;
    const epoch = this.#epoch;
    const sentAt = performance.now();
    try {
      const r = await this.#call("renew", h.leases.renew(this.addr, h.holderId, epoch, h.ttlMs));
      if (this.#state !== "owner" || this.#epoch !== epoch) return;
      if (!r.renewed) return void this.#forfeit("lease lost");
      this.#validUntil = Math.max(this.#validUntil, sentAt + h.ttlMs - h.marginMs);
      this.#armFence();
      const wanted = r.wantedBy;
      const self = h.calls.self;
      // A holder that is not ready itself (no BGP session: its announcement reaches no router)
      // hands over at once; otherwise membership must have been stable for the rebalance delay.
      const delay = h.calls.health.unready().includes(self) ? 0 : h.rebalanceDelayMs;
      if (
        wanted && wanted !== self && a?.owner === wanted && h.running() &&
        performance.now() - h.membershipChangedAt() >= delay
      ) {
        void this.handover(`rebalance to ${wanted}`);
      }
    } catch (err) {
      h.metrics.renewFailures.inc();
      if (this.#state === "owner" && this.#epoch === epoch) {
        h.log.warn("lease renew failed", {
          address: this.addr,
          epoch,
          valid_ms: Math.round(this.#validUntil - performance.now()),
          err,
        });
      }
    } finally {
      this.#renewing = false;
    }
  }

  #armFence(): void {
    clearTimeout(this.#fence);
    const epoch = this.#epoch;
    this.#fence = setTimeout(() => {
      this.#fence = undefined;
      if (this.#state !== "owner" || this.#epoch !== epoch) return;
      if (performance.now() >= this.#validUntil) {
        void this.#forfeit("lease not renewed in time");
      } else this.#armFence();
    }, Math.max(0, Math.ceil(this.#validUntil - performance.now())));
  }

  async #forfeit(why: string): Promise<void> {
    if (this.#state !== "owner") return;
    const { log, metrics, calls } = this.#h;
    const address = this.addr;
    this.#state = "forfeited";
    clearTimeout(this.#fence);
    clearTimeout(this.#useTimer);
    this.#fence = this.#useTimer = undefined;
    if (!this.#inUse) return; // the lease was dropped before its first use
    this.#inUse = false;
    const level = /^(draining|rebalance|stopping)/.test(why) ? "info" : "warn";
    log[level]("address forfeited", { address, epoch: this.#epoch, why });
    await this.#serialOp(() => {
      metrics.owner.set({ address }, 0);
      return calls.forfeit(address, why);
    }).catch((err) => log.error("forfeit failed", { address, err }));
  }

  async #release(epoch: number): Promise<void> {
    const { log, leases, holderId } = this.#h;
    const address = this.addr;
    try {
      const ok = await this.#call("release", leases.release(address, holderId, epoch));
      log.info("address released", { address, epoch, released: ok });
      if (ok && this.#state === "forfeited") this.#state = "released";
    } catch (err) {
      log.warn("address released", { address, epoch, released: false, err });
    }
  }

  /** A lease call bounded by the ttl (an answer later than that is of no use). */
  #call<T>(what: string, p: Promise<T>): Promise<T> {
    return withTimeout(p, this.#h.ttlMs, what);
  }

  /** As first standby: reads the lease; true once it has been seen free for a whole ttl. */
  async #freeForTtl(): Promise<boolean> {
    const lease = await this.#call("read", this.#h.leases.read(this.addr));
    const t = performance.now();
    if (lease) {
      this.#freeSince = undefined;
      this.#lastHolder = lease.holder;
      return false;
    }
    if (this.#freeSince === undefined) this.#freeSince = t;
    if (t - this.#freeSince < this.#h.ttlMs) return false;
    this.#freeSince = undefined;
    return true;
  }

  /** Why this pod is taking the address (the takeovers metric's label); clears lastHolder. */
  #takeoverReason(a: { readonly owner: string }): string {
    const { self, health } = this.#h.calls;
    const last = this.#lastHolder?.split("/")[0];
    this.#lastHolder = undefined;
    if (last === undefined || last === self) return "assigned";
    if (health.draining().includes(last)) return "handover";
    if (!health.live().includes(last)) return "owner down";
    return a.owner === self ? "rebalance" : "lease free";
  }

  /**
   * Runs `fn` (an assume or forfeit callback) after every earlier one of this address has
   * settled: one writer per address, a re-assume never overtakes the forfeit before it (issue 29).
   */
  #serialOp(fn: () => Promise<void>): Promise<void> {
    const run = this.#ops.then(fn);
    this.#ops = run.catch(() => {});
    return run;
  }
}

/** `p`, or a rejection after `ms` (the late result is dropped). */
function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Lease ${what} got no answer within ${ms} ms`)), ms);
  });
  p.catch(() => {}); // a late failure after the timeout is not unhandled
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
