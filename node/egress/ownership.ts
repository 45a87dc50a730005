/**
 * Who holds each floating address of one EgressNAT, decided per address from the heartbeats
 * (`health.ts`), the assignment (`assign.ts`) and a Redis lease with a fencing epoch
 * (`lease.ts`). Per address: standby → acquiring → owner → forfeited | released → standby.
 *
 * - The assigned owner (over the live, non-draining pods) acquires the lease, then calls
 *   `assume(addr, epoch)`. Its first standby polls the lease every `renewMs` and acquires it only
 *   after seeing it free for a whole ttl (the owner lost Redis), or at once when the heartbeats
 *   say the owner is down, because then it is the assigned owner. No other pod ever acquires.
 * - Fencing: the holder renews every `renewMs` and may use the address only while
 *   `performance.now() < (time it SENT its last successful renew) + ttl − margin`; a timer calls
 *   `forfeit()` the moment that passes, whatever Redis does (unreachable, slow, or the lease
 *   taken). Redis expires the key `ttl` after it PROCESSED that renew, later than the send, so a
 *   new owner can acquire only after the old one has forfeited: the windows never overlap.
 * - Handover (planned): `drain()` announces draining in the heartbeats (the standbys recompute
 *   at once and start polling), then per owned address `beforeHandover` (conntrack sync flush),
 *   `forfeit`, lease release; the next poll of the new owner (≤ `renewMs`) takes it: zero resets,
 *   no detection delay. Forfeit comes before release, so the address is never held twice. The
 *   same handover moves an address to a pod that joined: its failed acquires leave a "want" that
 *   the holder's renew reads; it is honoured once membership has been stable for
 *   `rebalanceDelayMs` and only for the pod the assignment names (one that can reach Redis).
 * - A pod not ready (BGP mode: no session up) is left out of the assignment (`AssignmentCache`);
 *   one that holds addresses hands them over at once, without the rebalance delay. Defaults (heartbeats 100 ms × 3, ttl 250, renew 50, margin 50 ms): a dead owner's lease is free
 * ≤ 250 ms after its last renew, so the acquire at detection (≥ 200 ms) succeeds at once or at the
 * next poll: takeover ≤ ~300 ms + a Redis round trip + `assume`. A holder survives 3 lost renews;
 * an event-loop stall over ~200 ms forfeits (re-acquired if still assigned). One writer per
 * address: `assume` and `forfeit` of an address run one after the other (`serialOp`). Metrics and
 * log lines: `_ownership_parts.ts`.
 * @module
 */

import { log as rootLog, type Logger } from "../../lib/log.ts";
import { registry as rootRegistry } from "../../lib/metrics.ts";
import type { Assignment } from "./assign.ts";
import { type LeaseStore, RedisLeaseStore } from "../../controller/egress/lease.ts";
import { Ticker } from "./_health_ticker.ts";
import {
  type AddressState,
  AssignmentCache,
  type EgressOwnershipOptions,
  freeForTtl,
  HANDOVER_FLUSH_TIMEOUT_MS,
  newSlot,
  type OwnershipMetrics,
  ownershipMetrics,
  serialOp,
  type Slot,
  takeoverReason,
  withTimeout,
} from "./_ownership_parts.ts";

export type { AddressState, EgressOwnershipOptions } from "./_ownership_parts.ts";

/** Per-address ownership of one EgressNAT; see the module doc. */
export class EgressOwnership {
  readonly ttlMs: number;
  readonly renewMs: number;
  readonly marginMs: number;
  /** Lease holder id: pod name and a random id of this start (a restarted pod is a new holder). */
  readonly holderId: string;
  readonly #o: EgressOwnershipOptions;
  readonly #leases: LeaseStore;
  readonly #slots = new Map<string, Slot>();
  readonly #log: Logger;
  readonly #m: OwnershipMetrics;
  readonly #ticker: Ticker;
  readonly #rebalanceDelayMs: number;
  readonly #plan: AssignmentCache;
  #membershipChangedAt = performance.now();
  #running = false;
  #draining = false;
  #startTimer?: ReturnType<typeof setTimeout>;
  #stepQueued = false;

