/**
 * The set of LB IPs a flow agent follows (learns, restores, follows on the stream, touches and
 * expires), and the ones it stopped following, whose map entries idle out locally.
 *
 * @module
 */

import { parseIpv4 } from "../../lib/ipv4.ts";

/** Followed LB IPs by address, and retired ones with when they were retired. */
export class FollowedVips {
  readonly #byAddr = new Map<number, string>();
  /** LB IPs no longer followed → when (flow-table clock, ns). */
  readonly #retired = new Map<number, number>();

  constructor(vips: readonly string[]) {
    for (const vip of vips) this.#byAddr.set(parseIpv4(vip), vip);
  }

  /** The dotted LB IP of `addr` if followed. */
  vipOf(addr: number): string | undefined {
    return this.#byAddr.get(addr);
  }

  /** Followed LB IPs, dotted. */
  list(): string[] {
    return [...this.#byAddr.values()];
  }

  /** A snapshot: address → dotted. */
  snapshot(): Map<number, string> {
    return new Map(this.#byAddr);
  }

  /**
   * Compares with `vips`: which followed ones are not wanted, which wanted ones are new (neither
   * applied yet).
   */
  diff(vips: readonly string[]): { removed: Map<number, string>; added: Map<number, string> } {
    const want = new Map<number, string>();
    for (const vip of vips) want.set(parseIpv4(vip), vip);
    const removed = new Map<number, string>();
    for (const [addr, vip] of this.#byAddr) if (!want.has(addr)) removed.set(addr, vip);
    const added = new Map<number, string>();
    for (const [addr, vip] of want) if (!this.#byAddr.has(addr)) added.set(addr, vip);
    return { removed, added };
  }

  /** Follows `vip` (no longer retired). */
  add(addr: number, vip: string): void {
    this.#byAddr.set(addr, vip);
    this.#retired.delete(addr);
  }

  /** Stops following `addr`, retiring it at `nowNs`. */
  retire(addr: number, nowNs: number): void {
    this.#byAddr.delete(addr);
    this.#retired.set(addr, nowNs);
  }

  /** When `addr` was retired, if it is. */
  retiredSince(addr: number): number | undefined {
    return this.#retired.get(addr);
  }

  /** Forgets retired LB IPs older than `idleNs` with no live entry left (`live`). */
  pruneRetired(nowNs: number, idleNs: number, live: ReadonlySet<number>): void {
    for (const [addr, since] of [...this.#retired]) {
      if (!live.has(addr) && nowNs - since > idleNs) this.#retired.delete(addr);
    }
  }
}
