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
 *   one that holds addresses hands them over at once, without the rebalance delay.
 *
 * Defaults (heartbeats 100 ms × 3, ttl 250, renew 50, margin 50 ms): a dead owner's lease is free
 * ≤ 250 ms after its last renew, so the acquire at detection (≥ 200 ms) succeeds at once or at the
 * next poll: takeover ≤ ~300 ms + a Redis round trip + `assume`. A holder survives 3 lost renews;
 * an event-loop stall over ~200 ms forfeits (re-acquired if still assigned). One writer per
 * address: `assume` and `forfeit` of an address run one after the other.
 *
 * Jobs: this coordinator makes the assignment from the heartbeats (leaving out pods not ready,
 * {@link AssignmentCache}) and steps one {@link AddressLease} (`address_lease.ts`: the lease, the
 * fence, the forfeit, metrics and log lines) per address every `renewMs` and on membership changes.
 *
 * @module
 */

import { log as rootLog, type Logger } from "../../lib/log.ts";
import { type Registry, registry as rootRegistry } from "../../lib/metrics.ts";
import type { RedisConnection } from "../../lib/redis_connection.ts";
import { assignAddresses, type Assignment } from "./assign.ts";
import type { HealthView } from "./health.ts";
import { type LeaseStore, RedisLeaseStore } from "../../controller/egress/lease.ts";
import { Ticker } from "./_health_ticker.ts";
import {
  AddressLease,
  type AddressState,
  type LeaseCallbacks,
  type LeaseHost,
} from "./address_lease.ts";
import { ownershipMetrics } from "./_ownership_metrics.ts";

export type { AddressState } from "./address_lease.ts";

/** Options of {@link EgressOwnership} (and the callbacks of `LeaseCallbacks`). */
export interface EgressOwnershipOptions extends LeaseCallbacks {
  /** The EgressNAT, `namespace/name` (the lease keys' hash tag). */
  readonly name: string;
  /** Its floating addresses. */
  readonly addresses: readonly string[];
  /** Redis for the leases (`lib/redis_connection.ts`); or pass `leases`. */
  readonly redis?: RedisConnection;
  /** The lease store (default a {@link RedisLeaseStore} on `redis`); unit tests pass a stand-in. */
  readonly leases?: LeaseStore;
  /** Lease time to live, ms (default 250). */
  readonly ttlMs?: number;
  /** Renew (and standby poll) period, ms (default 50). */
  readonly renewMs?: number;
  /** Safety margin of the fencing window, ms (default 50). */
  readonly marginMs?: number;
  /** Stable membership needed before an address moves to a pod that asks for it (default 2000). */
  readonly rebalanceDelayMs?: number;
  /** Wait before the first acquire, to hear the peers first (default health.detectMs). */
  readonly startupDelayMs?: number;
  /** Logger (default the process logger). */
  readonly log?: Logger;
  /** Metrics registry (default the process registry). */
  readonly registry?: Registry;
}

