/**
 * The cluster's BGP settings: the LoadBalancerConfig's `spec.bgp` (k8s/crds), read by the
 * controller (which reports refused peers on the config's `PeersAccepted` condition and as an
 * Event) and by every anycast agent (`main.ts anycast --kube`, node/anycast/kube_source.ts),
 * which turns it into its own node's {@linkcode BgpSettings}.
 *
 * ```yaml
 * spec:
 *   mode: Anycast
 *   bgp:
 *     localAsn: 65100               # every node's AS (routers merge equal paths from several)
 *     prefixes: [10.0.100.0/24]     # only /32s inside these are ever announced
 *     communities: ["65000:100"]
 *     peers:
 *       - address: 10.9.1.1
 *         asn: 65000
 *         bfd: { intervalMs: 100, multiplier: 3 }
 *         nodeSelector: { matchLabels: { rack: r1 } }   # absent: every node peers with it
 * ```
 *
 * Per node: the router id is the node's address (its Node's InternalIP), the local ASN the
 * cluster's, and its peers those whose `nodeSelector` selects its Node. A bad peer (address, ASN
 * AS_TRANS, BFD timers, listed twice, a bad `nodeSelector`) is left out and named; the other
 * peers keep announcing. A bad cluster-wide field (localAsn, prefixes, communities) refuses the
 * whole section: agents keep the settings they run.
 *
 * @module
 */

import { compileLabelSelector, type LabelSelector } from "../../lib/label_selector.ts";
import {
  type AnnounceMode,
  type BgpProblem,
  type BgpSettings,
  BgpSettingsError,
  parseBgpSettings,
} from "./bgp_settings.ts";

/** The path prefix of `spec.bgp`'s fields in problems (`spec.bgp.peers[1].asn`). */
const PATH = "spec.bgp";

/** A router id that no peer has, for checking the section without a node. */
const NO_NODE = "0.0.0.0";

function rename(p: BgpProblem): BgpProblem {
  return { ...p, path: p.path.replace(/^\$/, PATH) };
}

function peersOf(bgp: Record<string, unknown>): unknown[] {
  return Array.isArray(bgp.peers) ? bgp.peers : [];
}

function selectorProblems(bgp: Record<string, unknown>): Map<number, BgpProblem> {
  const out = new Map<number, BgpProblem>();
  peersOf(bgp).forEach((p, i) => {
    const sel = (p as { nodeSelector?: LabelSelector } | null)?.nodeSelector;
    if (sel === undefined || sel === null) return;
    try {
      compileLabelSelector(sel);
    } catch (e) {
      const address = String((p as { address?: unknown }).address);
      out.set(i, {
        path: `${PATH}.peers[${i}].nodeSelector`,
        message: `peer ${JSON.stringify(address)}: ${(e as Error).message}`,
        peer: address,
      });
    }
  });
  return out;
}

/**
 * Checks `spec.bgp` as a whole: `error` for a bad cluster-wide field (nothing applies), else
 * the refused peers.
 *
 * @example
 * ```ts
 * import { checkClusterBgp } from "./bgp_cluster.ts";
 * const r = checkClusterBgp({
 *   localAsn: 65100, prefixes: ["10.0.100.0/24"],
 *   peers: [{ address: "10.9.1.1", asn: 65000 }, { address: "10.9.1.300", asn: 65000 }],
 * });
 * if (r.error !== undefined || r.peers[0]?.peer !== "10.9.1.300") throw new Error();
 * ```
 */
export function checkClusterBgp(bgp: unknown): { error?: string; peers: BgpProblem[] } {
  try {
    return { peers: nodeBgpSettings(bgp, { routerId: NO_NODE, labels: {} }).problems };
  } catch (e) {
    if (!(e instanceof BgpSettingsError)) throw e;
    return { error: e.message, peers: [] };
  }
}

/** The node a cluster's settings are read for. */
export interface BgpNode {
  /** Its router id: the node's IPv4 address. */
  readonly routerId: string;
  /** Its Node's labels (peers' `nodeSelector`). */
  readonly labels: Readonly<Record<string, string>>;
  /** `anycast` (default) or `lb`. */
  readonly announce?: AnnounceMode;
}

/**
 * One node's settings from `spec.bgp`: the cluster's ASN, prefixes and communities, its router
 * id, and the peers that select it. Refused peers are in `problems` (paths under `spec.bgp`).
 *
 * @throws {BgpSettingsError} for a bad cluster-wide field or router id.
 */
export function nodeBgpSettings(
  bgp: unknown,
  node: BgpNode,
): { settings: BgpSettings; problems: BgpProblem[] } {
  if (typeof bgp !== "object" || bgp === null || Array.isArray(bgp)) {
    throw new BgpSettingsError(`Invalid BGP settings at ${PATH}: expected an object`);
  }
  const o = bgp as Record<string, unknown>;
  const badSelectors = selectorProblems(o);
  const raw = peersOf(o);
  let parsed;
  try {
    parsed = parseBgpSettings({
      routerId: node.routerId,
      localAsn: o.localAsn,
      prefixes: o.prefixes,
      communities: o.communities,
      announce: node.announce ?? "anycast",
      // A peer with a bad selector is replaced by a hole so the indices stay the same.
      peers: raw.map((p, i) => badSelectors.has(i) ? null : p),
    });
  } catch (e) {
    if (!(e instanceof BgpSettingsError)) throw e;
    throw new BgpSettingsError(e.message.replace(" at $", ` at ${PATH}`), { cause: e });
  }
  const problems = [
    ...badSelectors.values(),
    ...parsed.problems.filter((p) => !badSelectors.has(indexOf(p.path))).map(rename),
  ].sort((a, b) => indexOf(a.path) - indexOf(b.path));
  const selects = (address: string): boolean => {
    const entry = raw.find((p) => (p as { address?: unknown } | null)?.address === address);
    const sel = (entry as { nodeSelector?: LabelSelector } | undefined)?.nodeSelector;
    return sel === undefined || sel === null || compileLabelSelector(sel)(node.labels);
  };
  return {
    settings: {
      ...parsed.settings,
      peers: parsed.settings.peers.filter((p) => selects(p.address)),
    },
    problems,
  };
}

function indexOf(path: string): number {
  const m = /peers\[(\d+)\]/.exec(path);
  return m ? Number(m[1]) : -1;
}
