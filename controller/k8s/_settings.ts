/**
 * The model's settings from the cluster: `encapPort` of the LoadBalancerConfig `default`, and
 * `lbNodes`, the names of the Nodes its `lbNodeSelector` selects.
 *
 * Choices (see `controller/model/settings.ts` for how agents read them): no config, no selector,
 * or a selector the API server would reject → no `lbNodes` (every node serves); a selector that
 * matches none of the Nodes → no `lbNodes` either, with a problem to report (a selector that
 * empties every node is far more likely a mistake than the operator's wish to stop all traffic). An invalid
 * `encapPort` is left out (agents keep theirs); `readConfig` reports it.
 *
 * `bgp` is `spec.bgp` for the LB nodes (`main.ts agent --model redis`): the peers the controller
 * accepts (refused ones are on the config's `PeersAccepted` condition, `readConfig`), each with
 * the names of the Nodes its `nodeSelector` selects — resolved here, since the controller
 * watches Nodes and agents do not. A bad cluster-wide field publishes `{ refused }` (agents keep
 * what they run, even across a controller restart).
 *
 * @module
 */

import {
  compileLabelSelector,
  formatLabelSelector,
  type LabelSelector,
} from "../../lib/label_selector.ts";
import type { ModelBgp, ModelBgpPeer, ModelSettings } from "../model/settings.ts";
import { checkClusterBgp, nodeBgpSettings } from "../model/bgp_cluster.ts";
import type { KubeObject } from "./objects.ts";

/** The settings to publish, and why a selector was not applied (undefined: it was, or none). */
export interface DerivedSettings {
  readonly settings: ModelSettings;
  readonly problem?: string;
}

/** The settings `config` (the LoadBalancerConfig `default`, if any) and `nodes` give. */
export function deriveSettings(
  config: KubeObject | undefined,
  nodes: readonly KubeObject[],
): DerivedSettings {
  const spec = config?.spec ?? {};
  const p = spec.encapPort;
  const settings: { encapPort?: number; lbNodes?: string[]; bgp?: ModelBgp } = {};
  if (Number.isInteger(p) && p >= 1 && p <= 65535) settings.encapPort = p;
  if (spec.bgp !== undefined && spec.bgp !== null) settings.bgp = modelBgp(spec.bgp, nodes);
  const selector: LabelSelector | undefined = spec.lbNodeSelector ?? undefined;
  if (selector === undefined) return { settings };
  let match;
  try {
    match = compileLabelSelector(selector);
  } catch (err) {
    return { settings, problem: `spec.lbNodeSelector: ${(err as Error).message}` };
  }
  const names = nodes.filter((n) => match(n.metadata?.labels))
    .map((n) => n.metadata?.name ?? "").filter((n) => n !== "").sort();
  if (names.length === 0) {
    // No Node at all (none seen yet, or not allowed to list them): nothing to report.
    if (nodes.length === 0) return { settings };
    return {
      settings,
      problem: `spec.lbNodeSelector "${
        formatLabelSelector(selector)
      }" selects none of the ${nodes.length} nodes; every node serves until it selects one`,
    };
  }
  settings.lbNodes = names;
  return { settings };
}

/** A router id no peer has: the section is read for no node in particular. */
const NO_NODE = "0.0.0.0";

/**
 * `spec.bgp` as the model carries it: the cluster-wide fields, the accepted peers (without
 * `nodeSelector`), each with `nodes`, the sorted names of `nodes` its selector selects (absent
 * without a selector: every node, including those the controller has not seen).
 */
export function modelBgp(bgp: unknown, nodes: readonly KubeObject[]): ModelBgp {
  const check = checkClusterBgp(bgp);
  if (check.error !== undefined) return { refused: check.error };
  const raw = (bgp as { peers?: unknown }).peers;
  const entries = Array.isArray(raw) ? raw as Record<string, unknown>[] : [];
  const refused = new Set(check.peers.map((p) => /peers\[(\d+)\]/.exec(p.path)?.[1]));
  // Every accepted peer: selectors dropped (each is resolved below), refused ones as holes.
  const all = nodeBgpSettings({
    ...(bgp as Record<string, unknown>),
    peers: entries.map((e, i) => {
      if (refused.has(String(i)) || typeof e !== "object" || e === null) return null;
      const { nodeSelector: _, ...peer } = e;
      return peer;
    }),
  }, { routerId: NO_NODE, labels: {} }).settings;
  const peers = all.peers.map((peer): ModelBgpPeer => {
    const entry = entries.find((e) => e?.address === peer.address);
    const selector = entry?.nodeSelector as LabelSelector | undefined | null;
    if (selector === undefined || selector === null) return peer;
    const match = compileLabelSelector(selector); // refused above when it does not compile
    const names = nodes.filter((n) => match(n.metadata?.labels))
      .map((n) => n.metadata?.name ?? "").filter((n) => n !== "").sort();
    return { ...peer, nodes: names };
  });
  return {
    localAsn: all.localAsn,
    prefixes: all.prefixes,
    communities: all.communities,
    peers,
  };
}

/** `s` for a log line: BGP peers' passwords replaced by `"<redacted>"`. */
export function settingsForLog(s: ModelSettings): Record<string, unknown> {
  const bgp = s.bgp;
  if (bgp === undefined || "refused" in bgp) return { ...s };
  const peers = bgp.peers.map((p) =>
    p.password === undefined ? p : { ...p, password: "<redacted>" }
  );
  return { ...s, bgp: { ...bgp, peers } };
}
