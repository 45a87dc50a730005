/**
 * The set of LB IPs a flow agent follows (learns, restores, follows on the stream, touches and
 * expires), and the ones it stopped following, whose map entries idle out locally.
 *
 * @module
 */

import { formatFlowAddress } from "../../bpf/flow.ts";
import { flowAddress } from "./field.ts";

/**
 * An LB IP's address as flow keys carry it (`daddr`): a u32 for IPv4, RFC 5952 text for IPv6
 * (field.ts `flowAddress`).
 */
export type VipAddress = number | string;

/**
 * Followed LB IPs by address, and retired ones with when they were retired. An LB IP's text is
 * its canonical form (dotted IPv4, RFC 5952 IPv6): the Redis keys every node names it by.
 */
export class FollowedVips {
  readonly #byAddr = new Map<VipAddress, string>();
  /** LB IPs no longer followed → when (flow-table clock, ns). */
  readonly #retired = new Map<VipAddress, number>();

  constructor(vips: readonly string[]) {
    for (const vip of vips) {
      const addr = flowAddress(vip);
      this.#byAddr.set(addr, formatFlowAddress(addr));
    }
  }

  /** The LB IP (text) of `addr` if followed. */
  vipOf(addr: VipAddress): string | undefined {
    return this.#byAddr.get(addr);
  }

  /** Followed LB IPs, as text. */
  list(): string[] {
    return [...this.#byAddr.values()];
  }

  /** A snapshot: address → dotted. */
  snapshot(): Map<VipAddress, string> {
    return new Map(this.#byAddr);
  }

  /**
   * Compares with `vips`: which followed ones are not wanted, which wanted ones are new (neither
   * applied yet).
   */
  diff(
    vips: readonly string[],
  ): { removed: Map<VipAddress, string>; added: Map<VipAddress, string> } {
    const want = new Map<VipAddress, string>();
    for (const vip of vips) {
      const addr = flowAddress(vip);
      want.set(addr, formatFlowAddress(addr));
    }
    const removed = new Map<VipAddress, string>();
    for (const [addr, vip] of this.#byAddr) if (!want.has(addr)) removed.set(addr, vip);
    const added = new Map<VipAddress, string>();
    for (const [addr, vip] of want) if (!this.#byAddr.has(addr)) added.set(addr, vip);
    return { removed, added };
  }

  /** Follows `vip` (no longer retired). */
  add(addr: VipAddress, vip: string): void {
    this.#byAddr.set(addr, vip);
    this.#retired.delete(addr);
  }

  /** Stops following `addr`, retiring it at `nowNs`. */
  retire(addr: VipAddress, nowNs: number): void {
    this.#byAddr.delete(addr);
    this.#retired.set(addr, nowNs);
  }

  /** When `addr` was retired, if it is. */
  retiredSince(addr: VipAddress): number | undefined {
    return this.#retired.get(addr);
  }

  /** Forgets retired LB IPs older than `idleNs` with no live entry left (`live`). */
  pruneRetired(nowNs: number, idleNs: number, live: ReadonlySet<VipAddress>): void {
    for (const [addr, since] of [...this.#retired]) {
      if (!live.has(addr) && nowNs - since > idleNs) this.#retired.delete(addr);
    }
  }
}
