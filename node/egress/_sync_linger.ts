/**
 * Addresses a NAT pod handed over in a planned handover but whose conntrack events the sync
 * sender still streams for a while (issue 29). Until every neighbour has followed the new owner's
 * gratuitous ARP (20–60 ms measured), connections are still opened through the old pod; their
 * entries exist only there, and without this the new owner dropped their next packets (INVALID)
 * and they stalled after the first exchange. Events only, never a resync (the new owner's dump
 * is the truth for the address), never a destroy, and only a change of a flow's state. Meanwhile this pod's
 * receiver does not inject what the new owner streams for the address (`SyncReceiverOptions.skip`):
 * the injection would make events here that went back to the new owner with a stale state (a
 * first try without this lost 33 of 386 new connections in the lab's rolling restart).
 *
 * @module
 */

import type { CtEntry, CtEventType } from "../conntrack/mod.ts";

/**
 * How long a pod keeps streaming the events of an address it handed over: neighbours follow the
 * new owner's gratuitous ARP 20–60 ms after it assumed, which is ≤ ~100 ms after the release; a
 * second leaves room for a loaded machine.
 */
export const HANDOVER_LINGER_MS = 1_000;

/** Whether a forfeit with this reason (ownership.ts) is a planned handover. */
export function plannedHandover(why: string): boolean {
  return /^(draining|rebalance)/.test(why);
}

/** Flows remembered per linger (a bound: a second of new connections is far below it). */
const MAX_FLOWS = 65_536;

/** The lingering addresses and the last state sent of each of their flows. */
export class SyncLinger {
  readonly #until = new Map<number, number>();
  readonly #sent = new Map<string, number>();
  #set: Set<number> | null = null;

  /** Streams `addr`'s events for `ms` more (Date.now clock). */
  keep(addr: number, ms: number, now = Date.now()): void {
    this.#until.set(addr, Math.max(this.#until.get(addr) ?? 0, now + ms));
    this.#set = null;
  }

  /** Stops lingering on `addr` (owned again). True when it was lingering. */
  drop(addr: number): boolean {
    const had = this.#until.delete(addr);
    this.#set = null;
    if (this.#until.size === 0) this.#sent.clear();
    return had;
  }

  /** Ends the lingers past their time; true when any ended. */
  expire(now = Date.now()): boolean {
    let ended = false;
    for (const [addr, until] of this.#until) if (now >= until) ended = this.drop(addr) || ended;
    return ended;
  }

  /** The lingering addresses. */
  addresses(): number[] {
    return [...this.#until.keys()];
  }

  /** The lingering addresses as a set (the same object until they change). */
  addressSet(): ReadonlySet<number> {
    return (this.#set ??= new Set(this.#until.keys()));
  }

  /** Whether nothing lingers. */
  get empty(): boolean {
    return this.#until.size === 0;
  }

  /** Whether to stream this event of a lingering address (a change of the flow's state). */
  forward(type: CtEventType, entry: CtEntry): boolean {
    // Never a destroy: one here (a timeout of a flow that moved on) would end it at the new owner.
    if (type === "destroy" || !entry.natSrc || !this.#until.has(entry.natSrc.addr)) return false;
    const o = entry.orig;
    const key = `${o.src}:${o.sport}:${o.dst}:${o.dport}:${o.proto}`;
    const state = entry.tcpState ?? 0;
    if (this.#sent.get(key) === state) return false;
    if (this.#sent.size < MAX_FLOWS || this.#sent.has(key)) this.#sent.set(key, state);
    return true;
  }
}
