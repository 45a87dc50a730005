/**
 * AddressPool objects (`holdfast.io/v1alpha1`, docs/ipam.md) read and validated into
 * {@linkcode Pool}s the allocator hands addresses out of.
 *
 * A pool with a bad block (not a CIDR, `start` > `stop`, blocks overlapping each other) or a
 * bad `serviceSelector` is not Ready; a pool overlapping an older pool (creationTimestamp, then
 * name) is not Ready either, and the older one keeps working. A pool that is not Ready hands out
 * no new addresses, but Services already holding addresses inside its readable blocks keep them:
 * a typo in a pool must not take live Services down.
 *
 * @module
 */

import { parseIpv4, parseIpv4Cidr } from "../../lib/ipv4.ts";
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

/** An inclusive range of host-order u32 addresses and the block text it came from. */
export interface AddressRange {
  readonly first: number;
  readonly last: number;
  readonly block: string;
}

/** A validated pool. `ranges` are its readable blocks, sorted, even when it is not Ready. */
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
  /** Addresses it can hand out (blocks' union, less .0/.255 with avoidBuggyIPs). */
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
    const c = parseIpv4Cidr(b.cidr);
    return { first: c.first, last: c.last, block: text };
  }
  if (b.start === undefined || b.stop === undefined) {
    throw new TypeError(`block "${text}" needs either cidr or both start and stop`);
  }
  const first = parseIpv4(b.start), last = parseIpv4(b.stop);
  if (first > last) {
    throw new TypeError(`block "${text}": start ${b.start} is after stop ${b.stop}`);
  }
  return { first, last, block: text };
}

/** Whether `ip` is .0 or .255 (what avoidBuggyIPs skips). */
export function isBuggyIp(ip: number): boolean {
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

/** Whether a pool may hand out (or keep) `ip`: inside a range and not skipped as buggy. */
export function poolContains(pool: Pool, ip: number): boolean {
  if (pool.avoidBuggyIPs && isBuggyIp(ip)) return false;
  for (const r of pool.ranges) if (ip >= r.first && ip <= r.last) return true;
  return false;
}

function overlap(
  a: readonly AddressRange[],
  b: readonly AddressRange[],
): [AddressRange, AddressRange] | undefined {
  let i = 0, j = 0;
  while (i < a.length && j < b.length) {
    const x = a[i]!, y = b[j]!;
    if (x.first <= y.last && y.first <= x.last) return [x, y];
    if (x.last < y.last) i++;
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
  ranges.sort((x, y) => x.first - y.first || x.last - y.last);
  for (let i = 1; i < ranges.length; i++) {
    const prev = ranges[i - 1]!, r = ranges[i]!;
    if (r.first <= prev.last) {
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
  let total = 0, end = -1;
  for (const r of ranges) {
    // Union size: overlapping blocks (already a problem) must not count twice.
    const first = Math.max(r.first, end + 1);
    if (first > r.last) continue;
    total += r.last - first + 1 - (spec.avoidBuggyIPs ? buggyCount(first, r.last) : 0);
    end = r.last;
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
    total,
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
