/**
 * The node's uplinks by default: the interfaces of its IPv4 and IPv6 default routes, read from
 * `/proc/thread-self/net/route` and `ipv6_route` (the calling thread's network namespace, so
 * `inNetns` picks another one; no `ip` process).
 *
 * @module
 */

import { inNetns } from "../bpf/netns.ts";

/** Interfaces of the default routes in `/proc/net/route` text (IPv4). */
export function defaultRouteIfaces4(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    // Iface Destination Gateway Flags RefCnt Use Metric Mask …; RTF_UP = 1.
    if (f.length >= 8 && f[1] === "00000000" && f[7] === "00000000" && (Number(`0x${f[3]}`) & 1)) {
      out.push(f[0]!);
    }
  }
  return out;
}

/** Interfaces of the default routes in `/proc/net/ipv6_route` text. */
export function defaultRouteIfaces6(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split("\n")) {
    const f = line.trim().split(/\s+/);
    // dest plen src splen nexthop metric refcnt use flags iface; skip the loopback rejects.
    if (f.length >= 10 && /^0{32}$/.test(f[0]!) && f[1] === "00" && f[9] !== "lo") {
      out.push(f[9]!);
    }
  }
  return out;
}

/** The uplinks of the node (or of network namespace `netns`): default-route interfaces. */
export function defaultUplinks(netns?: string): string[] {
  const read = (name: string) => {
    try {
      return Deno.readTextFileSync(`/proc/thread-self/net/${name}`);
    } catch {
      return "";
    }
  };
  return inNetns(netns, () => [
    ...new Set([
      ...defaultRouteIfaces4(read("route")),
      ...defaultRouteIfaces6(read("ipv6_route")),
    ]),
  ]);
}
