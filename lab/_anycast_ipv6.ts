/**
 * The anycast lab's BGP plan (lab/anycast.ts), and its IPv6 half when it runs dual stack
 * (`AnycastLab.create({ ipv6: true })`): each link also carries IPv6 inside the documentation
 * prefix, and each node a second BGP session over IPv6 that carries its /128s (a session per
 * family: node/bgp/bird_config.ts), as lab/cluster.ts does for LB nodes.
 *
 * | link                  | IPv4        | IPv6                 |
 * | --------------------- | ----------- | -------------------- |
 * | client ↔ router `r-c` | 10.8.0.0/24 | 2001:db8:8::/64      |
 * | node i ↔ `r-n{i}`     | 10.9.i.0/24 | 2001:db8:9:i::/64    |
 * | LB addresses          | 10.0.100.x  | 2001:db8:100::/64    |
 *
 * The router is `::1` on each link, the host `::2`; addresses without DAD (HOST_SYSCTLS6).
 *
 * @module
 */

import type { Topology } from "./netns.ts";
import type { BfdSettings } from "../node/bgp/mod.ts";
import { addSpoke6, HOST_SYSCTLS6, ROUTER_SYSCTLS } from "./_cluster_plan.ts";
import { nodeBgpSettings, type RouterPeer } from "./_anycast_router.ts";

/** The IPv6 prefix dual-stack anycast nodes announce /128s from. */
export const ANYCAST_PREFIX6 = "2001:db8:100::/64";

/** The client's IPv6 address. */
export const ANYCAST_CLIENT6 = "2001:db8:8::2";

/** Node i's (1-based) IPv6 address on its router link. */
export function anycastNode6(i: number): string {
  return `2001:db8:9:${i}::2`;
}

/** Sysctls of the router and of the other hosts (both empty without IPv6). */
export function anycastSysctls6(ipv6: boolean): {
  router: Record<string, number>;
  host: Record<string, number>;
} {
  if (!ipv6) return { router: {}, host: {} };
  const router = Object.fromEntries(
    Object.entries(ROUTER_SYSCTLS).filter(([k]) => k.startsWith("net.ipv6.")),
  );
  return { router, host: { ...HOST_SYSCTLS6 } };
}

/** Puts IPv6 on the client's and each node's link, with default routes through the router. */
export async function addAnycastIpv6(topo: Topology, nodes: readonly string[]): Promise<void> {
  await addSpoke6(topo, "client", "r-c", "2001:db8:8");
  for (const [i, n] of nodes.entries()) await addSpoke6(topo, n, `r-${n}`, `2001:db8:9:${i + 1}`);
}

/**
 * Node i's (0-based index) `--bgp-config` and the router's peers for it: its own AS, the router
 * as peer with BFD, `prefix`; with `ipv6` a second session over IPv6 and the IPv6 prefix.
 */
export function anycastNodeBgp(
  name: string,
  index: number,
  options: { bfd: BfdSettings; prefix: string; ipv6: boolean },
): { settings: ReturnType<typeof nodeBgpSettings>; routerPeers: RouterPeer[] } {
  const i = index + 1;
  const peer = { name, address: `10.9.${i}.2`, asn: 65100 + i };
  const settings = nodeBgpSettings(peer, `10.9.${i}.1`, options);
  const routerPeers = [peer];
  if (options.ipv6) {
    settings.prefixes.push(ANYCAST_PREFIX6);
    settings.peers.push({ ...settings.peers[0]!, address: `2001:db8:9:${i}::1` });
    routerPeers.push({ ...peer, address: anycastNode6(i) });
  }
  return { settings, routerPeers };
}
