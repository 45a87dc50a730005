/**
 * AddressPool objects (`holdfast.io/v1alpha1`, docs/ipam.md) read and validated into
 * {@linkcode Pool}s the allocator hands addresses out of.
 *
 * A pool may hold IPv4 and IPv6 blocks side by side (one pool, both families, as MetalLB's).
 * A pool with a bad block (not a CIDR, `start` > `stop`, blocks overlapping each other) or a
 * bad `serviceSelector` is not Ready; a pool overlapping an older pool (creationTimestamp, then
 * name) is not Ready either, and the older one keeps working. A pool that is not Ready hands out
 * no new addresses, but Services already holding addresses inside its readable blocks keep them:
 * a typo in a pool must not take live Services down.
 *
 * @module
 */

import {
  type Addr,
  compareAddr,
  FAMILIES,
  type Family,
  familyOf,
  parseBlockAddress,
  parseCidr,
} from "./_addr.ts";
import {
  compileLabelSelector,
  formatLabelSelector,
  type LabelMatcher,
  type LabelSelector,
} from "../../lib/label_selector.ts";
import type { IpamCondition, K8sTime } from "./service.ts";

/** One `spec.blocks` entry: exactly one of `cidr` or `start`+`stop`. */
export interface K8sAddressBlock {
  cidr?: string;
  start?: string;
  stop?: string;
}

/** The subset of an AddressPool object read (structural, so a watched object fits as it is). */
export interface K8sAddressPool {
  metadata?: { name?: string; creationTimestamp?: K8sTime; generation?: number };
  spec?: {
    blocks?: K8sAddressBlock[];
    serviceSelector?: LabelSelector | null;
    autoAssign?: boolean;
    avoidBuggyIPs?: boolean;
  };
  status?: { conditions?: IpamCondition[] };
}

/** Pool condition reasons (`Ready`: Valid | InvalidBlock | InvalidSelector | OverlappingPool). */
export type PoolReason = "Valid" | "InvalidBlock" | "InvalidSelector" | "OverlappingPool";

/** An inclusive range of addresses of one family and the block text it came from. */
export interface AddressRange {
  readonly first: Addr;
  readonly last: Addr;
  readonly block: string;
}

/**
 * A validated pool. `ranges` are its readable blocks, sorted (IPv4 before IPv6), even when it is
 * not Ready.
 */
export interface Pool {
  readonly name: string;
  readonly createdMs: number;
  readonly generation?: number;
  readonly ranges: readonly AddressRange[];
  readonly selects: LabelMatcher;
  /** `serviceSelector` in kubectl's text form, for messages. */
  readonly selector: string;
  readonly autoAssign: boolean;
  readonly avoidBuggyIPs: boolean;
  readonly ready: boolean;
  readonly reason: PoolReason;
  /** Why the pool is not Ready (empty when it is). */
  readonly problem: string;
  /**
   * Addresses it can hand out (blocks' union, less IPv4 .0/.255 with avoidBuggyIPs), per family
   * (0n for a family without blocks). A /64 counts 2^64: never enumerated.
   */
  readonly totals: Readonly<Record<Family, bigint>>;
  /** Both families' totals summed, saturated at `Number.MAX_SAFE_INTEGER`. */
  readonly total: number;
  /** The `Ready` condition the object showed before (to emit PoolInvalid only on change). */
  readonly previousReady?: IpamCondition;
}

/** Milliseconds of a creationTimestamp (`Date` from client-node, RFC 3339 text in YAML); 0 if absent. */
export function timeMs(t: K8sTime | undefined): number {
  if (t === undefined || t === null) return 0;
  const ms = t instanceof Date ? t.getTime() : Date.parse(t);
  return Number.isNaN(ms) ? 0 : ms;
}

