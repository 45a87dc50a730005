/**
 * The node's uplinks when `--uplink` does not name them: the interfaces holding the node's
 * addresses (`--node-address`, in Kubernetes `status.hostIPs`), found with
 * `Deno.networkInterfaces()` (the `sys` permission; in `--netns` if given), as the LB agent finds
 * its XDP interface (node/lb/args.ts `interfaceHolding`).
 *
 * @module
 */

import { inNetns } from "../bpf/netns.ts";
import { interfaceHolding } from "../lb/args.ts";
import { isIpv4 } from "../../lib/ipv4.ts";
import { canonicalIp } from "./plan.ts";

/** The interfaces holding `addresses` (IPv4 or IPv6) among `interfaces`; throws naming one none holds. */
export function uplinksHolding(
  addresses: readonly string[],
  interfaces: readonly Deno.NetworkInterfaceInfo[],
  netns?: string,
): string[] {
  const out = addresses.map((a) => {
    if (isIpv4(a)) return interfaceHolding(a, interfaces, netns);
    const want = canonicalIp(a);
    const found = interfaces.find((i) => i.family === "IPv6" && canonicalIp(i.address) === want);
    if (found) return found.name;
    throw new Error(
      `Cannot find the interface for --node-address "${a}"${netns ? ` in netns "${netns}"` : ""}`,
    );
  });
  return [...new Set(out)];
}

/** {@link uplinksHolding} over this node's (or `netns`'s) interfaces. */
export function nodeUplinks(addresses: readonly string[], netns?: string): string[] {
  return uplinksHolding(addresses, inNetns(netns, () => Deno.networkInterfaces()), netns);
}