  constructor(o: EgressOwnershipOptions) {
    this.#o = o;
    this.ttlMs = o.ttlMs ?? 250;
    this.renewMs = o.renewMs ?? 50;
    this.marginMs = o.marginMs ?? 50;
    this.#rebalanceDelayMs = o.rebalanceDelayMs ?? 2_000;
    if (!(this.renewMs > 0 && this.marginMs >= 0 && this.ttlMs - this.marginMs > this.renewMs)) {
      throw new RangeError(
        `Cannot own addresses with ttl "${this.ttlMs}" ms, renew "${this.renewMs}" ms, margin "${this.marginMs}" ms: need ttl − margin > renew > 0`,
      );
    }
    if (o.leases) this.#leases = o.leases;
    else if (o.redis) this.#leases = new RedisLeaseStore(o.redis, o.name);
    else throw new TypeError(`Cannot own addresses of "${o.name}": pass redis or leases`);
    this.holderId = `${o.self}/${crypto.randomUUID().slice(0, 8)}`;
    for (const addr of new Set(o.addresses)) this.#slots.set(addr, newSlot(addr));
    this.#log = (o.log ?? rootLog).with({ component: "egress-ownership", egress: o.name });
    this.#m = ownershipMetrics(o.registry ?? rootRegistry);
    this.#plan = new AssignmentCache(this.#log);
    for (const addr of this.#slots.keys()) this.#m.owner.set({ address: addr }, 0);
    this.#ticker = new Ticker(this.renewMs, () => this.#stepAll());
    o.health.onChange(() => {
      this.#membershipChangedAt = performance.now();
      this.#queueStep();
    });
  }

  /** Starts deciding (after `startupDelayMs`, to hear the peers first). */
  start(): Promise<void> {
    if (this.#running) return Promise.resolve();
    this.#running = true;
    const delay = this.#o.startupDelayMs ?? this.#o.health.detectMs;
    const [holder, addresses] = [this.holderId, [...this.#slots.keys()]];
    const [ttl_ms, renew_ms, margin_ms] = [this.ttlMs, this.renewMs, this.marginMs];
    this.#log.info("ownership started", { holder, addresses, ttl_ms, renew_ms, margin_ms });
    this.#startTimer = setTimeout(() => this.#running && this.#ticker.start(), delay);
    return Promise.resolve();
  }

  /** Stops: forfeits, then releases every held address (`abandon`: neither, as a crash would). */
  async stop(options: { abandon?: boolean } = {}): Promise<void> {
    this.#running = false;
    clearTimeout(this.#startTimer);
    this.#ticker.stop();
    for (const slot of this.#slots.values()) [slot.fence, slot.useTimer].forEach(clearTimeout);
    if (options.abandon) return;
    const held = [...this.#slots.values()].filter((s) => s.state === "owner");
    await Promise.all(held.map((slot) => this.#forfeitAndRelease(slot, "stopping")));
  }

  /** Planned handover of every held address to its standby; this pod takes nothing after it. */
  async drain(): Promise<void> {
    this.#draining = true;
    this.#o.health.setDraining(true);
    const held = [...this.#slots.values()].filter((s) => s.state === "owner");
    this.#log.info("draining", { addresses: held.map((s) => s.addr) });
    await Promise.all(held.map((slot) => this.#handover(slot, "draining")));
  }

  /** Addresses held now → their epochs. */
  owned(): Map<string, number> {
    const out = new Map<string, number>();
    for (const s of this.#slots.values()) if (s.inUse) out.set(s.addr, s.epoch);
    return out;
  }

  /** Until when (`performance.now()`) `addr` may be used (its fence); undefined: not owned. */
  validUntil(addr: string): number | undefined {
    const slot = this.#slots.get(addr);
    return slot?.state === "owner" ? slot.validUntil : undefined;
  }

  /** Whether this pod uses exactly the addresses the assignment gives it (no rebalance due). */
  settled(): boolean {
    const assignment = this.#assignment();
    const self = this.#o.self;
    return [...this.#slots.values()].every((s) =>
      (assignment.get(s.addr)?.owner === self) === !!s.inUse
    );
  }

  /** State of each address here. */
  states(): Map<string, AddressState> {
    return new Map([...this.#slots.values()].map((s) => [s.addr, s.state]));
  }

  /** The pod that takes `addr` over if its owner goes (its first standby). */
  standbyFor(addr: string): string | undefined {
    return this.#assignment().get(addr)?.standbys[0];
  }

  /** The assignment over the live pods that are not draining (cached per membership). */
  #assignment(): Map<string, Assignment> {
    const { health, self } = this.#o;
    return this.#plan.get([...this.#slots.keys()], health, this.#draining ? self : undefined);
  }

  #queueStep(): void {
    if (this.#stepQueued || !this.#running) return;
    this.#stepQueued = true;
    queueMicrotask(() => {
      this.#stepQueued = false;
      if (this.#running && this.#ticker.lastTickAt > 0) this.#stepAll();
    });
  }

  #stepAll(): void {
    if (!this.#running) return;
    const assignment = this.#assignment();
    for (const slot of this.#slots.values()) {
      const a = assignment.get(slot.addr);
      this.#step(slot, a).catch((err) =>
        this.#log.error("ownership step failed", { address: slot.addr, err })
      );
    }
  }

  async #step(slot: Slot, a: Assignment | undefined): Promise<void> {
    const now = performance.now();
    if (slot.state === "owner") {
      if (now >= slot.validUntil) return void this.#forfeit(slot, "lease not renewed in time");
      if (!slot.renewing) await this.#renew(slot, a);
      return;
    }
    if (slot.busy || this.#draining || !a || now < (slot.retryAt ?? 0)) return;
    if (this.#o.mayAcquire?.() === false) return void (slot.freeSince = undefined);
    if (a.owner === this.#o.self) {
      slot.state = "acquiring";
      return await this.#acquire(slot, a);
    }
    if (slot.state === "acquiring") slot.state = "standby";
    if (a.standbys[0] !== this.#o.self) {
      slot.freeSince = undefined;
      return;
    }
    // First standby: take a lease that stays free for a whole ttl (the owner lost Redis).
    slot.busy = true;
    try {
      const read = () => this.#call("read", this.#leases.read(slot.addr));
      if (await freeForTtl(slot, read, this.ttlMs)) {
        await this.#acquire(slot, a, "lease free", true);
      }
    } catch {
      /* Redis away: nothing to decide */
    } finally {
      slot.busy = false;
    }
  }

  /** Whether the assignment now names this pod for `addr` (its owner, or its first standby). */
  #stillNamed(addr: string, asStandby: boolean): boolean {
    const now = this.#assignment().get(addr), self = this.#o.self;
    if (this.#o.mayAcquire?.() === false) return false;
    return now?.owner === self || (asStandby && now?.standbys[0] === self);
  }

  async #acquire(slot: Slot, a: Assignment, reason?: string, nested = false): Promise<void> {
    if (!nested) slot.busy = true;
    const sentAt = performance.now();
    try {
      const l = this.#leases;
      const r = await this.#call(
        "acquire",
        l.acquire(slot.addr, this.holderId, this.ttlMs, this.#o.self),
      );
      if (!r.acquired) {
        slot.lastHolder = r.holder;
        return;
      }
      if (!this.#running || this.#draining) {
        await this.#leases.release(slot.addr, this.holderId, r.epoch).catch(() => {});
        return;
      }
      // The assignment moved while the acquire was in flight (e.g. this pod's BGP session went
      // down): a pod no longer the one named gives the lease back instead of assuming it.
      if (!this.#stillNamed(slot.addr, reason === "lease free")) {
        return void await this.#leases.release(slot.addr, this.holderId, r.epoch).catch(() => {});
      }
      // An answer too late to use: the next acquire (same holder) extends the lease and retries.
      if (performance.now() >= sentAt + this.ttlMs - this.marginMs) return;
      const why = reason ?? takeoverReason(slot, this.#o.self, this.#o.health, a);
      this.#becomeOwner(slot, r.epoch, sentAt, why, r.fresh === true);
    } catch {
      /* Redis away: retry next tick */
    } finally {
      if (!nested) slot.busy = false;
    }
  }

  #becomeOwner(slot: Slot, epoch: number, sentAt: number, reason: string, fresh: boolean): void {
    slot.state = "owner";
    slot.epoch = epoch;
    slot.validUntil = sentAt + this.ttlMs - this.marginMs;
    this.#armFence(slot);
    const use = () => {
      slot.useTimer = undefined;
      if (slot.state !== "owner" || slot.epoch !== epoch || !this.#running) return;
      slot.inUse = true;
      this.#m.takeovers.inc({ reason });
      this.#log.info("address assumed", { address: slot.addr, epoch, reason });
      // Renewals go on while assume runs (it may take a while: addresses, ARP); it starts once
      // an earlier forfeit of this address has finished (one writer per address).
      serialOp(slot, () => {
        this.#m.owner.set({ address: slot.addr }, 1);
        this.#m.epoch.set({ address: slot.addr }, epoch);
        return this.#o.assume(slot.addr, epoch);
      }).catch(async (err) => {
        this.#log.error("assume failed", { address: slot.addr, epoch, err });
        if (slot.state !== "owner" || slot.epoch !== epoch) return;
        slot.retryAt = performance.now() + 1_000;
        await this.#forfeitAndRelease(slot, `assume failed: ${(err as Error).message}`);
      });
    };
    if (!fresh) return use();
    // Redis had no epoch counter: it may have lost a lease someone still uses. Wait it out.
    const wait_ms = this.ttlMs;
    this.#log.info("lease store was empty: waiting", { address: slot.addr, epoch, wait_ms });
    slot.useTimer = setTimeout(use, this.ttlMs);
  }

  async #renew(slot: Slot, a: Assignment | undefined): Promise<void> {
    slot.renewing = true;
    const epoch = slot.epoch;
    const sentAt = performance.now();
    try {
      const l = this.#leases;
      const r = await this.#call("renew", l.renew(slot.addr, this.holderId, epoch, this.ttlMs));
      if (slot.state !== "owner" || slot.epoch !== epoch) return;
      if (!r.renewed) return void this.#forfeit(slot, "lease lost");
      slot.validUntil = Math.max(slot.validUntil, sentAt + this.ttlMs - this.marginMs);
      this.#armFence(slot);
      const wanted = r.wantedBy;
      // A holder that is not ready itself (no BGP session: its announcement reaches no router)
      // hands over at once; otherwise membership must have been stable for the rebalance delay.
      const delay = this.#o.health.unready().includes(this.#o.self) ? 0 : this.#rebalanceDelayMs;
      if (
        wanted && wanted !== this.#o.self && a?.owner === wanted && this.#running &&
        performance.now() - this.#membershipChangedAt >= delay
      ) {
        void this.#handover(slot, `rebalance to ${wanted}`);
      }
    } catch (err) {
      this.#m.renewFailures.inc();
      if (slot.state === "owner" && slot.epoch === epoch) {
        this.#log.warn("lease renew failed", {
          address: slot.addr,
          epoch,
          valid_ms: Math.round(slot.validUntil - performance.now()),
          err,
        });
      }
    } finally {
      slot.renewing = false;
    }
  }

  #armFence(slot: Slot): void {
    clearTimeout(slot.fence);
    const epoch = slot.epoch;
    slot.fence = setTimeout(() => {
      slot.fence = undefined;
      if (slot.state !== "owner" || slot.epoch !== epoch) return;
      if (performance.now() >= slot.validUntil) {
        void this.#forfeit(slot, "lease not renewed in time");
      } else this.#armFence(slot);
    }, Math.max(0, Math.ceil(slot.validUntil - performance.now())));
  }

  async #forfeit(slot: Slot, why: string): Promise<void> {
    if (slot.state !== "owner") return;
    slot.state = "forfeited";
    clearTimeout(slot.fence);
    clearTimeout(slot.useTimer);
    slot.fence = slot.useTimer = undefined;
    if (!slot.inUse) return; // the lease was dropped before its first use
    slot.inUse = false;
    const level = /^(draining|rebalance|stopping)/.test(why) ? "info" : "warn";
    this.#log[level]("address forfeited", { address: slot.addr, epoch: slot.epoch, why });
    await serialOp(slot, () => {
      this.#m.owner.set({ address: slot.addr }, 0);
      return this.#o.forfeit(slot.addr, why);
    }).catch((err) => this.#log.error("forfeit failed", { address: slot.addr, err }));
  }

  /** A lease call bounded by the ttl (an answer later than that is of no use). */
  #call = <T>(what: string, p: Promise<T>): Promise<T> => withTimeout(p, this.ttlMs, what);

  /** Forfeit first, then release: the lease is free only once the address is out of use. */
  async #forfeitAndRelease(slot: Slot, why: string): Promise<void> {
    const epoch = slot.epoch;
    await this.#forfeit(slot, why);
    await this.#release(slot, epoch);
  }

  async #release(slot: Slot, epoch: number): Promise<void> {
    try {
      const ok = await this.#call("release", this.#leases.release(slot.addr, this.holderId, epoch));
      this.#log.info("address released", { address: slot.addr, epoch, released: ok });
      if (ok && slot.state === "forfeited") slot.state = "released";
    } catch (err) {
      this.#log.warn("address released", { address: slot.addr, epoch, released: false, err });
    }
  }

  /** Planned handover: flush, forfeit, release (renewals go on until the forfeit). */
  async #handover(slot: Slot, why: string): Promise<void> {
    if (slot.state !== "owner" || slot.handingOver) return;
    slot.handingOver = true;
    const epoch = slot.epoch;
    try {
      if (this.#o.beforeHandover) {
        await withTimeout(this.#o.beforeHandover(slot.addr), HANDOVER_FLUSH_TIMEOUT_MS, "flush")
          .catch((err) =>
            this.#log.warn("flush before handover failed", { address: slot.addr, err })
          );
      }
      if (slot.state !== "owner" || slot.epoch !== epoch) return;
      await this.#forfeitAndRelease(slot, why);
    } finally {
      slot.handingOver = false;
    }
  }
}
