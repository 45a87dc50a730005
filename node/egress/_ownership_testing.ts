/**
 * Test helpers for the ownership (unit and partition tests): an in-memory {@link HealthView},
 * a lease store that can be cut off for one pod, and a recorder of who used which address when,
 * which finds any moment with two users.
 *
 * @module
 */

import type { HealthView } from "./health.ts";
import type {
  AcquireResult,
  LeaseState,
  LeaseStore,
  RenewResult,
} from "../../controller/egress/lease.ts";

/** A {@link HealthView} whose peers the test sets. */
export class FakeHealth implements HealthView {
  readonly #live = new Set<string>();
  readonly #draining = new Set<string>();
  readonly #unready = new Set<string>();
  readonly #callbacks: ((peer: string, up: boolean) => void)[] = [];

  constructor(readonly self: string, peers: readonly string[], readonly detectMs = 30) {
    this.#live.add(self);
    for (const p of peers) this.#live.add(p);
  }

  live(): string[] {
    return [...this.#live].sort();
  }

  draining(): string[] {
    return [...this.#draining].filter((p) => this.#live.has(p)).sort();
  }

  unready(): string[] {
    return [...this.#unready].filter((p) => this.#live.has(p)).sort();
  }

  onChange(cb: (peer: string, up: boolean) => void): void {
    this.#callbacks.push(cb);
  }

  setReady(r: boolean): void {
    this.setPeerReady(this.self, r);
  }

  /** Marks `peer` (or self) ready or not, as its heartbeats would. */
  setPeerReady(peer: string, r: boolean): void {
    if (r === !this.#unready.has(peer)) return;
    if (r) this.#unready.delete(peer);
    else this.#unready.add(peer);
    for (const cb of this.#callbacks) cb(peer, true);
  }

  setDraining(d: boolean): void {
    if (d) this.#draining.add(this.self);
    else this.#draining.delete(this.self);
  }

  /** Marks `peer` up or down, as heartbeats would. */
  set(peer: string, up: boolean): void {
    if (up) this.#live.add(peer);
    else this.#live.delete(peer);
    for (const cb of this.#callbacks) cb(peer, up);
  }

  /** Marks `peer` draining, as its heartbeats would. */
  setPeerDraining(peer: string, d: boolean): void {
    if (d) this.#draining.add(peer);
    else this.#draining.delete(peer);
    for (const cb of this.#callbacks) cb(peer, true);
  }
}

/**
 * A {@link LeaseStore} that forwards to a shared one until cut (then every call fails); counts
 * the acquires and renews that got an answer (a test waits for some instead of for a time).
 */
export class CuttableLeases implements LeaseStore {
  cut = false;
  /** Acquires answered (taken or refused). */
  acquires = 0;
  /** Renews that extended the lease. */
  renewals = 0;

  constructor(readonly inner: LeaseStore) {}

  #gate(): Promise<void> {
    return this.cut ? Promise.reject(new Error("lease store cut off")) : Promise.resolve();
  }

  acquire(addr: string, holder: string, ttlMs: number, wanter?: string): Promise<AcquireResult> {
    return this.#gate().then(() => this.inner.acquire(addr, holder, ttlMs, wanter)).then((r) => {
      this.acquires++;
      return r;
    });
  }

  renew(addr: string, holder: string, epoch: number, ttlMs: number): Promise<RenewResult> {
    return this.#gate().then(() => this.inner.renew(addr, holder, epoch, ttlMs)).then((r) => {
      if (r.renewed) this.renewals++;
      return r;
    });
  }

  release(addr: string, holder: string, epoch: number): Promise<boolean> {
    return this.#gate().then(() => this.inner.release(addr, holder, epoch));
  }

  read(addr: string): Promise<LeaseState | null> {
    return this.#gate().then(() => this.inner.read(addr));
  }
}

/** One use of an address: from assume to forfeit (or the pod's death). */
export interface Interval {
  readonly pod: string;
  readonly addr: string;
  readonly epoch: number;
  readonly from: number;
  to: number;
  why?: string;
}

/** Records assume/forfeit calls with `performance.now()`; finds overlaps. */
export class OwnershipRecorder {
  readonly intervals: Interval[] = [];
  readonly events: string[] = [];

  /** The `assume`/`forfeit` callbacks of pod `pod`. */
  callbacks(pod: string): {
    assume: (addr: string, epoch: number) => Promise<void>;
    forfeit: (addr: string, why: string) => Promise<void>;
  } {
    return {
      assume: (addr, epoch) => {
        this.intervals.push({ pod, addr, epoch, from: performance.now(), to: Infinity });
        this.events.push(`${pod} assumed ${addr} epoch ${epoch}`);
        return Promise.resolve();
      },
      forfeit: (addr, why) => {
        this.end(pod, addr, why);
        return Promise.resolve();
      },
    };
  }

  /** Ends `pod`'s open use of `addr` now (a forfeit, or its death). */
  end(pod: string, addr: string, why: string): void {
    const open = this.intervals.find((i) => i.pod === pod && i.addr === addr && i.to === Infinity);
    if (open) {
      open.to = performance.now();
      open.why = why;
    }
    this.events.push(`${pod} forfeited ${addr}: ${why}`);
  }

  /** Pods using `addr` now. */
  holders(addr: string): string[] {
    return this.intervals.filter((i) => i.addr === addr && i.to === Infinity).map((i) => i.pod);
  }

  /** Pairs of uses of one address that overlap in time (should be none). */
  overlaps(): [Interval, Interval][] {
    const out: [Interval, Interval][] = [];
    for (const [k, a] of this.intervals.entries()) {
      for (const b of this.intervals.slice(k + 1)) {
        if (a.addr === b.addr && a.from < b.to && b.from < a.to) out.push([a, b]);
      }
    }
    return out;
  }

  /** The latest use of `addr` by anyone. */
  last(addr: string): Interval | undefined {
    return this.intervals.filter((i) => i.addr === addr).at(-1);
  }
}

/**
 * Waits until `cond()` holds, polling every 5 ms, or throws after `timeoutMs` (default 10 s: a
 * deadline far above the time the condition takes on an idle machine, so load cannot decide).
 */
export async function waitFor(
  what: string,
  cond: () => boolean,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
