/**
 * One allocation pass over every claimed Service: who gets which addresses, in a fixed order
 * so the same input always gives the same answer.
 *
 * 1. Keep: Services holding addresses (this allocator's memory first, then what their status
 *    shows), oldest first (creationTimestamp, then namespace/name), keep them while still valid.
 *    A status address another Service already holds is a double claim: the later one fails.
 * 2. Requests: addresses asked for by annotation or `spec.loadBalancerIP`.
 * 3. The rest: an address of their sharing group, else the lowest free address of the first
 *    eligible pool by name.
 *
 * @module
 */

import { formatIpv4, isIpv4, parseIpv4 } from "../../lib/ipv4.ts";
import { isBuggyIp, type Pool, poolContains } from "./pool.ts";
import {
  ADDRESS_POOL_ANNOTATION,
  ALLOW_SHARED_IP_ANNOTATION,
  type ServiceIntent,
} from "./service.ts";

/** Service condition reasons. */
export type AllocationReason =
  | "Allocated"
  | "PoolExhausted"
  | "RequestedAddressUnavailable"
  | "NoMatchingPool"
  | "SharingConflict";

/** What a pass decided for one Service. */
export interface Outcome {
  /** Addresses held, ascending (empty on failure). */
  readonly addresses: readonly number[];
  /** The pool each address counts against (same order). */
  readonly pools: readonly string[];
  readonly reason: AllocationReason;
  /** Why it failed (empty when Allocated). */
  readonly message: string;
  /** It failed because another Service holds an address its status shows (a double claim). */
  readonly refusedStatus?: boolean;
}

interface Problem {
  readonly kind: "held" | "ports";
  readonly message: string;
}

type Verdict = Outcome | "skip";

const MAX_POOLS_LISTED = 5;

function commonPort(a: readonly string[], b: readonly string[]): string | undefined {
  for (const p of a) if (b.includes(p)) return p;
  return undefined;
}

