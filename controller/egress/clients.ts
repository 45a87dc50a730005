/**
 * The client pods an EgressNAT selects (`spec.sources[].podSelector`/`namespaceSelector`,
 * resolved by the controller, controller/k8s/_egress_sources.ts), as published beside the config
 * in Redis (field `clients` of `hf:egress:{NS/NAME}:config`, format v2 of the egress config,
 * docs/contracts.md "Format versions"): which pod, on which node, with which addresses (both
 * families), leaving from which floating address. For the node agents that steer those pods'
 * traffic (not yet) and for status; the NAT pods read the IPv4 addresses from the config's
 * `sources` as /32s.
 *
 * ```json
 * {"pods":[{"pod":"shop/web-1","node":"n1","ips":["10.244.1.5","fd00:10:244:1::5"],"address":"198.18.0.100"}]}
 * ```
 *
 * @module
 */

import { isIpv4 } from "../../lib/ipv4.ts";
import { isIpv6 } from "../../lib/ipv6.ts";
import { EgressConfigError } from "./config.ts";

/** One selected client pod. */
export interface EgressClient {
  /** `namespace/name`. */
  readonly pod: string;
  /** `spec.nodeName` (absent while unscheduled). */
  readonly node?: string;
  /** Its addresses, IPv4 first. */
  readonly ips: readonly string[];
  /** The floating address its traffic leaves from. */
  readonly address: string;
}

/** The `clients` field's JSON for `clients` (pods in the order given). */
export function encodeEgressClients(clients: readonly EgressClient[]): string {
  return JSON.stringify({
    pods: clients.map((c) => ({
      pod: c.pod,
      ...(c.node !== undefined ? { node: c.node } : {}),
      ips: c.ips,
      address: c.address,
    })),
  });
}

/** Reads the `clients` field (null/absent: none); throws {@link EgressConfigError} naming the field. */
export function decodeEgressClients(text: string | null | undefined): EgressClient[] {
  if (text === null || text === undefined) return [];
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new EgressConfigError("clients", `field "clients": ${(err as Error).message}`);
  }
  const pods = (doc as { pods?: unknown })?.pods;
  if (!Array.isArray(pods)) throw new EgressConfigError("clients", 'field "clients": no "pods"');
  return pods.map((p, i) => {
    const f = `clients.pods[${i}]`;
    const ips = Array.isArray(p?.ips) ? p.ips : [];
    if (
      typeof p?.pod !== "string" || !p.pod.includes("/") || typeof p.address !== "string" ||
      !ips.every((ip: unknown) => typeof ip === "string" && (isIpv4(ip) || isIpv6(ip))) ||
      (p.node !== undefined && typeof p.node !== "string")
    ) {
      throw new EgressConfigError(f, `field "${f}": expected {pod: NS/NAME, node?, ips, address}`);
    }
    return {
      pod: p.pod,
      ...(p.node !== undefined ? { node: p.node } : {}),
      ips,
      address: p.address,
    };
  });
}
