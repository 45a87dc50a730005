/**
 * bird2 configuration of a node, generated from {@linkcode BgpSettings}.
 *
 * How addresses are gated (announce mode `anycast`): `protocol direct` watches `lo` and an
 * export filter passes only /32s (IPv6: /128s, filter `hf_export6`) inside the settings' prefixes. The agent assumes an address by putting it on `lo` and
 * forfeits it by removing it; bird sees the netlink event and updates its peers in under a
 * millisecond (docs/anycast.md, shared FINDINGS). `birdc configure` is needed only when the
 * settings change (peers, communities, prefixes), never per address: it is about 3× slower.
 *
 * In announce mode `lb` (stateful LB nodes) the agent names the addresses itself
 * ({@linkcode BirdConfigOptions.announced}, static routes) and changes them with
 * `birdc configure`: an LB node announces only once ready and withdraws first on shutdown,
 * which a /32 on `lo` cannot express (the XDP datapath needs no local address).
 *
 * Protocol names are derived from the peer address, so a reload that adds or removes a peer
 * leaves the other sessions up (bird restarts only protocols whose options changed).
 *
 * IPv6: each peer's session carries the routes of its own family — an IPv4 neighbour the `ipv4`
 * channel, an IPv6 neighbour the `ipv6` channel — rather than MP-BGP with both channels over one
 * IPv4 session. An IPv6 route over an IPv4 session needs an IPv6 next hop configured by hand
 * (bird would otherwise send an IPv4-mapped one no router can resolve), one more per-node setting
 * to get wrong; a session per family needs none (the next hop is the session's own address), and
 * each family fails and is detected (BFD) on its own path. Routers that peer dual stack expect it.
 * With no IPv6 prefix and no IPv6 peer the config is exactly the IPv4-only one.
 *
 * @module
 */

import { isIpv4 } from "../../lib/ipv4.ts";
import { isIpv6 } from "../../lib/ipv6.ts";
import type { BgpSettings, PeerSettings } from "./settings.ts";

/** Options of {@linkcode renderBirdConfig}. */
export interface BirdConfigOptions {
  /** bird's log file (default: syslog-free stderr of the daemon, warnings and worse). */
  readonly logFile?: string;
  /**
   * Announce mode `lb` only: the addresses to announce now (the agent's, after `/readyz`).
   * They are static routes in bird alone (blackhole, never in the node's kernel); `lo` is not
   * watched in this mode, so an address on `lo` is never announced by accident.
   */
  readonly announced?: readonly string[];
}

/** The bird protocol name of a peer: `hf_peer_10_9_1_1`, `hf_peer_2001_db8_9_1__1`. */
export function peerProtocolName(peer: Pick<PeerSettings, "address">): string {
  return `hf_peer_${peer.address.replaceAll(/[.:]/g, "_")}`;
}

/** Whether a prefix or address is IPv6 (the settings are validated: IPv6 has a colon). */
const isV6 = (text: string) => text.includes(":");

function communityStatement(c: string): string {
  const parts = c.split(":");
  return parts.length === 2
    ? `bgp_community.add((${parts[0]}, ${parts[1]}));`
    : `bgp_large_community.add((${parts[0]}, ${parts[1]}, ${parts[2]}));`;
}

function peerBlock(s: BgpSettings, p: PeerSettings): string[] {
  const lines = [
    `protocol bgp ${peerProtocolName(p)} {`,
    `  description "peer ${p.address} AS${p.asn}";`,
    `  local as ${s.localAsn};`,
    `  neighbor ${p.address} as ${p.asn};`,
    // First session in ~1 s instead of ~4 s; after an error retry within seconds, not minutes.
    `  connect delay time 1;`,
    `  error wait time 1, 10;`,
  ];
  if (p.password !== undefined) lines.push(`  password "${p.password}";`);
  if (p.bfd) {
    lines.push(
      `  bfd { min rx interval ${p.bfd.intervalMs} ms; min tx interval ${p.bfd.intervalMs} ms;` +
        ` multiplier ${p.bfd.multiplier}; };`,
    );
  }
  lines.push(
    isV6(p.address)
      ? `  ipv6 { import none; export filter hf_export6; };`
      : `  ipv4 { import none; export filter hf_export; };`,
    `}`,
  );
  return lines;
}

