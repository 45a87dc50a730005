/**
 * The LoadBalancerConfig named `default`: which Services are claimed, and its `Ready` condition
 * (the checks the CRD schema cannot make, such as a prime Maglev table size).
 *
 * @module
 */

import { checkMaglevSize } from "../../policy-as/host/maglev_input.ts";
import { type ClaimOptions, DEFAULT_LOAD_BALANCER_CLASS, type IpamCondition } from "../ipam/mod.ts";
import type { KubeObject } from "./objects.ts";
import { deriveSettings } from "./_settings.ts";
import { checkClusterBgp } from "../model/bgp_cluster.ts";

/** The name of the LoadBalancerConfig the controller reads. */
export const CONFIG_NAME = "default";

/** What the controller takes from the config, and the condition to report on it. */
export interface ConfigView {
  readonly claim: Required<ClaimOptions>;
  /** Per-Service defaults from the config, applied where a Service's annotations say nothing. */
  readonly defaults: ServiceDefaults;
  /** Undefined when there is no config object (defaults apply, nothing to report). */
  readonly ready?: IpamCondition;
  /** `PeersAccepted` when the config has `spec.bgp`: False names the peers left out. */
  readonly peers?: IpamCondition;
}

/** Defaults a Service's own annotations (`holdfast.io/flow-key`, `holdfast.io/maglev-size`) override. */
export interface ServiceDefaults {
  /** `client-ip` when the config's `flowKey` is `ClientIP`. */
  readonly flowKey?: "client-ip";
  /** The config's `maglevTableSize`, when valid. */
  readonly maglevSize?: number;
}

/**
 * Reads `default` among `configs`; an invalid field is reported and its default used, and so is
 * an `lbNodeSelector` that selects none of `nodes` (every node serves then).
 */
export function readConfig(
  configs: readonly KubeObject[],
  nodes: readonly KubeObject[] = [],
): ConfigView {
  const cfg = configs.find((c) => c.metadata?.name === CONFIG_NAME);
  const spec = cfg?.spec ?? {};
  const cls = typeof spec.loadBalancerClass === "string" && spec.loadBalancerClass !== ""
    ? spec.loadBalancerClass
    : DEFAULT_LOAD_BALANCER_CLASS;
  const claim = {
    loadBalancerClass: cls,
    claimServicesWithoutClass: spec.claimServicesWithoutClass === true,
  };
  if (cfg === undefined) return { claim, defaults: {} };
  const problems: string[] = [];
  let maglevSize: number | undefined;
  if (spec.maglevTableSize !== undefined) {
    try {
      checkMaglevSize(spec.maglevTableSize);
      maglevSize = spec.maglevTableSize;
    } catch (err) {
      problems.push(`spec.maglevTableSize: ${(err as Error).message}`);
    }
  }
  if (spec.flowKey !== undefined && spec.flowKey !== "FiveTuple" && spec.flowKey !== "ClientIP") {
    problems.push(`spec.flowKey: "${spec.flowKey}" is not FiveTuple or ClientIP`);
  }
  const defaults: ServiceDefaults = {
    ...(spec.flowKey === "ClientIP" ? { flowKey: "client-ip" as const } : {}),
    ...(maglevSize !== undefined ? { maglevSize } : {}),
  };
  const port = spec.encapPort;
  if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65535)) {
    problems.push(`spec.encapPort: ${JSON.stringify(port)} is not a port in 1..65535`);
  }
  if (spec.mode === "Anycast") {
    problems.push(
      `spec.mode: Anycast is followed by the node agents only (main.ts anycast --kube, ` +
        `docs/anycast.md); the controller and the LB nodes still treat the Services as Stateful`,
    );
  } else if (spec.mode !== undefined && spec.mode !== "Stateful") {
    problems.push(`spec.mode: "${spec.mode}" is not Stateful or Anycast`);
  }
  const selectorProblem = deriveSettings(cfg, nodes).problem;
  if (selectorProblem !== undefined) problems.push(selectorProblem);
  const gen = cfg.metadata?.generation;
  const ready: IpamCondition = problems.length === 0
    ? { type: "Ready", status: "True", reason: "Valid", message: `Claiming class "${cls}"` }
    : {
      type: "Ready",
      status: "False",
      reason: "InvalidSpec",
      message: `${problems.join("; ")}. Defaults are used for these fields`,
    };
  const peers = peersCondition(spec.bgp);
  const withGen = (c: IpamCondition) => gen !== undefined ? { ...c, observedGeneration: gen } : c;
  return {
    claim,
    defaults,
    ready: withGen(ready),
    ...(peers ? { peers: withGen(peers) } : {}),
  };
}

/**
 * `PeersAccepted` for `spec.bgp` (controller/model/bgp_cluster.ts): False naming each refused
 * peer (the agents leave it out and the others keep announcing), or the cluster-wide field that
 * refuses the whole section; undefined without a `bgp` section.
 */
export function peersCondition(bgp: unknown): IpamCondition | undefined {
  if (bgp === undefined || bgp === null) return undefined;
  const { error, peers } = checkClusterBgp(bgp);
  if (error !== undefined) {
    return {
      type: "PeersAccepted",
      status: "False",
      reason: "BgpInvalid",
      message: `${error}; agents keep the BGP settings they run`,
    };
  }
  const total = Array.isArray((bgp as { peers?: unknown }).peers)
    ? (bgp as { peers: unknown[] }).peers.length
    : 0;
  if (peers.length === 0) {
    return { type: "PeersAccepted", status: "True", reason: "Valid", message: `${total} peers` };
  }
  return {
    type: "PeersAccepted",
    status: "False",
    reason: "PeersRefused",
    message: `${peers.map((p) => `${p.message} (${p.path})`).join("; ")}. Left out; the other ` +
      `${total - peers.length} peers keep announcing`,
  };
}