function sameSet(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

function failed(reason: AllocationReason, message: string): Outcome {
  return { addresses: [], pools: [], reason, message };
}

/** A single pass; construct, {@linkcode run}, read {@linkcode outcomes}. */
export class AssignPass {
  /** Outcome per Service key. */
  readonly outcomes: Map<string, Outcome> = new Map();
  /** Holders per address (several only when shared). */
  readonly held: Map<number, ServiceIntent[]> = new Map();
  readonly #groups = new Map<string, Set<number>>();
  readonly #cursors = new Map<string, { range: number; ip: number }>();

  constructor(readonly pools: readonly Pool[]) {}

  /**
   * Runs the three phases. `services` must be sorted oldest first; `memory` maps a key to the
   * addresses this allocator gave it before; `refused` holds the keys whose status claim lost
   * last time (their status is still the claim, until the controller clears it).
   */
  run(
    services: readonly ServiceIntent[],
    memory: ReadonlyMap<string, readonly number[]>,
    refused: ReadonlySet<string> = new Set(),
  ): void {
    for (const svc of services) {
      const mine = memory.get(svc.key);
      if (mine !== undefined && mine.length > 0) this.#settle(svc, this.#keep(svc, mine, false));
    }
    for (const svc of services) {
      // Status is the cluster's word only for Services this allocator has not decided on yet.
      if (this.outcomes.has(svc.key) || (memory.has(svc.key) && !refused.has(svc.key))) continue;
      if (svc.statusIps.length > 0) this.#settle(svc, this.#keep(svc, svc.statusIps, true));
    }
    for (const svc of services) {
      if (this.outcomes.has(svc.key)) continue;
      if (svc.requested.length > 0 || svc.requestProblem) this.#settle(svc, this.#request(svc));
    }
    for (const svc of services) {
      if (!this.outcomes.has(svc.key)) this.#settle(svc, this.#dynamic(svc));
    }
  }

  #settle(svc: ServiceIntent, v: Verdict): void {
    if (v === "skip") return;
    this.outcomes.set(svc.key, v);
    for (const ip of v.addresses) {
      const holders = this.held.get(ip);
      if (holders) holders.push(svc);
      else this.held.set(ip, [svc]);
      if (svc.sharingKey !== undefined) {
        const g = `${svc.namespace}\0${svc.sharingKey}`;
        let set = this.#groups.get(g);
        if (!set) this.#groups.set(g, set = new Set());
        set.add(ip);
      }
    }
  }

  /** Why `svc` cannot hold `ip` beside its current holders (undefined: it can). */
  #shareProblem(ip: number, svc: ServiceIntent): Problem | undefined {
    const holders = this.held.get(ip);
    if (holders === undefined) return undefined;
    const text = formatIpv4(ip);
    for (const h of holders) {
      if (
        svc.sharingKey === undefined || h.sharingKey !== svc.sharingKey ||
        h.namespace !== svc.namespace
      ) {
        const hint = h.namespace !== svc.namespace
          ? "Services in different namespaces never share an address"
          : `to share it, give both Services the same ${ALLOW_SHARED_IP_ANNOTATION} annotation`;
        return { kind: "held", message: `address ${text} is held by service "${h.key}" (${hint})` };
      }
      const port = commonPort(svc.ports, h.ports);
      if (port !== undefined) {
        return {
          kind: "ports",
          message:
            `address ${text} is shared under key "${svc.sharingKey}" with service "${h.key}", which also uses port ${port}`,
        };
      }
    }
    return undefined;
  }

  /** The pool (by name, Ready ones first) that lets `svc` keep `ip`, if any. */
  #keepingPool(svc: ServiceIntent, ip: number): Pool | undefined {
    let fallback: Pool | undefined;
    for (const p of this.pools) {
      if (svc.poolName !== undefined && p.name !== svc.poolName) continue;
      if (!poolContains(p, ip) || !p.selects(svc.labels)) continue;
      if (p.ready) return p;
      fallback ??= p;
    }
    return fallback;
  }

  #keep(svc: ServiceIntent, ips: readonly number[], fromStatus: boolean): Verdict {
    if (svc.requested.length > 0) {
      if (svc.requestProblem || !svc.requested.every(isIpv4)) return "skip";
      if (!sameSet(svc.requested.map(parseIpv4), ips)) return "skip";
    }
    const pools: string[] = [];
    for (const ip of ips) {
      const p = this.#keepingPool(svc, ip);
      if (p === undefined) return "skip";
      pools.push(p.name);
    }
    for (const ip of ips) {
      const problem = this.#shareProblem(ip, svc);
      if (problem === undefined) continue;
      if (!fromStatus) return "skip";
      return {
        ...failed(
          "SharingConflict",
          `Cannot keep address ${
            formatIpv4(ip)
          } shown in this Service's status: ${problem.message}. ` +
            "Two Services never hold one address unless they may share it; the Service that held it first keeps it, " +
            "and this one is allocated anew once its status no longer shows the address",
        ),
        refusedStatus: true,
      };
    }
    return { addresses: [...ips].sort((a, b) => a - b), pools, reason: "Allocated", message: "" };
  }

  #request(svc: ServiceIntent): Outcome {
    if (svc.requestProblem) return failed("RequestedAddressUnavailable", svc.requestProblem);
    const ips: number[] = [], pools: string[] = [];
    for (const text of svc.requested) {
      if (!isIpv4(text)) {
        return failed(
          "RequestedAddressUnavailable",
          `Requested address "${text}" is not an IPv4 address`,
        );
      }
      const ip = parseIpv4(text);
      const pool = this.#requestPool(svc, ip);
      if (typeof pool === "string") return failed("RequestedAddressUnavailable", pool);
      const problem = this.#shareProblem(ip, svc);
      if (problem !== undefined) {
        return failed(
          problem.kind === "ports" ? "SharingConflict" : "RequestedAddressUnavailable",
          `Requested ${problem.message}`,
        );
      }
      ips.push(ip);
      pools.push(pool.name);
    }
    return { addresses: ips, pools, reason: "Allocated", message: "" };
  }

  /** The pool a requested address comes from, or why there is none. */
  #requestPool(svc: ServiceIntent, ip: number): Pool | string {
    const text = formatIpv4(ip);
    const inRange = this.pools.filter((p) => p.ranges.some((r) => ip >= r.first && ip <= r.last));
    if (inRange.length === 0) return `Requested address ${text} is in no AddressPool`;
    let why = "";
    for (const p of inRange) {
      if (svc.poolName !== undefined && p.name !== svc.poolName) {
        why ||=
          `Requested address ${text} is in pool "${p.name}", not in pool "${svc.poolName}" that annotation ${ADDRESS_POOL_ANNOTATION} names`;
      } else if (!p.ready) {
        why ||=
          `Requested address ${text} is in pool "${p.name}", which is not Ready: ${p.problem}`;
      } else if (!p.selects(svc.labels)) {
        why ||=
          `Requested address ${text} is in pool "${p.name}", whose serviceSelector (${p.selector}) does not select this Service`;
      } else if (p.avoidBuggyIPs && isBuggyIp(ip)) {
        why ||=
          `Requested address ${text} ends in .0 or .255, which pool "${p.name}" does not hand out (avoidBuggyIPs)`;
      } else return p;
    }
    return why;
  }

  #eligible(svc: ServiceIntent): Pool[] {
    return this.pools.filter((p) =>
      p.ready && p.selects(svc.labels) &&
      (svc.poolName !== undefined ? p.name === svc.poolName : p.autoAssign)
    );
  }

  #dynamic(svc: ServiceIntent): Outcome {
    const eligible = this.#eligible(svc);
    if (eligible.length === 0) return failed("NoMatchingPool", this.#noPoolMessage(svc));
    if (svc.sharingKey !== undefined) {
      const group = this.#groups.get(`${svc.namespace}\0${svc.sharingKey}`);
      if (group !== undefined && group.size > 0) return this.#joinGroup(svc, eligible, group);
    }
    for (const pool of eligible) {
      const ip = this.#lowestFree(pool);
      if (ip !== undefined) {
        return { addresses: [ip], pools: [pool.name], reason: "Allocated", message: "" };
      }
    }
    const names = eligible.map((p) => `"${p.name}"`).join(", ");
    return failed(
      "PoolExhausted",
      `No free address in ${
        eligible.length === 1 ? "pool" : "pools"
      } ${names}: every address is in use; ` +
        "add a block to a pool or delete a Service that holds one",
    );
  }

  #joinGroup(svc: ServiceIntent, eligible: readonly Pool[], group: ReadonlySet<number>): Outcome {
    let why = "";
    for (const ip of [...group].sort((a, b) => a - b)) {
      const pool = eligible.find((p) => poolContains(p, ip));
      if (pool === undefined) {
        why ||= `address ${
          formatIpv4(ip)
        } shared under key "${svc.sharingKey}" is in no pool this Service may use`;
        continue;
      }
      const problem = this.#shareProblem(ip, svc);
      if (problem === undefined) {
        return { addresses: [ip], pools: [pool.name], reason: "Allocated", message: "" };
      }
      why ||= problem.message;
    }
    return failed(
      "SharingConflict",
      `Cannot share an address under key "${svc.sharingKey}": ${why}; use distinct ports or another key`,
    );
  }

  #lowestFree(pool: Pool): number | undefined {
    let c = this.#cursors.get(pool.name);
    if (c === undefined) this.#cursors.set(pool.name, c = { range: 0, ip: -1 });
    // Within the dynamic phase addresses are only taken, never freed, so the lowest free
    // address only moves up: one cursor per pool makes the pass linear in addresses used.
    for (; c.range < pool.ranges.length; c.range++) {
      const r = pool.ranges[c.range]!;
      if (c.ip < r.first) c.ip = r.first;
      for (; c.ip <= r.last; c.ip++) {
        if (!this.held.has(c.ip) && !(pool.avoidBuggyIPs && isBuggyIp(c.ip))) return c.ip;
      }
    }
    return undefined;
  }

  #noPoolMessage(svc: ServiceIntent): string {
    if (svc.poolName !== undefined) {
      const p = this.pools.find((p) => p.name === svc.poolName);
      const named = `pool "${svc.poolName}" named by annotation ${ADDRESS_POOL_ANNOTATION}`;
      if (p === undefined) return `No AddressPool: ${named} does not exist`;
      if (!p.ready) return `No AddressPool: ${named} is not Ready (${p.reason}): ${p.problem}`;
      return `No AddressPool: ${named} does not select this Service (serviceSelector: ${p.selector})`;
    }
    if (this.pools.length === 0) return "No AddressPool exists; create one (docs/ipam.md)";
    const why = this.pools.slice(0, MAX_POOLS_LISTED).map((p) =>
      `"${p.name}": ${
        !p.ready
          ? "not Ready"
          : !p.autoAssign
          ? "autoAssign is false (name it with annotation " + ADDRESS_POOL_ANNOTATION + ")"
          : `serviceSelector ${p.selector} does not match`
      }`
    );
    if (this.pools.length > MAX_POOLS_LISTED) {
      why.push(`${this.pools.length - MAX_POOLS_LISTED} more`);
    }
    return `No AddressPool hands out addresses to this Service (${why.join("; ")})`;
  }
}
