/**
 * What a node serves, a pure function of the LB model and the pods on the node
 * (docs/backends.md): for every local pod whose address is a backend of a service, one
 * {@linkcode PodFrontend} per frontend of that service it answers — same protocol, same address
 * family, and the same port name when both name one — whose target port is the backend's port
 * (in Kubernetes the EndpointSlice's port: the Service's `targetPort`, a named one already
 * resolved from the pod's containers by the endpoint-slice controller).
 *
 * @module
 */

import type { FileConfig } from "../lb/sources/file_source.ts";
import { parseAddr } from "../lb/tables/address.ts";
import type { PodFrontend } from "../bpf/node_structs.ts";
import { PROTO } from "../bpf/consts.ts";
import { isIpv4 } from "../../lib/ipv4.ts";
import { formatIpv6, ipv6Bytes, isIpv6 } from "../../lib/ipv6.ts";

/** A pod on this node as the pod sources report it. */
export interface LocalPod {
  /** `namespace/name`. */
  readonly name: string;
  /** Its addresses (`status.podIPs`), either family. */
  readonly ips: readonly string[];
}

/** One frontend a local pod serves, with where it comes from (for logs). */
export interface PodServing {
  readonly pod: string;
  readonly service: string;
  readonly frontend: PodFrontend;
}

/** A refusal: two services ask for the same (pod, frontend) with different target ports. */
export interface PlanConflict {
  readonly pod: string;
  readonly frontend: string;
  readonly services: readonly string[];
}

/** An address in the form the maps decode to (RFC 5952 for IPv6), "" when not an address. */
export function canonicalIp(text: string): string {
  if (isIpv4(text)) return text;
  return text.includes(":") && isIpv6(text) ? formatIpv6(ipv6Bytes(text)) : "";
}

/** The key of a (pod, frontend) pair, as logs and the diff use it. */
export function servingKey(f: Omit<PodFrontend, "targetPort">): string {
  const vip = f.vip.includes(":") ? `[${f.vip}]` : f.vip;
  return `${f.pod} ${vip}:${f.port}/${f.proto === PROTO.UDP ? "UDP" : "TCP"}`;
}

/** Every (local pod, frontend) pair of `model`, and the pairs refused for a conflict. */
export function planNode(
  model: FileConfig,
  pods: readonly LocalPod[],
): { serving: PodServing[]; conflicts: PlanConflict[] } {
  const podByIp = new Map<string, string>();
  for (const p of pods) {
    for (const ip of p.ips) {
      const c = canonicalIp(ip);
      if (c !== "") podByIp.set(c, p.name);
    }
  }
  const chosen = new Map<string, PodServing>();
  const conflicts = new Map<string, PlanConflict>();
  for (const svc of model.services) {
    const frontends = svc.frontends.map((f) => ({ ...parseAddr(f.address), name: f.portName }));
    for (const b of svc.backends) {
      const be = parseAddr(b.address);
      const pod = podByIp.get(be.ip);
      if (pod === undefined) continue;
      for (const fe of frontends) {
        if (fe.protocol !== be.protocol || isIpv4(fe.ip) !== isIpv4(be.ip)) continue;
        if (fe.name !== undefined && b.portName !== undefined && fe.name !== b.portName) continue;
        const frontend: PodFrontend = {
          pod: be.ip,
          vip: fe.ip,
          port: fe.port,
          proto: fe.protocol === "UDP" ? PROTO.UDP : PROTO.TCP,
          targetPort: be.port,
        };
        const key = servingKey(frontend);
        const had = chosen.get(key);
        if (had === undefined) chosen.set(key, { pod, service: svc.name, frontend });
        else if (had.frontend.targetPort !== be.port) {
          const c = conflicts.get(key);
          conflicts.set(key, {
            pod,
            frontend: key,
            services: [...new Set([...(c?.services ?? [had.service]), svc.name])],
          });
        }
      }
    }
  }
  return { serving: [...chosen.values()], conflicts: [...conflicts.values()] };
}
