import { parseIpv4 } from "../../lib/ipv4.ts";
/**
 * Which LB IPs an LB node's flow-sync agent follows: its config's frontend addresses.
 *
 * @module
 */

/** The part of a services config the followed LB IPs come from (e.g. a `FileConfig`). */
export interface FrontendsView {
  readonly services: readonly {
    readonly frontends: readonly { readonly address: string }[];
  }[];
}

/**
 * The LB IPs (dotted, sorted, unique) to follow: every frontend address's IP in `config`, united
 * with `extra` (e.g. `--vip` flags). A null config (none loaded) gives just `extra`. Throws a
 * `TypeError` naming the address when an IP is not IPv4 (the datapath is IPv4 only).
 *
 * @example
 * ```ts
 * import { followedVips } from "./config_vips.ts";
 * const config = {
 *   services: [
 *     { frontends: [{ address: "10.0.100.2:80/TCP" }, { address: "10.0.100.2:443/TCP" }] },
 *     { frontends: [{ address: "10.0.100.1:53/UDP" }] },
 *   ],
 * };
 * const vips = followedVips(config, ["10.0.100.9"]);
 * if (vips.join() !== "10.0.100.1,10.0.100.2,10.0.100.9") throw new Error(vips.join());
 * ```
 */
export function followedVips(config: FrontendsView | null, extra: readonly string[]): string[] {
  const byAddr = new Map<number, string>();
  const add = (ip: string, from: string) => {
    try {
      byAddr.set(parseIpv4(ip), ip);
    } catch (err) {
      throw new TypeError(`Cannot follow LB IP of ${from}: not an IPv4 address`, { cause: err });
    }
  };
  for (const v of extra) add(v, `"--vip ${v}"`);
  for (const s of config?.services ?? []) {
    for (const f of s.frontends) {
      if (f.address.startsWith("[")) continue; // IPv6 frontends: their flows stay local
      add(f.address.split(":")[0]!, `frontend "${f.address}"`);
    }
  }
  return [...byAddr].sort((a, b) => a[0] - b[0]).map(([, ip]) => ip);
}
