/**
 * Model-level settings (`hf:model:{m}:settings`): what every agent following the model applies
 * besides the services — the encapsulation port and which nodes act as LB nodes. The controller
 * derives them from the LoadBalancerConfig `default` and the cluster's Nodes
 * (`controller/k8s/_settings.ts`); agents read them with the model (`RedisModelSource`).
 *
 * The safe reading, in one place ({@linkcode selectsNode}): a missing `lbNodes` (no selector, no
 * settings in the model, an old controller) and an empty one (a selector that matches no Node, or
 * a bug) both mean "every node is an LB node". Only a non-empty list that leaves a node out makes
 * it withdraw its frontends: a missing or broken list can never empty every node at once.
 *
 * BGP (`bgp`): the LoadBalancerConfig's `spec.bgp` as the controller checked it (refused peers
 * already left out and reported there), each peer's `nodeSelector` resolved by the controller
 * into the names of the Nodes it selects (`nodes`; absent: every node). An LB-node agent
 * (`main.ts agent --model redis`) turns it into its own settings with {@linkcode lbNodeBgpSettings}:
 * router id its node address, the peers that list it. A section the controller refused as a
 * whole is published as `{ refused: why }`: agents keep the BGP settings they run. No `bgp`: no
 * bird.
 *
 * @module
 */

import {
  type BgpProblem,
  type BgpSettings,
  parseBgpSettings,
  type PeerSettings,
} from "./bgp_settings.ts";

/** A peer of the model's BGP section: who peers with it is resolved to node names. */
export interface ModelBgpPeer extends PeerSettings {
  /** Names of the Nodes its `nodeSelector` selects, sorted; absent: every node peers with it. */
  readonly nodes?: readonly string[];
}

/** The cluster's BGP section in the model (see the module doc). */
export type ModelBgp =
  | {
    readonly localAsn: number;
    readonly prefixes: readonly string[];
    readonly communities: readonly string[];
    readonly peers: readonly ModelBgpPeer[];
  }
  | {
    /** Why the controller refused `spec.bgp` as a whole: agents keep what they run. */
    readonly refused: string;
  };

/** The model's settings. Every field is optional: absent means "the agents' own default". */
export interface ModelSettings {
  /** UDP port of the encapsulation from LB nodes to backends (an agent's `--encap-port` wins). */
  readonly encapPort?: number;
  /** Nodes selected by `lbNodeSelector`, sorted; absent or empty: every node. */
  readonly lbNodes?: readonly string[];
  /** The cluster's BGP section; absent: LB nodes run no bird (unless `--bgp-config`). */
  readonly bgp?: ModelBgp;
}

/**
 * One LB node's BGP settings from the model's section: router id `routerId` (its node
 * address), announce mode `lb`, the peers that list `nodeName` or every node. Validated again
 * (the model is read from Redis): a bad peer is left out and returned in `problems`.
 *
 * @throws {BgpSettingsError} for a bad cluster-wide field or router id.
 */
export function lbNodeBgpSettings(
  bgp: Exclude<ModelBgp, { refused: string }>,
  nodeName: string,
  routerId: string,
): { settings: BgpSettings; problems: BgpProblem[] } {
  const peers = bgp.peers.filter((p) => p.nodes === undefined || p.nodes.includes(nodeName))
    .map(({ nodes: _, ...peer }) => peer);
  return parseBgpSettings({
    routerId,
    localAsn: bgp.localAsn,
    prefixes: bgp.prefixes,
    communities: bgp.communities,
    announce: "lb",
    peers,
  });
}

/**
 * Version of the model settings' JSON ({@link encodeSettings}; docs/contracts.md "Format
 * versions"). v1 is the first. Readers keep the fields they know and drop (log) bad ones; a field
 * they do not know is ignored.
 */
export const SETTINGS_VERSION = 1;

/** The canonical JSON of `s` (fixed key order, names sorted and unique): equal settings, equal text. */
export function encodeSettings(s: ModelSettings): string {
  return JSON.stringify({
    ...(s.encapPort !== undefined ? { encapPort: s.encapPort } : {}),
    ...(s.lbNodes !== undefined ? { lbNodes: [...new Set(s.lbNodes)].sort() } : {}),
    ...(s.bgp !== undefined ? { bgp: s.bgp } : {}),
  });
}

/**
 * The settings in `json` as stored ("" or absent: none). A field that is not what it should be
 * is dropped (its default applies) and named in `problems`; the rest is kept.
 */
export function parseSettings(json: string | undefined): {
  settings: ModelSettings;
  problems: string[];
} {
  if (json === undefined || json === "") return { settings: {}, problems: [] };
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(json);
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
      throw new Error("not an object");
    }
  } catch (err) {
    return { settings: {}, problems: [`settings ${json.slice(0, 80)}: ${(err as Error).message}`] };
  }
  const problems: string[] = [];
  const p = raw.encapPort;
  const portOk = Number.isInteger(p) && (p as number) >= 1 && (p as number) <= 65535;
  if (p !== undefined && !portOk) {
    problems.push(`encapPort ${JSON.stringify(p)} is not a port in 1..65535`);
  }
  const n = raw.lbNodes;
  const nodesOk = Array.isArray(n) && n.every((x) => typeof x === "string");
  if (n !== undefined && !nodesOk) {
    problems.push(`lbNodes ${JSON.stringify(n).slice(0, 80)} is not a list of node names`);
  }
  const b = raw.bgp as Record<string, unknown> | undefined;
  const bgpOk = typeof b === "object" && b !== null && !Array.isArray(b) &&
    (typeof b.refused === "string" || Array.isArray(b.peers));
  if (b !== undefined && !bgpOk) {
    problems.push(`bgp ${JSON.stringify(b).slice(0, 80)} is not a BGP section`);
  }
  return {
    settings: {
      ...(portOk ? { encapPort: p as number } : {}),
      ...(nodesOk ? { lbNodes: n as string[] } : {}),
      ...(bgpOk ? { bgp: b as unknown as ModelBgp } : {}),
    },
    problems,
  };
}

/**
 * Whether node `nodeName` acts as an LB node under `s`: yes when `lbNodes` is absent or empty
 * (see the module doc), or lists it; also yes when the node's name is unknown (`undefined`).
 */
export function selectsNode(s: ModelSettings, nodeName: string | undefined): boolean {
  const list = s.lbNodes;
  if (list === undefined || list.length === 0 || nodeName === undefined) return true;
  return list.includes(nodeName);
}
