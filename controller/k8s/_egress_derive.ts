/**
 * From an `EgressNAT` object and its NAT pods to the egress config the agents read (the document
 * `parseEgressConfig` accepts, controller/egress/config.ts), and from the leases in Redis to
 * `status.owners` and the `Ready` condition. Pure: the reconciler (egress.ts) does the I/O.
 *
 * **Which pods are peers.** Every pod in the EgressNAT's namespace labelled
 * `holdfast.io/egress: NAME` that has a `status.podIP` and has not ended (phase neither
 * Succeeded nor Failed), Ready or not, terminating or not, sorted by name:
 * - a new pod must be listed before it can start (its agent waits for its own name in the
 *   config), and listing it moves nothing: who owns an address is decided over the pods whose
 *   heartbeats arrive, so it takes part only once its agent runs;
 * - a terminating pod stays listed until it is gone: during a rolling restart it is handing its
 *   addresses over (sync flush, lease release), and its peers must keep hearing its heartbeats
 *   (which announce the draining) rather than declare it down early.
 *
 * @module
 */

import type { EgressClient } from "../egress/clients.ts";
import { type EgressConfig, EgressConfigError, parseEgressConfig } from "../egress/config.ts";
import type { LeaseState } from "../egress/lease.ts";
import type { IpamCondition } from "../ipam/mod.ts";
import { keyOf, type KubeObject } from "./objects.ts";
import { readSources, resolveSources, SourceSpecError } from "./_egress_sources.ts";

/** The label naming a NAT pod's EgressNAT. */
export const EGRESS_LABEL = "holdfast.io/egress";
/** Reason of an EgressNAT whose spec cannot be turned into a config. */
export const INVALID_SPEC = "InvalidSpec";

/** What an EgressNAT derives to: a config, or why not. */
export type Derived =
  | {
    readonly config: EgressConfig;
    readonly pods: number;
    /** Client pods picked by `spec.sources` selectors (`_egress_sources.ts`). */
    readonly clients: EgressClient[];
  }
  | { readonly problem: string; readonly reason: "InvalidSpec" | "NoNATPods" };

/** The NAT pods of `nat` among `pods` (see the module doc), sorted by name. */
export function natPods(nat: KubeObject, pods: readonly KubeObject[]): KubeObject[] {
  const ns = nat.metadata?.namespace, name = nat.metadata?.name;
  return pods.filter((p) =>
    p.metadata?.namespace === ns && p.metadata?.labels?.[EGRESS_LABEL] === name &&
    typeof p.status?.podIP === "string" && p.status.podIP !== "" &&
    p.status?.phase !== "Succeeded" && p.status?.phase !== "Failed"
  ).sort((a, b) => (a.metadata!.name! < b.metadata!.name! ? -1 : 1));
}

/** The spec field (or pods) a config field came from, for messages. */
function specField(field: string, pods: readonly KubeObject[]): string {
  let m = /^addresses\[(\d+)\]\.address$|^addresses\.address\[(\d+)\]$/.exec(field);
  if (m) return `spec.addresses[${m[1] ?? m[2]}]`;
  m = /^addresses\[(\d+)\]\.gateway$|^addresses\.gateway\[(\d+)\]$/.exec(field);
  if (m) return `spec.gateways[${m[1] ?? m[2]}]`;
  m = /^peers(?:\[(\d+)\]|\.\w+\[(\d+)\])/.exec(field);
  if (m) return `pod "${pods[Number(m[1] ?? m[2])]?.metadata?.name}"`;
  return field.startsWith("peers") ? "pods" : `spec.${field}`;
}

/** Every pod and namespace, for `spec.sources` selectors. */
export interface ClientView {
  readonly pods: readonly KubeObject[];
  readonly namespaces: readonly KubeObject[];
}

/**
 * The config `nat` and its NAT pods say, validated by `parseEgressConfig`, or the problem;
 * selectors in `spec.sources` pick among `clients` (none without it).
 */
