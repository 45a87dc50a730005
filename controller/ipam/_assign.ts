/**
 * One allocation pass over every claimed Service: who gets which addresses, in a fixed order
 * so the same input always gives the same answer.
 *
 * 1. Keep: Services holding addresses (this allocator's memory first, then what their status
 *    shows), oldest first (creationTimestamp, then namespace/name), keep them while still valid.
 *    A status address another Service already holds is a double claim: the later one fails.
 * 2. Requests: addresses asked for by annotation or `spec.loadBalancerIP`.
 * 3. The rest: per family the Service wants (`spec.ipFamilies`), an address of their sharing
 *    group, else the lowest free address of the first eligible pool by name that has blocks of
 *    that family. A dual-stack Service that kept or requested one family gets the other here.
 *    The lowest free IPv6 address is found without enumerating a range: the scan steps over
 *    held addresses only, so it is bounded by how many are held.
 *
 * @module
 */

import {
  type Addr,
  compareAddr,
  type Family,
  familyOf,
  formatAddress,
  nextAddr,
  parseAddress,
} from "./_addr.ts";
import { isBuggyIp, type Pool, poolContains, poolHasBlocks } from "./pool.ts";
import {
  eligiblePools,
  keepingPool,
  MAX_POOLS_LISTED,
  noPoolMessage,
  requestPool,
} from "./_pool_choice.ts";
import { ALLOW_SHARED_IP_ANNOTATION, type ServiceIntent } from "./service.ts";

/** Service condition reasons. */
export type AllocationReason =
  | "Allocated"
  | "PoolExhausted"
  | "RequestedAddressUnavailable"
  | "NoMatchingPool"
  | "SharingConflict"
  | "IPFamilyUnavailable";

/**
 * What a pass decided for one Service. A failure holds no addresses, except
 * `IPFamilyUnavailable`: a RequireDualStack Service keeps the family it got.
 */
export interface Outcome {
  /** Addresses held, ascending, IPv4 first (empty on failure). */
  readonly addresses: readonly Addr[];
  /** The pool each address counts against (same order). */
  readonly pools: readonly string[];
  readonly reason: AllocationReason;
  /** Why it failed (empty when Allocated). */
  readonly message: string;
  /** Allocated without a family a PreferDualStack Service wanted: which and why. */
  readonly note?: string;
  /** It failed because another Service holds an address its status shows (a double claim). */
  readonly refusedStatus?: boolean;
}

interface Problem {
  readonly kind: "held" | "ports";
  readonly message: string;
}

type Verdict = Outcome | "skip";

function commonPort(a: readonly string[], b: readonly string[]): string | undefined {
  for (const p of a) if (b.includes(p)) return p;
  return undefined;
}

