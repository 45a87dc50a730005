/**
 * Parts of `ownership.ts`: its options, metrics, per-address record and a timeout helper for
 * its lease calls.
 *
 * @module
 */

import type { RedisConnection } from "../../lib/redis_connection.ts";
import type { Logger } from "../../lib/log.ts";
import type { Counter, Gauge, Registry } from "../../lib/metrics.ts";
import type { HealthView } from "./health.ts";
import type { LeaseState, LeaseStore } from "../../controller/egress/lease.ts";
import { assignAddresses, type Assignment } from "./assign.ts";

/** Options of {@link EgressOwnership}. */
export interface EgressOwnershipOptions {
  /** This pod's name (as in the heartbeats). */
  readonly self: string;
  /** The EgressNAT, `namespace/name` (the lease keys' hash tag). */
  readonly name: string;
  /** Its floating addresses. */
  readonly addresses: readonly string[];
  /** Which pods are up and draining. */
  readonly health: HealthView;
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
  /** Logger (default the process logger). */
  readonly log?: Logger;
  /** Metrics registry (default the process registry). */
  readonly registry?: Registry;
}

/** Bound on `beforeHandover` (a flush must not hold an address hostage). */
export const HANDOVER_FLUSH_TIMEOUT_MS = 2_000;

/** The metrics of the ownership. */
export interface OwnershipMetrics {
  readonly owner: Gauge;
  readonly epoch: Gauge;
  readonly takeovers: Counter;
  readonly renewFailures: Counter;
}

/**
 * Registers (or finds) the ownership's metrics in `reg`: `holdfast_egress_owner{address}` (1/0,
 * set when the assume or forfeit callback starts), `holdfast_egress_epoch{address}`,
 * `holdfast_egress_takeovers_total{reason}`, `holdfast_egress_lease_renew_failures_total`. The
 * ownership logs one line per decision: "address assumed" (epoch, reason), "address forfeited"
 * (why), "address released".
 */
export function ownershipMetrics(reg: Registry): OwnershipMetrics {
  return {
    owner: reg.gauge("holdfast_egress_owner", "1 while this pod holds the address.", {
      labelNames: ["address"],
    }),
    epoch: reg.gauge("holdfast_egress_epoch", "Fencing epoch of the address's lease here.", {
      labelNames: ["address"],
    }),
    takeovers: reg.counter("holdfast_egress_takeovers_total", "Addresses assumed, by reason.", {
      labelNames: ["reason"],
    }),
    renewFailures: reg.counter(
      "holdfast_egress_lease_renew_failures_total",
      "Lease renewals that got no answer (Redis unreachable or slow).",
    ),
  };
}

/** Where this pod stands with one address. */
export type AddressState = "standby" | "acquiring" | "owner" | "forfeited" | "released";

/** Mutable per-address state of the ownership. */
export interface Slot {
  readonly addr: string;
  state: AddressState;
  /** Epoch of the lease while owner (or of the last one held). */
  epoch: number;
  /** performance.now() past which the address must not be used (fencing). */
  validUntil: number;
  /** assume() was called for the current epoch (and forfeit() not yet). */
  inUse?: boolean;
  /** Delays the first use after a fresh lease store. */
  useTimer?: ReturnType<typeof setTimeout>;
  /** The latest assume/forfeit callback (the next one runs after it: one writer per address). */
  ops: Promise<void>;
  /** A renew is in flight. */
  renewing: boolean;
  /** An acquire or standby poll is in flight. */
  busy?: boolean;
  /** A planned handover is under way. */
  handingOver?: boolean;
  /** The fencing timer. */
  fence?: ReturnType<typeof setTimeout>;
  /** As first standby: when the lease was first seen free. */
  freeSince?: number;
  /** The holder seen in the last failed acquire or poll. */
  lastHolder?: string;
  /** No acquire before this (after a failed assume). */
  retryAt?: number;
}

/** A standby slot for `addr`. */
export function newSlot(addr: string): Slot {
  return {
    addr,
    state: "standby",
    epoch: 0,
    validUntil: 0,
    renewing: false,
    ops: Promise.resolve(),
  };
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

/** Why this pod is taking `slot`'s address (the takeovers metric's label); clears lastHolder. */
export function takeoverReason(
  slot: Slot,
  self: string,
  health: HealthView,
  a: { readonly owner: string },
): string {
  const last = slot.lastHolder?.split("/")[0];
  slot.lastHolder = undefined;
  if (last === undefined || last === self) return "assigned";
  if (health.draining().includes(last)) return "handover";
  if (!health.live().includes(last)) return "owner down";
  return a.owner === self ? "rebalance" : "lease free";
}

/** As first standby: reads the lease; true once it has been seen free for a whole `ttlMs`. */
export async function freeForTtl(
  slot: Slot,
  read: () => Promise<LeaseState | null>,
  ttlMs: number,
): Promise<boolean> {
  const lease = await read();
  const t = performance.now();
  if (lease) {
    slot.freeSince = undefined;
    slot.lastHolder = lease.holder;
    return false;
  }
  if (slot.freeSince === undefined) slot.freeSince = t;
  if (t - slot.freeSince < ttlMs) return false;
  slot.freeSince = undefined;
  return true;
}

/**
 * Runs `fn` (an assume or forfeit callback) after every earlier one of `slot`'s address has
 * settled: one writer per address, a re-assume never overtakes the forfeit before it (issue 29).
 */
export function serialOp(slot: Slot, fn: () => Promise<void>): Promise<void> {
  const run = slot.ops.then(fn);
  slot.ops = run.catch(() => {});
  return run;
}

/** `p`, or a rejection after `ms` (the late result is dropped). */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Lease ${what} got no answer within ${ms} ms`)), ms);
  });
  p.catch(() => {}); // a late failure after the timeout is not unhandled
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