/** Per-address ownership of one EgressNAT; see the module doc. */
export class EgressOwnership {
  readonly ttlMs: number;
  readonly renewMs: number;
  readonly marginMs: number;
  /** Lease holder id: pod name and a random id of this start (a restarted pod is a new holder). */
  readonly holderId: string;
  readonly #o: EgressOwnershipOptions;
  readonly #lease = new Map<string, AddressLease>();
  readonly #log: Logger;
  readonly #ticker: Ticker;
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
    if (!(this.renewMs > 0 && this.marginMs >= 0 && this.ttlMs - this.marginMs > this.renewMs)) {
      throw new RangeError(
        `Cannot own addresses with ttl "${this.ttlMs}" ms, renew "${this.renewMs}" ms, margin "${this.marginMs}" ms: need ttl − margin > renew > 0`,
      );
    }
    let leases: LeaseStore;
    if (o.leases) leases = o.leases;
    else if (o.redis) leases = new RedisLeaseStore(o.redis, o.name);
    else throw new TypeError(`Cannot own addresses of "${o.name}": pass redis or leases`);
    this.holderId = `${o.self}/${crypto.randomUUID().slice(0, 8)}`;
    this.#log = (o.log ?? rootLog).with({ component: "egress-ownership", egress: o.name });
    const host: LeaseHost = {
      calls: o,
      leases,
      holderId: this.holderId,
      ttlMs: this.ttlMs,
      marginMs: this.marginMs,
      rebalanceDelayMs: o.rebalanceDelayMs ?? 2_000,
      log: this.#log,
      metrics: ownershipMetrics(o.registry ?? rootRegistry),
      running: () => this.#running,
      draining: () => this.#draining,
      membershipChangedAt: () => this.#membershipChangedAt,
      named: (addr, asStandby) => {
        if (o.mayAcquire?.() === false) return false;
        const a = this.#assignment().get(addr);
        return a?.owner === o.self || (asStandby && a?.standbys[0] === o.self);
      },
    };
    for (const addr of new Set(o.addresses)) this.#lease.set(addr, new AddressLease(addr, host));
    this.#plan = new AssignmentCache(this.#log);
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
    const [ttl_ms, renew_ms, margin_ms] = [this.ttlMs, this.renewMs, this.marginMs];
    const addresses = [...this.#lease.keys()];
    this.#log.info("ownership started", {
      holder: this.holderId,
      addresses,
      ttl_ms,
      renew_ms,
      margin_ms,
    });
    this.#startTimer = setTimeout(() => this.#running && this.#ticker.start(), delay);
    return Promise.resolve();
  }

  /**
   * Stops: forfeits every held address, then releases its lease so a standby takes it at once.
   * With `abandon`, stops without either, as a crash would (tests).
   */
  async stop(options: { abandon?: boolean } = {}): Promise<void> {
    this.#running = false;
    clearTimeout(this.#startTimer);
    this.#ticker.stop();
    for (const lease of this.#lease.values()) lease.halt();
    if (options.abandon) return;
    const held = this.#held();
    await Promise.all(held.map((lease) => lease.forfeitAndRelease("stopping")));
  }

  /** Planned handover of every held address to its standby; this pod takes nothing after it. */
  async drain(): Promise<void> {
    this.#draining = true;
    this.#o.health.setDraining(true);
    const held = this.#held();
    this.#log.info("draining", { addresses: held.map((l) => l.addr) });
    await Promise.all(held.map((lease) => lease.handover("draining")));
  }

  /** Addresses held now → their epochs. */
  owned(): Map<string, number> {
    const out = new Map<string, number>();
    for (const l of this.#lease.values()) if (l.inUse) out.set(l.addr, l.epoch);
    return out;
  }

  /** Until when (`performance.now()`) `addr` may be used (its fence); undefined: not owned. */
  validUntil(addr: string): number | undefined {
    return this.#lease.get(addr)?.validUntil;
  }

  /** Whether this pod uses exactly the addresses the assignment gives it (no rebalance due). */
  settled(): boolean {
    const assignment = this.#assignment();
    const self = this.#o.self;
    return [...this.#lease.values()].every((l) =>
      (assignment.get(l.addr)?.owner === self) === l.inUse
    );
  }

  /** State of each address here. */
  states(): Map<string, AddressState> {
    return new Map([...this.#lease.values()].map((l) => [l.addr, l.state]));
  }

  /** The pod that takes `addr` over if its owner goes (its first standby). */
  standbyFor(addr: string): string | undefined {
    return this.#assignment().get(addr)?.standbys[0];
  }

  /** The leases whose address this pod owns now. */
  #held(): AddressLease[] {
    return [...this.#lease.values()].filter((l) => l.state === "owner");
  }

  /** The assignment over the live pods that are not draining (cached per membership). */
  #assignment(): Map<string, Assignment> {
    const { health, self } = this.#o;
    return this.#plan.get([...this.#lease.keys()], health, this.#draining ? self : undefined);
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
    for (const lease of this.#lease.values()) {
      lease.step(assignment.get(lease.addr)).catch((err) =>
        this.#log.error("ownership step failed", { address: lease.addr, err })
      );
    }
  }
}

/**
 * The assignment over the live pods that are not draining, recomputed when they change. Pods that
 * say they are not ready (BGP mode: no session established, `HealthView.unready`) are left out
 * while at least one other pod is ready: they are neither owner nor standby of anything, so no
 * address is handed to a pod whose announcement would reach no router. When no pod is ready (the
 * routers are away for everyone), every live pod counts, as before.
 */
export class AssignmentCache {
  #key = "";
  #assignment: Map<string, Assignment> | null = null;

  #leftOut = 0;

  /** `log` gets a line each time pods are left out, or no longer are. */
  constructor(readonly log?: Logger) {}

  /** The assignment of `addresses` over `health`'s live, non-draining pods (and not `leaving`). */
  get(addresses: string[], health: HealthView, leaving?: string): Map<string, Assignment> {
    const { pods, unready } = candidates(health, leaving);
    const key = `${pods.join(",")}/${unready.join(",")}`;
    if (!this.#assignment || this.#key !== key) {
      this.#key = key;
      this.#assignment = assignAddresses(addresses, pods);
      if (unready.length > 0 || this.#leftOut > 0) {
        this.log?.info("assignment leaves out pods not ready", { pods, unready });
      }
      this.#leftOut = unready.length;
    }
    return this.#assignment;
  }
}

/**
 * The pods an assignment is made over (live, not draining, not `leaving`, ready unless none is)
 * and the live ones left out because they are not ready.
 */
export function candidates(
  health: HealthView,
  leaving?: string,
): { pods: string[]; unready: string[] } {
  const draining = new Set(health.draining());
  if (leaving !== undefined) draining.add(leaving);
  const pods = health.live().filter((p) => !draining.has(p));
  const notReady = new Set(health.unready());
  const ready = pods.filter((p) => !notReady.has(p));
  if (ready.length === 0) return { pods, unready: [] };
  return { pods: ready, unready: pods.filter((p) => notReady.has(p)) };
}