function sameSet(a: readonly Addr[], b: readonly Addr[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

/** `addresses` and `pools` sorted together by address. */
function sortedPairs(
  addresses: readonly Addr[],
  pools: readonly string[],
): { addresses: Addr[]; pools: string[] } {
  const order = addresses.map((_, i) => i).sort((i, j) =>
    compareAddr(addresses[i]!, addresses[j]!)
  );
  return { addresses: order.map((i) => addresses[i]!), pools: order.map((i) => pools[i]!) };
}

function failed(reason: AllocationReason, message: string): Outcome {
  return { addresses: [], pools: [], reason, message };
}

/** A single pass; construct, {@linkcode run}, read {@linkcode outcomes}. */
export class AssignPass {
  /** Outcome per Service key. */
  readonly outcomes: Map<string, Outcome> = new Map();
  /** Holders per address (several only when shared). */
  readonly held: Map<Addr, ServiceIntent[]> = new Map();
  readonly #groups = new Map<string, Set<Addr>>();
  readonly #cursors = new Map<string, { range: number; ip: Addr | undefined }>();
  /** Services that kept or requested fewer families than they want (filled in phase 3). */
  readonly #incomplete = new Set<string>();

  constructor(readonly pools: readonly Pool[]) {}

  /**
   * Runs the three phases. `services` must be sorted oldest first; `memory` maps a key to the
   * addresses this allocator gave it before; `refused` holds the keys whose status claim lost
   * last time (their status is still the claim, until the controller clears it).
   */
  run(
    services: readonly ServiceIntent[],
    memory: ReadonlyMap<string, readonly Addr[]>,
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
      else if (this.#incomplete.has(svc.key)) this.#settle(svc, this.#fill(svc));
    }
  }

  #settle(svc: ServiceIntent, v: Verdict): void {
    if (v === "skip") return;
    this.outcomes.set(svc.key, v);
    const families = new Set(v.addresses.map(familyOf));
    if (
      v.addresses.length > 0 && svc.policy !== "SingleStack" &&
      svc.families.some((f) => !families.has(f))
    ) this.#incomplete.add(svc.key);
    else this.#incomplete.delete(svc.key);
    for (const ip of v.addresses) {
      const holders = this.held.get(ip);
      if (holders === undefined) this.held.set(ip, [svc]);
      else if (!holders.includes(svc)) holders.push(svc);
      if (svc.sharingKey !== undefined) {
        const g = `${svc.namespace}\0${svc.sharingKey}`;
        let set = this.#groups.get(g);
        if (!set) this.#groups.set(g, set = new Set());
        set.add(ip);
      }
    }
  }

  /** Why `svc` cannot hold `ip` beside its current holders (undefined: it can). */
  #shareProblem(ip: Addr, svc: ServiceIntent): Problem | undefined {
    const holders = this.held.get(ip);
    if (holders === undefined) return undefined;
    const text = formatAddress(ip);
    for (const h of holders) {
      if (h === svc) continue;
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

  #keep(svc: ServiceIntent, held: readonly Addr[], fromStatus: boolean): Verdict {
    // A Service whose spec.ipFamilies no longer lists a family lets that family's address go.
    const ips = svc.familiesSet ? held.filter((ip) => svc.families.includes(familyOf(ip))) : held;
    if (ips.length === 0) return "skip";
    if (svc.requested.length > 0) {
      const requested = svc.requested.map(parseAddress);
      if (svc.requestProblem || requested.some((ip) => ip === undefined)) return "skip";
      // The requested families must hold exactly what was asked; others were filled in.
      const asked = new Set((requested as Addr[]).map(familyOf));
      const mine = ips.filter((ip) => asked.has(familyOf(ip)));
      if (!sameSet(requested as Addr[], mine)) return "skip";
    }
    const pools: string[] = [];
    for (const ip of ips) {
      const p = keepingPool(this.pools, svc, ip);
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
            formatAddress(ip)
          } shown in this Service's status: ${problem.message}. ` +
            "Two Services never hold one address unless they may share it; the Service that held it first keeps it, " +
            "and this one is allocated anew once its status no longer shows the address",
        ),
        refusedStatus: true,
      };
    }
    return { ...sortedPairs(ips, pools), reason: "Allocated", message: "" };
  }

  #request(svc: ServiceIntent): Outcome {
    if (svc.requestProblem) return failed("RequestedAddressUnavailable", svc.requestProblem);
    const ips: Addr[] = [], pools: string[] = [];
    for (const text of svc.requested) {
      const ip = parseAddress(text);
      if (ip === undefined) {
        return failed(
          "RequestedAddressUnavailable",
          `Requested address "${text}" is not an IPv4 or IPv6 address`,
        );
      }
      if (svc.familiesSet && !svc.families.includes(familyOf(ip))) {
        return failed(
          "RequestedAddressUnavailable",
          `Requested address ${text} is ${familyOf(ip)}, but the Service's spec.ipFamilies is [${
            svc.families.join(", ")
          }] (ipFamilyPolicy ${svc.policy})`,
        );
      }
      const pool = requestPool(this.pools, svc, ip);
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
    return { ...sortedPairs(ips, pools), reason: "Allocated", message: "" };
  }

  #dynamic(svc: ServiceIntent): Outcome {
    return this.#allocateFamilies(svc, svc.families, { addresses: [], pools: [] });
  }

  /** The families a kept or requested dual-stack Service lacks, allocated beside what it has. */
  #fill(svc: ServiceIntent): Outcome {
    const have = this.outcomes.get(svc.key)!;
    const families = new Set(have.addresses.map(familyOf));
    return this.#allocateFamilies(svc, svc.families.filter((f) => !families.has(f)), have);
  }

  /**
   * One address per family in `families` beside `have`. With one family missing a
   * PreferDualStack Service is Allocated (noted); a RequireDualStack one keeps what it got and
   * fails with `IPFamilyUnavailable`.
   */
  #allocateFamilies(
    svc: ServiceIntent,
    families: readonly Family[],
    have: { readonly addresses: readonly Addr[]; readonly pools: readonly string[] },
  ): Outcome {
    const eligible = eligiblePools(this.pools, svc);
    const addresses = [...have.addresses], pools = [...have.pools];
    const misses: [Family, Outcome][] = [];
    for (const family of families) {
      const o = eligible.length === 0
        ? failed("NoMatchingPool", noPoolMessage(this.pools, svc))
        : this.#dynamicFamily(svc, eligible, family);
      if (o.reason === "Allocated") {
        addresses.push(...o.addresses);
        pools.push(...o.pools);
      } else misses.push([family, o]);
    }
    if (addresses.length === 0) return misses[0]![1];
    const got = sortedPairs(addresses, pools);
    if (misses.length === 0) return { ...got, reason: "Allocated", message: "" };
    const [family, miss] = misses[0]!;
    const why = `no ${family} address: ${miss.message}`;
    if (svc.policy !== "RequireDualStack") {
      return { ...got, reason: "Allocated", message: "", note: `${why} (${svc.policy})` };
    }
    return {
      ...got,
      reason: "IPFamilyUnavailable",
      message:
        `${why}. spec.ipFamilyPolicy is RequireDualStack: the Service keeps its other address and gets the ${family} one once a pool that selects it has a free ${family} address`,
    };
  }

  /** One address of `family` for `svc` out of `eligible` pools. */
  #dynamicFamily(svc: ServiceIntent, eligible: readonly Pool[], family: Family): Outcome {
    const pools = eligible.filter((p) => poolHasBlocks(p, family));
    if (pools.length === 0) {
      const names = eligible.slice(0, MAX_POOLS_LISTED).map((p) => `"${p.name}"`).join(", ");
      return failed(
        "NoMatchingPool",
        `No AddressPool this Service may use (${names}) has ${family} blocks; add one`,
      );
    }
    if (svc.sharingKey !== undefined) {
      const group = [...this.#groups.get(`${svc.namespace}\0${svc.sharingKey}`) ?? []]
        .filter((ip) => familyOf(ip) === family);
      if (group.length > 0) return this.#joinGroup(svc, pools, group);
    }
    for (const pool of pools) {
      const ip = this.#lowestFree(pool, family);
      if (ip !== undefined) {
        return { addresses: [ip], pools: [pool.name], reason: "Allocated", message: "" };
      }
    }
    const names = pools.map((p) => `"${p.name}"`).join(", ");
    const kind = eligible.every((p) => poolHasBlocks(p, family)) ? "" : `${family} `;
    return failed(
      "PoolExhausted",
      `No free ${kind}address in ${pools.length === 1 ? "pool" : "pools"} ${names}: ` +
        "every address is in use; add a block to a pool or delete a Service that holds one",
    );
  }

  #joinGroup(svc: ServiceIntent, eligible: readonly Pool[], group: readonly Addr[]): Outcome {
    let why = "";
    for (const ip of [...group].sort(compareAddr)) {
      const pool = eligible.find((p) => poolContains(p, ip));
      if (pool === undefined) {
        why ||= `address ${
          formatAddress(ip)
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

  #lowestFree(pool: Pool, family: Family): Addr | undefined {
    const key = `${pool.name}\0${family}`;
    let c = this.#cursors.get(key);
    if (c === undefined) this.#cursors.set(key, c = { range: 0, ip: undefined });
    // Within the dynamic phase addresses are only taken, never freed, so the lowest free
    // address only moves up: one cursor per pool and family makes the pass linear in addresses
    // used. Each step passes a held address, so a /64 is never walked.
    for (; c.range < pool.ranges.length; c.range++, c.ip = undefined) {
      const r = pool.ranges[c.range]!;
      if (familyOf(r.first) !== family) continue;
      if (c.ip === undefined || c.ip < r.first) c.ip = r.first;
      for (; c.ip <= r.last; c.ip = nextAddr(c.ip)) {
        if (!this.held.has(c.ip) && !(pool.avoidBuggyIPs && isBuggyIp(c.ip))) return c.ip;
      }
    }
    return undefined;
  }
}
