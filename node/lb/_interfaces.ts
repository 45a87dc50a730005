/**
 * Finding the agent's interfaces by address (`--node-address`, `--src-addr6 auto`), from what
 * `Deno.networkInterfaces()` returns (in `--netns` if given). Shared with the node agent
 * (node/backends/uplink.ts).
 *
 * @module
 */

import { isGlobalUnicastIpv6 } from "../../lib/ipv6.ts";

/**
 * The one global-scope IPv6 address ({@link isGlobalUnicastIpv6}) of interface `ifname` among
 * `interfaces` (`Deno.networkInterfaces()`, in `--netns` if given): `--src-addr6 auto`. Throws
 * naming the interface and what it holds when it has none, or several (name one then).
 */
export function globalIpv6Of(
  ifname: string,
  interfaces: readonly Deno.NetworkInterfaceInfo[],
  netns?: string,
): string {
  const found = interfaces.filter((i) =>
    i.name === ifname && i.family === "IPv6" && isGlobalUnicastIpv6(i.address)
  ).map((i) => i.address);
  if (found.length === 1) return found[0]!;
  const held = interfaces.filter((i) => i.name === ifname).map((i) => i.address);
  throw new Error(
    `Cannot pick --src-addr6 auto on "${ifname}"${netns ? ` in netns "${netns}"` : ""}: ${
      found.length === 0
        ? `it has no global IPv6 address (holds: ${held.join(", ") || "none"})`
        : `it has ${found.length} global IPv6 addresses (${found.join(", ")}); name one`
    }`,
  );
}

/**
 * The name of the interface holding IPv4 `address` among `interfaces` (what
 * `Deno.networkInterfaces()` returns, in the agent's namespace or `--netns`). Throws naming the
 * address and every interface seen with its addresses when none holds it.
 */
export function interfaceHolding(
  address: string,
  interfaces: readonly Deno.NetworkInterfaceInfo[],
  netns?: string,
): string {
  const found = interfaces.find((i) => i.family === "IPv4" && i.address === address);
  if (found) return found.name;
  const seen = new Map<string, string[]>();
  for (const i of interfaces) seen.set(i.name, [...(seen.get(i.name) ?? []), i.address]);
  const list = [...seen].map(([name, addrs]) => `${name} (${addrs.join(", ")})`).join(", ");
  throw new Error(
    `Cannot find the interface for --node-address "${address}"${
      netns ? ` in netns "${netns}"` : ""
    }: no interface holds it; seen: ${list || "none"}`,
  );
}
