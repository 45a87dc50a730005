/**
 * BGP settings of one node: router id, local ASN, peers (with BFD timers and an optional TCP-MD5
 * password), communities added to every announced route, the announce mode, and the prefixes
 * whose /32s on `lo` may be announced. Parsed from YAML/JSON (the `--bgp-config` file,
 * node/bgp/settings.ts), from the LoadBalancerConfig's `spec.bgp` (`bgp_cluster.ts`) or built
 * in code; {@linkcode parseBgpSettings} refuses a bad node-wide setting but only *drops* a bad
 * peer, reporting it, so one typo in a peer list never stops the others from announcing.
 *
 * ```yaml
 * routerId: 10.9.1.2          # IPv4, unique per node
 * localAsn: 65101             # 1..4294967294, not 23456 (AS_TRANS)
 * announce: anycast           # anycast (pods) or lb (stateful LB nodes)
 * prefixes: [10.0.100.0/24, 2001:db8:100::/48]   # only /32s (/128s) inside these are announced
 * communities: ["65000:100", "65000:1:2"]   # standard (16:16) or large (32:32:32)
 * peers:
 *   - { address: 10.9.1.1, asn: 65000, bfd: { intervalMs: 100, multiplier: 3 }, password: s3cret }
 *   - { address: "2001:db8:9:1::1", asn: 65000 }   # an IPv6 session carries the IPv6 routes
 * ```
 *
 * @module
 */

import { isIpv4, parseIpv4Cidr } from "../../lib/ipv4.ts";
import { formatIpv6, ipv6Bytes, isIpv6, parseIpv6Cidr } from "../../lib/ipv6.ts";

/** BFD timers of one peer: sessions down after `intervalMs × multiplier` of silence. */
export interface BfdSettings {
  /** Transmit and receive interval, 10..10,000 ms. */
  readonly intervalMs: number;
  /** Missed packets before the session is down, 1..255. */
  readonly multiplier: number;
}

/** One BGP neighbour. */
export interface PeerSettings {
  /** The neighbour's IPv4 or IPv6 address; the session carries the routes of its family. */
  readonly address: string;
  /** Its AS number. */
  readonly asn: number;
  /** BFD timers; absent: no BFD with this peer (failure detection by hold time only). */
  readonly bfd?: BfdSettings;
  /** TCP-MD5 password (no quotes, backslashes or line breaks: bird's strings have no escapes). */
  readonly password?: string;
}

/** What the node's announced addresses are. */
export type AnnounceMode = "anycast" | "lb";

/** The BGP settings of one node. */
export interface BgpSettings {
  /** Router id (IPv4 form), unique among the peers. */
  readonly routerId: string;
  /** The node's AS number. */
  readonly localAsn: number;
  /** Neighbours; a node with none announces nothing (and says so). */
  readonly peers: readonly PeerSettings[];
  /** Communities added to every announced route: `A:B` (standard) or `A:B:C` (large). */
  readonly communities: readonly string[];
  /** `anycast`: addresses of services with a local ready pod; `lb`: a stateful LB node's. */
  readonly announce: AnnounceMode;
  /** Prefixes (IPv4 or IPv6) whose /32s (/128s) are announced; nothing outside them ever is. */
  readonly prefixes: readonly string[];
}

/** A setting that was refused; `path` names it (`$.peers[1].asn`). */
export interface BgpProblem {
  readonly path: string;
  readonly message: string;
  /** The peer's address when the problem dropped a peer. */
  readonly peer?: string;
}

/** Thrown when a node-wide setting is bad (nothing could be announced correctly). */
export class BgpSettingsError extends Error {
  override name = "BgpSettingsError";
}

/** BFD 100 ms × 3: a silent peer is down after 300 ms. */
export const DEFAULT_BFD: BfdSettings = { intervalMs: 100, multiplier: 3 };

const AS_TRANS = 23456;
const ASN_MAX = 4294967294;

/** Why `asn` is not a usable AS number, or null. */
export function asnProblem(asn: unknown): string | null {
  if (typeof asn !== "number" || !Number.isInteger(asn) || asn < 1 || asn > ASN_MAX) {
    return `AS number ${JSON.stringify(asn)} is not an integer in 1..${ASN_MAX}`;
  }
  if (asn === AS_TRANS) return `AS number ${asn} is AS_TRANS, reserved (RFC 6793)`;
  return null;
}

/** Why `text` is not a community bird can add, or null. */
export function communityProblem(text: unknown): string | null {
  const parts = typeof text === "string" ? text.split(":") : [];
  const max = parts.length === 2 ? 65535 : 4294967295;
  if ((parts.length !== 2 && parts.length !== 3) || !parts.every((p) => /^\d{1,10}$/.test(p))) {
    return `community ${JSON.stringify(text)} is not A:B or A:B:C`;
  }
  if (parts.some((p) => Number(p) > max)) {
    return `community ${JSON.stringify(text)} has a part above ${max}`;
  }
  return null;
}