/** The text form of a block, for messages: `10.0.0.0/28` or `10.0.0.40-10.0.0.49`. */
export function blockText(b: K8sAddressBlock): string {
  if (b.cidr !== undefined && b.start === undefined && b.stop === undefined) return b.cidr;
  return `${b.start ?? "?"}-${b.stop ?? "?"}${b.cidr !== undefined ? ` (and cidr ${b.cidr})` : ""}`;
}

function parseBlock(b: K8sAddressBlock): AddressRange {
  const text = blockText(b);
  if (b.cidr !== undefined) {
    if (b.start !== undefined || b.stop !== undefined) {
      throw new TypeError(`block "${text}" sets both cidr and start/stop; use one`);
    }
    const c = parseCidr(b.cidr);
    return { first: c.first, last: c.last, block: text };
  }
  if (b.start === undefined || b.stop === undefined) {
    throw new TypeError(`block "${text}" needs either cidr or both start and stop`);
  }
  const first = parseBlockAddress(b.start), last = parseBlockAddress(b.stop);
  if (familyOf(first) !== familyOf(last)) {
    throw new TypeError(
      `block "${text}": start ${b.start} is ${familyOf(first)} and stop ${b.stop} is ${
        familyOf(last)
      }; a range is of one family`,
    );
  }
  if (first > last) {
    throw new TypeError(`block "${text}": start ${b.start} is after stop ${b.stop}`);
  }
  return { first, last, block: text };
}

/** Whether `ip` is IPv4 .0 or .255 (what avoidBuggyIPs skips; it never applies to IPv6). */
export function isBuggyIp(ip: Addr): boolean {
  if (typeof ip !== "number") return false;
  const low = ip & 255;
  return low === 0 || low === 255;
}

/** Addresses of [first, last] ending in .0 or .255. */
function buggyCount(first: number, last: number): number {
  // Count x.x.x.0 and x.x.x.255 in the range: one of each per /24, clipped at the ends.
  const count = (residue: number) => {
    const firstHit = first + ((residue - (first % 256) + 256) % 256);
    return firstHit > last ? 0 : Math.floor((last - firstHit) / 256) + 1;
  };
  return count(0) + count(255);
}

/** Whether `ip` lies in range `r` (false across families). */
export function inRange(r: AddressRange, ip: Addr): boolean {
  return typeof ip === typeof r.first && ip >= r.first && ip <= r.last;
}

/** Whether a pool may hand out (or keep) `ip`: inside a range and not skipped as buggy. */
export function poolContains(pool: Pool, ip: Addr): boolean {
  if (pool.avoidBuggyIPs && isBuggyIp(ip)) return false;
  for (const r of pool.ranges) if (inRange(r, ip)) return true;
  return false;
}

/** Whether a pool has blocks of `family`. */
export function poolHasFamily(pool: Pool, family: Family): boolean {
  return pool.totals[family] > 0n;
}

/**
 * Whether a pool has blocks of `family`, even ones it can hand nothing out of (a /32 of a .0
 * address under avoidBuggyIPs): such a pool is exhausted, not missing the family.
 */
export function poolHasBlocks(pool: Pool, family: Family): boolean {
  return pool.ranges.some((r) => familyOf(r.first) === family);
}

/** Addresses of `family` a pool can hand out, saturated to a safe integer (for status fields). */
export function safeCount(n: bigint): number {
  return n > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(n);
}

/** The sum of a pool's families' totals. */
export function poolTotal(pool: Pool): bigint {
  return pool.totals.IPv4 + pool.totals.IPv6;
}

function overlap(
  a: readonly AddressRange[],
  b: readonly AddressRange[],
): [AddressRange, AddressRange] | undefined {
  let i = 0, j = 0;
  while (i < a.length && j < b.length) {
    const x = a[i]!, y = b[j]!;
    if (compareAddr(x.first, y.last) <= 0 && compareAddr(y.first, x.last) <= 0) return [x, y];
    if (compareAddr(x.last, y.last) < 0) i++;
    else j++;
  }
  return undefined;
}

