/**
 * The address allocator the controller calls: pools and Services in, conditions-ready results
 * and the Events to emit out. Plain logic, no I/O: the reconciler fetches objects, calls
 * {@linkcode AddressAllocator.reconcile} and writes what comes back.
 *
 * Level-triggered: every call gets every pool and every Service and answers for all of them.
 * The same input twice gives the same result and no Events the second time. A new allocator
 * (a restarted or newly elected controller) takes the addresses Services' status shows as
 * theirs, so it reallocates nothing. Rules: docs/ipam.md.
 *
 * @example
 * ```ts
 * import { AddressAllocator } from "./allocator.ts";
 * const ipam = new AddressAllocator();
 * const r = ipam.reconcile(
 *   [{ metadata: { name: "blue" }, spec: { blocks: [{ cidr: "10.0.100.0/28" }] } }],
 *   [{
 *     metadata: { name: "web", namespace: "shop" },
 *     spec: { type: "LoadBalancer", loadBalancerClass: "holdfast.io/lb", ports: [{ port: 80 }] },
 *   }],
 * );
 * if (r.services[0]?.addresses[0] !== "10.0.100.0") throw new Error("allocate");
 * if (r.events[0]?.reason !== "AddressAllocated") throw new Error("event");
 * ```
 *
 * @module
 */

import { type Addr, formatAddress } from "./_addr.ts";
import { AssignPass, type Outcome } from "./_assign.ts";
import {
  type K8sAddressPool,
  type Pool,
  poolContains,
  poolHasFamily,
  poolTotal,
  readPools,
  safeCount,
  timeMs,
} from "./pool.ts";
import {
  ADDRESS_ALLOCATED_CONDITION,
  type ClaimOptions,
  DEFAULT_LOAD_BALANCER_CLASS,
  type IpamCondition,
  type IpamService,
  isClaimed,
  readService,
  type ServiceIntent,
} from "./service.ts";

/** The object an Event concerns. */
export interface ObjectRef {
  kind: "Service" | "AddressPool";
  namespace?: string;
  name: string;
}

/** An Event to emit (reason CamelCase, message a person can act on). */
export interface IpamEvent {
  object: ObjectRef;
  type: "Normal" | "Warning";
  reason: "AddressAllocated" | "AddressReleased" | "AllocationFailed" | "PoolInvalid";
  message: string;
}

/** The allocation of one claimed Service: its `status.loadBalancer.ingress` and condition. */
export interface ServiceAllocation {
  namespace: string;
  name: string;
  /**
   * Addresses, ascending, IPv4 first (one per family for a dual-stack Service); empty when
   * allocation failed, except a RequireDualStack Service missing one family
   * (`IPFamilyUnavailable`) keeps the other.
   */
  addresses: string[];
  /** The pool of each address. */
  pools: string[];
  /** `holdfast.io/AddressAllocated` (lastTransitionTime is the status writer's to set). */
  condition: IpamCondition;
}

/**
 * A pool's status: counts (both families; saturated at `Number.MAX_SAFE_INTEGER`, since an IPv6
 * /64 holds 2^64) and the `Ready` and `Exhausted` conditions.
 */
export interface PoolStatus {
  name: string;
  total: number;
  used: number;
  available: number;
  conditions: IpamCondition[];
}

/** What one reconcile decided. */
export interface IpamResult {
  /** Every claimed Service, by namespace/name. */
  services: ServiceAllocation[];
  /** Every pool, by name. */
  pools: PoolStatus[];
  /** Events to emit, in order. */
  events: IpamEvent[];
  /** Services that still exist but are no longer claimed and lost their addresses: clear their status. */
  released: ObjectRef[];
}

interface Remembered {
  status: string;
  reason: string;
  message: string;
}

function sameCondition(a: Remembered | undefined, b: Remembered): boolean {
  return a !== undefined && a.status === b.status && a.reason === b.reason &&
    a.message === b.message;
}

