/**
 * The `bgp` section of an egress NAT's config: how the owner of a floating address announces its
 * /32 (an IPv6 address: /128) to the routers (node/egress/_bgp.ts, docs/egress.md "BGP mode").
 * Every NAT pod of the egress NAT uses the same section; its router id is its own peer address.
 *
 * ```json
 * "bgp": {
 *   "localAsn": 65100,
 *   "peers": [{ "address": "198.18.0.1", "asn": 65000, "bfd": { "intervalMs": 100, "multiplier": 3 } }],
 *   "communities": ["65000:100"]
 * }
 * ```
 *
 * Unlike a node's `--bgp-config` (which leaves a bad peer out and announces to the others), a bad
 * value here refuses the whole config, naming the field (`bgp.peers[0].asn`): an egress NAT's peers
 * are few and all needed, and the previous valid config keeps running.
 *
 * @module
 */

import {
  asnProblem,
  type BgpSettings,
  communityProblem,
  parseBgpSettings,
  type PeerSettings,
} from "../model/bgp_settings.ts";

/** The validated `bgp` section. */
export interface EgressBgp {
  /** The AS of every NAT pod of this egress NAT. */
  readonly localAsn: number;
  /** The routers every NAT pod peers with (eBGP or iBGP, optional BFD and TCP-MD5 password). */
  readonly peers: readonly PeerSettings[];
  /** Communities added to every announced floating address. */
  readonly communities: readonly string[];
}

/** A bad `bgp` section: `field` is its JSON path (`bgp.peers[1].address`). */
export interface EgressBgpProblem {
  readonly field: string;
  readonly message: string;
}

const KNOWN = new Set(["localAsn", "peers", "communities"]);

/**
 * Validates a `bgp` section; returns it or the first problem (field and why).
 *
 * @example
 * ```ts
 * import { parseEgressBgp } from "./bgp_config.ts";
 * const ok = parseEgressBgp({ localAsn: 65100, peers: [{ address: "198.18.0.1", asn: 65000 }] });
 * if (!("peers" in ok) || ok.peers[0]?.asn !== 65000) throw new Error();
 * const bad = parseEgressBgp({ localAsn: 65100, peers: [{ address: "198.18.0.1", asn: 0 }] });
 * if (!("field" in bad) || bad.field !== "bgp.peers[0].asn") throw new Error(JSON.stringify(bad));
 * ```
 */
export function parseEgressBgp(raw: unknown): EgressBgp | EgressBgpProblem {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return { field: "bgp", message: "expected an object" };
  }
  const o = raw as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!KNOWN.has(key)) return { field: `bgp.${key}`, message: "unknown field" };
  }
  const asn = asnProblem(o.localAsn);
  if (asn) return { field: "bgp.localAsn", message: asn };
  if (!Array.isArray(o.peers) || o.peers.length === 0) {
    return { field: "bgp.peers", message: "expected an array of at least 1 peer" };
  }
  const communities = o.communities ?? [];
  if (!Array.isArray(communities)) return { field: "bgp.communities", message: "expected a list" };
  for (const [i, c] of communities.entries()) {
    const why = communityProblem(c);
    if (why) return { field: `bgp.communities[${i}]`, message: why };
  }
  // The peers' own checks are the node driver's (address, ASN, BFD timers, password, twice).
  const { settings, problems } = parseBgpSettings({
    routerId: "0.0.0.0",
    localAsn: o.localAsn,
    prefixes: ["0.0.0.0/32"],
    peers: o.peers,
  });
  const first = problems[0];
  if (first) {
    return {
      field: first.path.replace(/^\$\./, "bgp.").replace(/\.$/, ""),
      message: first.message,
    };
  }
  return { localAsn: o.localAsn as number, peers: settings.peers, communities: communities };
}

/**
 * The bird settings of one NAT pod: router id its own peer address, announce mode `lb` (static
 * routes the agent names: only the addresses it owns), prefixes exactly the floating addresses'
 * host routes, so nothing else is ever announced.
 *
 * @example
 * ```ts
 * import { egressBirdSettings } from "./bgp_config.ts";
 * const s = egressBirdSettings({ localAsn: 65100, peers: [], communities: [] }, "10.8.0.21",
 *   ["198.18.0.100", "2001:db8::100"]);
 * if (s.prefixes.join() !== "198.18.0.100/32,2001:db8::100/128") throw new Error(s.prefixes.join());
 * ```
 */
export function egressBirdSettings(
  bgp: EgressBgp,
  routerId: string,
  floating: readonly string[],
): BgpSettings {
  return {
    routerId,
    localAsn: bgp.localAsn,
    peers: bgp.peers,
    communities: bgp.communities,
    announce: "lb",
    prefixes: floating.map((a) => a.includes(":") ? `${a}/128` : `${a}/32`),
  };
}
