/**
 * Which LB IPs an LB node's flow-sync agent follows: its config's frontend addresses, IPv4 and
 * IPv6.
 *
 * @module
 */

import { formatFlowAddress } from "../../bpf/flow.ts";
import { flowAddress } from "./field.ts";

/** The part of a services config the followed LB IPs come from (e.g. a `FileConfig`). */
export interface FrontendsView {
  readonly services: readonly {
    readonly frontends: readonly { readonly address: string }[];
  }[];
}

/**
 * The LB IPs to follow — every frontend address's IP in `config`, united with `extra` (e.g.
 * `--vip` flags) — unique, IPv4 first (dotted, by address) then IPv6 (RFC 5952 text, sorted). A
 * null config (none loaded) gives just `extra`. Throws a `TypeError` naming the address when an
 * IP is neither IPv4 nor IPv6.
 *
 * @example
 * ```ts
 * import { followedVips } from "./config_vips.ts";
 * const config = {
 *   services: [
 *     { frontends: [{ address: "10.0.100.2:80/TCP" }, { address: "10.0.100.2:443/TCP" }] },
 *     { frontends: [{ address: "10.0.100.1:53/UDP" }, { address: "[2001:db8:100::1]:80/TCP" }] },
 *   ],
 * };
 * const vips = followedVips(config, ["10.0.100.9"]);
 * const want = "10.0.100.1,10.0.100.2,10.0.100.9,2001:db8:100::1";
 * if (vips.join() !== want) throw new Error(vips.join());
 * ```
 */
export function followedVips(config: FrontendsView | null, extra: readonly string[]): string[] {
  const byAddr = new Map<number | string, string>();
  const add = (ip: string, from: string) => {
    try {
      const addr = flowAddress(ip);
      byAddr.set(addr, formatFlowAddress(addr));
    } catch (err) {
      throw new TypeError(`Cannot follow LB IP of ${from}: not an IPv4 or IPv6 address`, {
        cause: err,
      });
    }
  };
  for (const v of extra) add(v, `"--vip ${v}"`);
  for (const s of config?.services ?? []) {
    for (const f of s.frontends) {
      const a = f.address;
      const ip = a.startsWith("[") ? a.slice(1, a.indexOf("]")) : a.split(":")[0]!;
      add(ip, `frontend "${a}"`);
    }
  }
  const v4 = [...byAddr].filter(([a]) => typeof a === "number") as [number, string][];
  const v6 = [...byAddr.values()].filter((ip) => ip.includes(":"));
  return [...v4.sort((a, b) => a[0] - b[0]).map(([, ip]) => ip), ...v6.sort()];
}
