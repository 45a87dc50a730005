/**
 * Load-balancer addresses of both families as the allocator handles them: an IPv4 address is a
 * host-order u32 `number`, an IPv6 address a 128-bit `bigint`. The two types never compare
 * equal (`Map` keys stay apart: `5 !== 5n`), so one map holds both families; ordering puts
 * every IPv4 address before every IPv6 one. IPv6 text out is RFC 5952.
 *
 * @module
 */

import { formatIpv4, isIpv4, parseIpv4, parseIpv4Cidr } from "../../lib/ipv4.ts";
import { formatIpv6BigInt, ipv6BigInt, parseIpv6Cidr } from "../../lib/ipv6.ts";

/** An IPv4 (`number`) or IPv6 (`bigint`) address. */
export type Addr = number | bigint;

/** An address family as Kubernetes names it (`spec.ipFamilies`, EndpointSlice `addressType`). */
export type Family = "IPv4" | "IPv6";

/** Both families, in the order addresses sort. */
export const FAMILIES: readonly Family[] = ["IPv4", "IPv6"];

/** The family of an address. */
export function familyOf(a: Addr): Family {
  return typeof a === "number" ? "IPv4" : "IPv6";
}

/** IPv4 or IPv6 text → an address, or undefined when it is neither. */
export function parseAddress(text: string): Addr | undefined {
  if (isIpv4(text)) return parseIpv4(text);
  if (!text.includes(":")) return undefined;
  try {
    return ipv6BigInt(text);
  } catch {
    return undefined; // not IPv6 text either
  }
}

/** An address as text: dotted quad, or RFC 5952 IPv6. */
export function formatAddress(a: Addr): string {
  return typeof a === "number" ? formatIpv4(a) : formatIpv6BigInt(a);
}

/** Orders addresses: IPv4 before IPv6, then by value. */
export function compareAddr(a: Addr, b: Addr): number {
  if (typeof a !== typeof b) return typeof a === "number" ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** `a` + 1 within its family. */
export function nextAddr(a: Addr): Addr {
  return typeof a === "number" ? a + 1 : a + 1n;
}

/** A CIDR of either family as an inclusive range. @throws {TypeError} naming what is wrong */
export function parseCidr(text: string): { first: Addr; last: Addr } {
  if (text.includes(":")) return parseIpv6Cidr(text);
  return parseIpv4Cidr(text);
}

/** Parses one address of a block; @throws {TypeError} naming what is wrong. */
export function parseBlockAddress(text: string): Addr {
  const a = parseAddress(text);
  if (a === undefined) {
    throw new TypeError(`"${text}" is not an IPv4 or IPv6 address`);
  }
  return a;
}