export function deriveEgressConfig(
  nat: KubeObject,
  pods: readonly KubeObject[],
  clients: ClientView = { pods: [], namespaces: [] },
): Derived {
  const spec = nat.spec ?? {};
  const invalid = (field: string, why: string): Derived => ({
    problem: `field "${field}": ${why}`,
    reason: INVALID_SPEC,
  });
  const addresses: unknown[] = Array.isArray(spec.addresses) ? spec.addresses : [];
  if (!Array.isArray(spec.gateways)) {
    return invalid("spec.gateways", "required: one internal gateway address per spec.addresses");
  }
  if (spec.gateways.length !== addresses.length) {
    return invalid(
      "spec.gateways",
      `expected ${addresses.length} (one per spec.addresses, same order), got ${spec.gateways.length}`,
    );
  }
  let entries;
  try {
    entries = readSources(spec.sources);
  } catch (err) {
    if (!(err instanceof SourceSpecError)) throw err;
    return { problem: err.message, reason: INVALID_SPEC };
  }
  const pinned = entries.findIndex((e) =>
    e.address !== undefined && !addresses.includes(e.address)
  );
  if (pinned >= 0) {
    return invalid(
      `spec.sources[${pinned}].address`,
      `expected one of spec.addresses, got "${entries[pinned]!.address}"`,
    );
  }
  const mine = natPods(nat, pods);
  if (mine.length === 0) {
    return {
      problem:
        `no pod labelled ${EGRESS_LABEL}=${nat.metadata?.name} with an IP in namespace "${nat.metadata?.namespace}"`,
      reason: "NoNATPods",
    };
  }
  const resolved = resolveSources(
    nat,
    entries,
    addresses.map(String),
    clients.pods,
    clients.namespaces,
    EGRESS_LABEL,
  );
  const doc = {
    name: keyOf(nat),
    destinations: spec.destinations,
    addresses: addresses.map((address, i) => ({ address, gateway: spec.gateways[i] })),
    sources: resolved.sources,
    peers: mine.map((p) => ({ name: p.metadata!.name, address: p.status.podIP })),
    ...(spec.interfaces !== undefined ? { interfaces: spec.interfaces } : {}),
    ...(spec.healthCheck !== undefined ? { healthCheck: spec.healthCheck } : {}),
    ...(spec.ports !== undefined ? { ports: spec.ports } : {}),
    ...(spec.snatPorts !== undefined ? { snatPorts: spec.snatPorts } : {}),
    ...(spec.sync !== undefined ? { sync: spec.sync } : {}),
    ...(spec.bgp !== undefined ? { bgp: spec.bgp } : {}),
  };
  try {
    return { config: parseEgressConfig(doc), pods: mine.length, clients: resolved.clients };
  } catch (err) {
    if (!(err instanceof EgressConfigError)) throw err;
    const why = err.message.replace(/^field "[^"]*": /, "").replace(
      "addresses[].address",
      "spec.addresses",
    );
    return invalid(specField(err.field, mine), why);
  }
}

/** One `status.owners` entry. */
export interface EgressOwner {
  address: string;
  pod: string;
  epoch: number;
}

/** `status.owners` from the leases (address → lease or null), in spec order. */
export function ownersOf(
  config: EgressConfig,
  leases: ReadonlyMap<string, LeaseState | null>,
): EgressOwner[] {
  return config.addresses.flatMap(({ address }) => {
    const l = leases.get(address);
    // The holder is `POD/BOOT` (node/egress/ownership.ts): a restarted pod is a new holder.
    return l ? [{ address, pod: l.holder.split("/")[0]!, epoch: l.epoch }] : [];
  });
}

/** The `Ready` condition for what was derived and the owners found. */
export function readyCondition(
  nat: KubeObject,
  derived: Derived,
  owners: readonly EgressOwner[] | undefined,
): IpamCondition {
  const gen: number | undefined = nat.metadata?.generation;
  const g = gen !== undefined ? { observedGeneration: gen } : {};
  if ("problem" in derived) {
    const message = derived.reason === INVALID_SPEC
      ? `${derived.problem}; the NAT pods keep the last valid config until it is fixed`
      : derived.problem;
    return { type: "Ready", status: "False", reason: derived.reason, message, ...g };
  }
  if (owners === undefined) {
    return {
      type: "Ready",
      status: "Unknown",
      reason: "NotPublished",
      message: "the controller runs without --redis: no config for the NAT pods",
      ...g,
    };
  }
  const owned = new Set(owners.map((o) => o.address));
  const unowned = derived.config.addresses.map((a) => a.address).filter((a) => !owned.has(a));
  return unowned.length === 0
    ? {
      type: "Ready",
      status: "True",
      reason: "AddressesOwned",
      message: `every address has an owner among ${derived.pods} NAT pods`,
      ...g,
    }
    : {
      type: "Ready",
      status: "False",
      reason: "AddressesUnowned",
      message: `no NAT pod owns ${unowned.join(", ")} yet`,
      ...g,
    };
}