/** The export filter of one family: only host routes inside `prefixes`, with the communities. */
function exportFilter(name: string, prefixes: readonly string[], communities: readonly string[]) {
  if (prefixes.length === 0) return [`filter ${name} {`, `  reject;`, `}`];
  const host = prefixes.some(isV6) ? 128 : 32;
  return [
    `filter ${name} {`,
    `  if net ~ [ ${prefixes.map((p) => `${p}{${host},${host}}`).join(", ")} ] then {`,
    ...communities.map((c) => `    ${communityStatement(c)}`),
    `    accept;`,
    `  }`,
    `  reject;`,
    `}`,
  ];
}

/**
 * The whole bird.conf for a node.
 *
 * @throws {TypeError} when an announced address is not IPv4 or IPv6 (bird would refuse the file).
 *
 * @example
 * ```ts
 * import { renderBirdConfig } from "./bird_config.ts";
 * const conf = renderBirdConfig({
 *   routerId: "10.9.1.2", localAsn: 65101, announce: "anycast", communities: [],
 *   prefixes: ["10.0.100.0/24"], peers: [{ address: "10.9.1.1", asn: 65000 }],
 * });
 * if (!conf.includes("neighbor 10.9.1.1 as 65000;")) throw new Error(conf);
 * if (!conf.includes("10.0.100.0/24{32,32}")) throw new Error(conf);
 * ```
 */
export function renderBirdConfig(settings: BgpSettings, options: BirdConfigOptions = {}): string {
  const s = settings;
  const announced = options.announced ?? [];
  const bad = announced.find((a) => !isIpv4(a) && !isIpv6(a));
  if (bad !== undefined) {
    throw new TypeError(`Cannot announce ${JSON.stringify(bad)}: not an IPv4 or IPv6 address`);
  }
  const prefixes4 = s.prefixes.filter((p) => !isV6(p));
  const prefixes6 = s.prefixes.filter(isV6);
  // The IPv6 parts appear only when something IPv6 is configured (an IPv4-only file is unchanged).
  const dual = prefixes6.length > 0 || s.peers.some((p) => isV6(p.address));
  const log = options.logFile === undefined
    ? `log stderr { warning, error, fatal, bug };`
    : `log "${options.logFile}" all;`;
  const lines = [
    `# Generated by Holdfast node/bgp (announce mode ${s.announce}); do not edit.`,
    log,
    `router id ${s.routerId};`,
    ``,
    `protocol device { scan time 10; }`,
    ``,
    ...(s.announce === "lb"
      ? [
        `# The LB addresses the agent announces (after /readyz); the export filter still gates.`,
        `protocol static hf_lb {`,
        `  ipv4;`,
        ...announced.filter((a) => !isV6(a)).map((a) => `  route ${a}/32 blackhole;`),
        `}`,
        ...(dual
          ? [
            `protocol static hf_lb6 {`,
            `  ipv6;`,
            ...announced.filter(isV6).map((a) => `  route ${a}/128 blackhole;`),
            `}`,
          ]
          : []),
      ]
      : [
        `# Addresses the agent holds on lo; the export filter is the only gate.`,
        `protocol direct hf_lo { ipv4; interface "lo"; }`,
        ...(dual ? [`protocol direct hf_lo6 { ipv6; interface "lo"; }`] : []),
      ]),
    ``,
    ...exportFilter("hf_export", prefixes4, s.communities),
    ...(dual ? [``, ...exportFilter("hf_export6", prefixes6, s.communities)] : []),
  ];
  if (s.peers.some((p) => p.bfd)) lines.push(``, `protocol bfd hf_bfd { }`);
  for (const p of s.peers) lines.push(``, ...peerBlock(s, p));
  return lines.join("\n") + "\n";
}