function readPool(obj: K8sAddressPool, index: number): Pool {
  const name = obj.metadata?.name || `<unnamed pool #${index}>`;
  const spec = obj.spec ?? {};
  const problems: string[] = [];
  let reason: PoolReason = "Valid";
  const ranges: AddressRange[] = [];
  for (const b of spec.blocks ?? []) {
    try {
      ranges.push(parseBlock(b));
    } catch (e) {
      reason = "InvalidBlock";
      const msg = (e as Error).message;
      problems.push(msg.startsWith("block ") ? msg : `block "${blockText(b)}": ${msg}`);
    }
  }
  if ((spec.blocks ?? []).length === 0) {
    reason = "InvalidBlock";
    problems.push("spec.blocks is empty");
  }
  ranges.sort((x, y) => compareAddr(x.first, y.first) || compareAddr(x.last, y.last));
  for (let i = 1; i < ranges.length; i++) {
    const prev = ranges[i - 1]!, r = ranges[i]!;
    if (compareAddr(r.first, prev.last) <= 0) {
      reason = "InvalidBlock";
      problems.push(`block "${r.block}" overlaps block "${prev.block}" of the same pool`);
    }
  }
  let selects: LabelMatcher = () => false;
  try {
    selects = compileLabelSelector(spec.serviceSelector);
  } catch (e) {
    if (reason === "Valid") reason = "InvalidSelector";
    problems.push(`spec.serviceSelector: ${(e as Error).message}`);
  }
  const totals: Record<Family, bigint> = { IPv4: 0n, IPv6: 0n };
  for (const family of FAMILIES) {
    let end = -1n;
    for (const r of ranges) {
      if (familyOf(r.first) !== family) continue;
      // Union size: overlapping blocks (already a problem) must not count twice.
      const last = BigInt(r.last);
      const first = BigInt(r.first) > end + 1n ? BigInt(r.first) : end + 1n;
      if (first > last) continue;
      const buggy = spec.avoidBuggyIPs && family === "IPv4"
        ? buggyCount(Number(first), Number(last))
        : 0;
      totals[family] += last - first + 1n - BigInt(buggy);
      end = last;
    }
  }
  return {
    name,
    createdMs: timeMs(obj.metadata?.creationTimestamp),
    generation: obj.metadata?.generation,
    ranges,
    selects,
    selector: spec.serviceSelector ? formatLabelSelector(spec.serviceSelector) : "<every Service>",
    autoAssign: spec.autoAssign ?? true,
    avoidBuggyIPs: spec.avoidBuggyIPs ?? false,
    ready: problems.length === 0,
    reason,
    problem: problems.join("; "),
    totals,
    total: safeCount(totals.IPv4 + totals.IPv6),
    previousReady: obj.status?.conditions?.find((c) => c.type === "Ready"),
  };
}

/**
 * Reads and validates pools, sorted by name (the order allocation tries them in). Overlaps
 * between pools mark the younger pool (creationTimestamp, then name) `OverlappingPool`.
 */
export function readPools(objects: readonly K8sAddressPool[]): Pool[] {
  const pools = objects.map(readPool);
  const byAge = [...pools].sort((a, b) =>
    a.createdMs - b.createdMs || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  );
  for (let i = 0; i < byAge.length; i++) {
    const young = byAge[i]!;
    for (let j = 0; j < i; j++) {
      const old = byAge[j]!;
      const hit = overlap(young.ranges, old.ranges);
      if (hit === undefined) continue;
      const msg = `block "${hit[0].block}" overlaps block "${
        hit[1].block
      }" of older pool "${old.name}"`;
      byAge[i] = {
        ...byAge[i]!,
        ready: false,
        reason: byAge[i]!.reason === "Valid" ? "OverlappingPool" : byAge[i]!.reason,
        problem: byAge[i]!.problem ? `${byAge[i]!.problem}; ${msg}` : msg,
      };
      break;
    }
  }
  return byAge.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
