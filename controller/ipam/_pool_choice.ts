/**
 * Which pool a Service may take (or keep) an address from, and why none, for the allocation
 * pass (`_assign.ts`): plain functions over the validated pools.
 *
 * @module
 */

import { type Addr, formatAddress } from "./_addr.ts";
import { inRange, isBuggyIp, type Pool, poolContains } from "./pool.ts";
import { ADDRESS_POOL_ANNOTATION, type ServiceIntent } from "./service.ts";

/** Pools named in a message at most (the rest are counted). */
export const MAX_POOLS_LISTED = 5;

/** The pool (by name, Ready ones first) that lets `svc` keep `ip`, if any. */
export function keepingPool(
  pools: readonly Pool[],
  svc: ServiceIntent,
  ip: Addr,
): Pool | undefined {
  let fallback: Pool | undefined;
  for (const p of pools) {
    if (svc.poolName !== undefined && p.name !== svc.poolName) continue;
    if (!poolContains(p, ip) || !p.selects(svc.labels)) continue;
    if (p.ready) return p;
    fallback ??= p;
  }
  return fallback;
}

/** The pool a requested address comes from, or why there is none. */
export function requestPool(pools: readonly Pool[], svc: ServiceIntent, ip: Addr): Pool | string {
  const text = formatAddress(ip);
  const holding = pools.filter((p) => p.ranges.some((r) => inRange(r, ip)));
  if (holding.length === 0) return `Requested address ${text} is in no AddressPool`;
  let why = "";
  for (const p of holding) {
    if (svc.poolName !== undefined && p.name !== svc.poolName) {
      why ||=
        `Requested address ${text} is in pool "${p.name}", not in pool "${svc.poolName}" that annotation ${ADDRESS_POOL_ANNOTATION} names`;
    } else if (!p.ready) {
      why ||= `Requested address ${text} is in pool "${p.name}", which is not Ready: ${p.problem}`;
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

/** The pools `svc` may get a new address from: Ready, selecting it, named or autoAssign. */
export function eligiblePools(pools: readonly Pool[], svc: ServiceIntent): Pool[] {
  return pools.filter((p) =>
    p.ready && p.selects(svc.labels) &&
    (svc.poolName !== undefined ? p.name === svc.poolName : p.autoAssign)
  );
}

/** Why no pool hands out addresses to `svc` (the `NoMatchingPool` message). */
export function noPoolMessage(pools: readonly Pool[], svc: ServiceIntent): string {
  if (svc.poolName !== undefined) {
    const p = pools.find((p) => p.name === svc.poolName);
    const named = `pool "${svc.poolName}" named by annotation ${ADDRESS_POOL_ANNOTATION}`;
    if (p === undefined) return `No AddressPool: ${named} does not exist`;
    if (!p.ready) return `No AddressPool: ${named} is not Ready (${p.reason}): ${p.problem}`;
    return `No AddressPool: ${named} does not select this Service (serviceSelector: ${p.selector})`;
  }
  if (pools.length === 0) return "No AddressPool exists; create one (docs/ipam.md)";
  const why = pools.slice(0, MAX_POOLS_LISTED).map((p) =>
    `"${p.name}": ${
      !p.ready
        ? "not Ready"
        : !p.autoAssign
        ? "autoAssign is false (name it with annotation " + ADDRESS_POOL_ANNOTATION + ")"
        : `serviceSelector ${p.selector} does not match`
    }`
  );
  if (pools.length > MAX_POOLS_LISTED) {
    why.push(`${pools.length - MAX_POOLS_LISTED} more`);
  }
  return `No AddressPool hands out addresses to this Service (${why.join("; ")})`;
}