function peerProblem(raw: unknown, path: string): BgpProblem | PeerSettings {
  const o = (raw ?? {}) as Record<string, unknown>;
  const address = typeof o.address === "string" ? o.address : JSON.stringify(o.address);
  const bad = (field: string, message: string): BgpProblem => ({
    path: `${path}.${field}`,
    message: `peer ${JSON.stringify(address)}: ${message}`,
    peer: address,
  });
  if (typeof raw !== "object" || raw === null) return bad("", "expected an object");
  if (typeof o.address !== "string" || !(isIpv4(o.address) || isIpv6(o.address))) {
    return bad("address", `address ${JSON.stringify(o.address)} is not an IPv4 or IPv6 address`);
  }
  const asn = asnProblem(o.asn);
  if (asn) return bad("asn", asn);
  let bfd: BfdSettings | undefined;
  if (o.bfd !== undefined && o.bfd !== false) {
    const b = (o.bfd === true ? DEFAULT_BFD : o.bfd) as Record<string, unknown>;
    const intervalMs = b.intervalMs ?? DEFAULT_BFD.intervalMs;
    const multiplier = b.multiplier ?? DEFAULT_BFD.multiplier;
    if (
      typeof intervalMs !== "number" || !Number.isInteger(intervalMs) || intervalMs < 10 ||
      intervalMs > 10_000
    ) {
      return bad(
        "bfd.intervalMs",
        `BFD interval ${JSON.stringify(intervalMs)} ms is not 10..10000`,
      );
    }
    if (
      typeof multiplier !== "number" || !Number.isInteger(multiplier) || multiplier < 1 ||
      multiplier > 255
    ) {
      return bad("bfd.multiplier", `BFD multiplier ${JSON.stringify(multiplier)} is not 1..255`);
    }
    bfd = { intervalMs, multiplier };
  }
  if (o.password !== undefined) {
    if (typeof o.password !== "string" || o.password === "" || /["\\\n\r]/.test(o.password)) {
      return bad(
        "password",
        "password must be a non-empty string without quotes, backslashes or line breaks",
      );
    }
  }
  return {
    // IPv6 in RFC 5952 form, so one peer written two ways is still "listed twice".
    address: isIpv6(o.address) ? formatIpv6(ipv6Bytes(o.address)) : o.address,
    asn: o.asn as number,
    ...(bfd ? { bfd } : {}),
    ...(typeof o.password === "string" ? { password: o.password } : {}),
  };
}

/**
 * Validates settings. Node-wide errors throw {@linkcode BgpSettingsError}; a bad peer (bad
 * address, ASN out of range, bad BFD timers, a peer listed twice, a peer at the router id) is
 * left out and returned in `problems`, and the rest is used.
 *
 * @example
 * ```ts
 * import { parseBgpSettings } from "./bgp_settings.ts";
 * const { settings, problems } = parseBgpSettings({
 *   routerId: "10.9.1.2", localAsn: 65101, prefixes: ["10.0.100.0/24"],
 *   peers: [{ address: "10.9.1.1", asn: 65000 }, { address: "10.9.1.300", asn: 65000 }],
 * });
 * if (settings.peers.length !== 1 || problems[0]?.peer !== "10.9.1.300") throw new Error();
 * ```
 */
export function parseBgpSettings(raw: unknown): { settings: BgpSettings; problems: BgpProblem[] } {
  const o = (raw ?? {}) as Record<string, unknown>;
  const fail = (path: string, message: string): never => {
    throw new BgpSettingsError(`Invalid BGP settings at ${path}: ${message}`);
  };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    fail("$", "expected an object");
  }
  if (typeof o.routerId !== "string" || !isIpv4(o.routerId)) {
    fail("$.routerId", `${JSON.stringify(o.routerId)} is not an IPv4 address`);
  }
  const asn = asnProblem(o.localAsn);
  if (asn) fail("$.localAsn", asn);
  const announce = o.announce ?? "anycast";
  if (announce !== "anycast" && announce !== "lb") {
    fail("$.announce", `${JSON.stringify(announce)} is not "anycast" or "lb"`);
  }
  const list = (v: unknown, path: string): unknown[] =>
    v === undefined ? [] : Array.isArray(v) ? v : fail(path, "expected a list");
  const prefixes = list(o.prefixes, "$.prefixes").map((p, i) => {
    try {
      if (String(p).includes(":")) parseIpv6Cidr(String(p));
      else parseIpv4Cidr(String(p));
    } catch (e) {
      fail(`$.prefixes[${i}]`, (e as Error).message);
    }
    return String(p);
  });
  if (prefixes.length === 0) {
    fail("$.prefixes", "at least one prefix is needed (nothing would be announced)");
  }
  const communities = list(o.communities, "$.communities").map((c, i) => {
    const why = communityProblem(c);
    if (why) fail(`$.communities[${i}]`, why);
    return c as string;
  });
  const problems: BgpProblem[] = [];
  const peers: PeerSettings[] = [];
  const seen = new Set<string>();
  list(o.peers, "$.peers").forEach((p, i) => {
    const r = peerProblem(p, `$.peers[${i}]`);
    if ("path" in r) return problems.push(r);
    if (seen.has(r.address)) {
      return problems.push({
        path: `$.peers[${i}].address`,
        message: `peer "${r.address}": listed twice (the first is used)`,
        peer: r.address,
      });
    }
    if (r.address === o.routerId) {
      return problems.push({
        path: `$.peers[${i}].address`,
        message: `peer "${r.address}": is this node's own router id`,
        peer: r.address,
      });
    }
    seen.add(r.address);
    peers.push(r);
  });
  return {
    settings: {
      routerId: o.routerId as string,
      localAsn: o.localAsn as number,
      peers,
      communities,
      announce: announce as AnnounceMode,
      prefixes,
    },
    problems,
  };
}