function sameAddresses(a: readonly Addr[], b: readonly Addr[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function list(ips: readonly Addr[]): string {
  return ips.map(formatAddress).join(", ");
}

function allocatedMessage(svc: ServiceIntent, o: Outcome): string {
  const pools = [...new Set(o.pools)];
  const from = pools.length === 1
    ? `${list(o.addresses)} from pool "${pools[0]}"`
    : o.addresses.map((ip, i) => `${formatAddress(ip)} from pool "${o.pools[i]}"`).join(", ");
  const shared = svc.sharingKey !== undefined ? ` (sharing key "${svc.sharingKey}")` : "";
  return `${o.addresses.length === 1 ? "Address" : "Addresses"} ${from}${shared}`;
}

/** Allocates load-balancer addresses; keeps what it decided between calls. */
export class AddressAllocator {
  readonly #claim: ClaimOptions;
  /** Addresses per Service key as last decided ([] for a Service that got none). */
  #memory = new Map<string, readonly Addr[]>();
  #conditions = new Map<string, Remembered>();
  /** Services whose status claim lost to another Service's (see AssignPass.run). */
  #refused = new Set<string>();
  #poolReady = new Map<string, Remembered>();

  constructor(options: ClaimOptions = {}) {
    this.#claim = options;
  }

  /**
   * Forgets everything this instance decided and reconciles from the cluster alone: what a
   * controller calls when it becomes leader. A fresh allocator behaves the same.
   */
  restore(pools: readonly K8sAddressPool[], services: readonly IpamService[]): IpamResult {
    this.#memory = new Map();
    this.#conditions = new Map();
    this.#refused = new Set();
    this.#poolReady = new Map();
    return this.reconcile(pools, services);
  }

  /** Addresses a Service (`namespace/name`) holds, as last decided. */
  addressesOf(key: string): string[] {
    return (this.#memory.get(key) ?? []).map(formatAddress);
  }

  /** Decides addresses for every claimed Service given every pool. */
  reconcile(poolObjects: readonly K8sAddressPool[], services: readonly IpamService[]): IpamResult {
    const pools = readPools(poolObjects);
    const claimed: ServiceIntent[] = [];
    const unclaimed = new Map<string, ObjectRef>();
    for (const svc of services) {
      const name = svc.metadata?.name;
      if (!name) continue; // the API server never serves one; nothing to report it on
      if (isClaimed(svc, this.#claim)) {
        claimed.push(readService(svc, timeMs(svc.metadata?.creationTimestamp)));
      } else {
        const namespace = svc.metadata?.namespace ?? "default";
        unclaimed.set(`${namespace}/${name}`, { kind: "Service", namespace, name });
      }
    }
    claimed.sort((a, b) =>
      a.createdMs - b.createdMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)
    );
    const pass = new AssignPass(pools);
    pass.run(claimed, this.#memory, this.#refused);

    const events: IpamEvent[] = [];
    const released: ObjectRef[] = [];
    const memory = new Map<string, readonly Addr[]>();
    const conditions = new Map<string, Remembered>();
    const refused = new Set<string>();
    for (const [key, before] of this.#memory) {
      if (before.length === 0 || pass.outcomes.has(key)) continue;
      const gone = unclaimed.get(key);
      const slash = key.indexOf("/");
      const object: ObjectRef = gone ??
        { kind: "Service", namespace: key.slice(0, slash), name: key.slice(slash + 1) };
      if (gone) released.push(gone);
      const cls = this.#claim.loadBalancerClass ?? DEFAULT_LOAD_BALANCER_CLASS;
      events.push({
        object,
        type: "Normal",
        reason: "AddressReleased",
        message: `Released ${list(before)}: ${
          gone
            ? `the Service is no longer of type LoadBalancer with class "${cls}"`
            : "the Service was deleted"
        }`,
      });
    }
    const allocations: [string, ServiceAllocation][] = [];
    for (const svc of claimed) {
      const o = pass.outcomes.get(svc.key)!;
      const ok = o.reason === "Allocated";
      const got = o.addresses.length > 0 ? allocatedMessage(svc, o) : "";
      const cond: Remembered = {
        status: ok ? "True" : "False",
        reason: o.reason,
        message: ok
          ? (o.note ? `${got}; ${o.note}` : got)
          : got
          ? `${got}; ${o.message}`
          : o.message,
      };
      this.#serviceEvents(svc, o, got, cond, events);
      memory.set(svc.key, o.addresses);
      if (o.refusedStatus) refused.add(svc.key);
      conditions.set(svc.key, cond);
      allocations.push([svc.key, {
        namespace: svc.namespace,
        name: svc.name,
        addresses: o.addresses.map(formatAddress),
        pools: [...o.pools],
        condition: {
          type: ADDRESS_ALLOCATED_CONDITION,
          ...cond,
          ...(svc.generation !== undefined ? { observedGeneration: svc.generation } : {}),
        },
      }]);
    }
    allocations.sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    this.#memory = memory;
    this.#conditions = conditions;
    this.#refused = refused;
    return {
      services: allocations.map(([, a]) => a),
      pools: this.#poolStatuses(pools, pass, events),
      events,
      released,
    };
  }

  #serviceEvents(
    svc: ServiceIntent,
    o: Outcome,
    got: string,
    cond: Remembered,
    events: IpamEvent[],
  ): void {
    const object: ObjectRef = { kind: "Service", namespace: svc.namespace, name: svc.name };
    const before = this.#memory.get(svc.key) ?? svc.statusIps;
    const dropped = before.filter((ip) => !o.addresses.includes(ip));
    if (o.addresses.length > 0 && !sameAddresses(before, o.addresses)) {
      events.push({
        object,
        type: "Normal",
        reason: "AddressAllocated",
        message: `Allocated ${got.replace(/^Address(es)? /, "")}${
          dropped.length > 0
            ? `, replacing ${list(dropped)}`
            : before.length > 0
            ? ` (${list(before)} kept)`
            : ""
        }`,
      });
    }
    if (o.addresses.length === 0 && before.length > 0) {
      events.push({
        object,
        type: "Normal",
        reason: "AddressReleased",
        message: `Released ${list(before)}: ${o.message}`,
      });
    }
    const previous = this.#conditions.get(svc.key) ?? svc.statusCondition;
    if (cond.status === "False" && !sameCondition(previous, cond)) {
      events.push({ object, type: "Warning", reason: "AllocationFailed", message: cond.message });
    }
  }

  #poolStatuses(pools: readonly Pool[], pass: AssignPass, events: IpamEvent[]): PoolStatus[] {
    const used = new Map<string, { IPv4: number; IPv6: number }>();
    for (const ip of pass.held.keys()) {
      const family = typeof ip === "number" ? "IPv4" : "IPv6";
      for (const p of pools) {
        if (!poolContains(p, ip)) continue;
        let u = used.get(p.name);
        if (u === undefined) used.set(p.name, u = { IPv4: 0, IPv6: 0 });
        u[family]++;
      }
    }
    const poolReady = new Map<string, Remembered>();
    const out = pools.map((p): PoolStatus => {
      const u = used.get(p.name) ?? { IPv4: 0, IPv6: 0 }, n = u.IPv4 + u.IPv6;
      const total = poolTotal(p), available = total - BigInt(n);
      const dual = poolHasFamily(p, "IPv4") && poolHasFamily(p, "IPv6");
      const ready: Remembered = p.ready
        ? {
          status: "True",
          reason: "Valid",
          message: `${
            dual ? `${p.totals.IPv4} IPv4 and ${p.totals.IPv6} IPv6` : `${total}`
          } addresses in ${p.ranges.length} ${p.ranges.length === 1 ? "block" : "blocks"}`,
        }
        : {
          status: "False",
          reason: p.reason,
          message:
            `${p.problem}. The pool hands out no new addresses; Services keep those they hold`,
        };
      const previous = this.#poolReady.get(p.name) ?? p.previousReady;
      if (!p.ready && !sameCondition(previous, ready)) {
        events.push({
          object: { kind: "AddressPool", name: p.name },
          type: "Warning",
          reason: "PoolInvalid",
          message: `Pool "${p.name}" is not Ready (${p.reason}): ${ready.message}`,
        });
      }
      poolReady.set(p.name, ready);
      // A dual-stack pool out of one family is exhausted for the Services that want it.
      const outOf = dual
        ? (["IPv4", "IPv6"] as const).find((f) => p.totals[f] - BigInt(u[f]) <= 0n)
        : undefined;
      const exhausted: Remembered = total === 0n
        ? {
          status: "True",
          reason: "NoAddressesLeft",
          message:
            "The pool has no address to hand out (its blocks hold only .0 and .255 addresses, which avoidBuggyIPs skips); add a block",
        }
        : available <= 0n
        ? {
          status: "True",
          reason: "NoAddressesLeft",
          message: `All ${total} addresses are in use; add a block or free addresses`,
        }
        : outOf !== undefined
        ? {
          status: "True",
          reason: "NoAddressesLeft",
          message: `All ${
            p.totals[outOf]
          } ${outOf} addresses are in use (other addresses remain); add a ${outOf} block or free addresses`,
        }
        : { status: "False", reason: "AddressesAvailable", message: "Addresses are available" };
      const gen = p.generation !== undefined ? { observedGeneration: p.generation } : {};
      return {
        name: p.name,
        total: safeCount(total),
        used: n,
        available: safeCount(available > 0n ? available : 0n),
        conditions: [{ type: "Ready", ...ready, ...gen }, {
          type: "Exhausted",
          ...exhausted,
          ...gen,
        }],
      };
    });
    this.#poolReady = poolReady;
    return out;
  }
}
