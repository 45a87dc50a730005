/**
 * Builders for IPAM tests and the benchmark: AddressPool and Service objects as the API server
 * serves them, and a stand-in for the controller's status writer.
 *
 * @module
 */

import type { IpamCondition } from "./service.ts";
import type { IpamResult } from "./allocator.ts";
import type { K8sAddressPool } from "./pool.ts";
import type { IpamService } from "./service.ts";

/** An AddressPool; blocks as a CIDR (`A.B.C.D/N`, `2001:db8::/64`) or `START-STOP`. */
export function pool(
  name: string,
  blocks: string[],
  spec: Omit<NonNullable<K8sAddressPool["spec"]>, "blocks"> = {},
  created?: string,
): K8sAddressPool {
  return {
    metadata: { name, ...(created ? { creationTimestamp: created } : {}) },
    spec: {
      blocks: blocks.map((b) => {
        const dash = b.indexOf("-");
        return dash < 0 ? { cidr: b } : { start: b.slice(0, dash), stop: b.slice(dash + 1) };
      }),
      ...spec,
    },
  };
}

/** Options of {@linkcode service}. */
export interface ServiceOptions {
  namespace?: string;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  /** `PORT` or `PORT/PROTO`; default ["80"]. */
  ports?: string[];
  created?: string;
  loadBalancerIP?: string;
  /** Status ingress IPs. */
  status?: string[];
  loadBalancerClass?: string | null;
  type?: string;
  /** `spec.ipFamilies` (absent: not set, as before dual stack). */
  ipFamilies?: string[];
  /** `spec.ipFamilyPolicy`. */
  ipFamilyPolicy?: string;
}

/** A LoadBalancer Service of Holdfast's class. */
export function service(name: string, o: ServiceOptions = {}): IpamService {
  return {
    metadata: {
      name,
      namespace: o.namespace ?? "default",
      labels: o.labels,
      annotations: o.annotations,
      creationTimestamp: o.created ?? "2026-01-01T00:00:00Z",
    },
    spec: {
      type: o.type ?? "LoadBalancer",
      loadBalancerClass: o.loadBalancerClass === undefined ? "holdfast.io/lb" : o.loadBalancerClass,
      loadBalancerIP: o.loadBalancerIP,
      ...(o.ipFamilies ? { ipFamilies: o.ipFamilies } : {}),
      ...(o.ipFamilyPolicy ? { ipFamilyPolicy: o.ipFamilyPolicy } : {}),
      ports: (o.ports ?? ["80"]).map((p) => {
        const [port, protocol] = p.split("/");
        return { port: Number(port), protocol: protocol ?? "TCP" };
      }),
    },
    status: o.status ? { loadBalancer: { ingress: o.status.map((ip) => ({ ip })) } } : {},
  };
}

/** The `holdfast.io/AddressAllocated` condition of Service `name` in `result`; throws if absent. */
export function condition(result: IpamResult, name: string): IpamCondition {
  const s = result.services.find((s) => s.name === name);
  if (s === undefined) throw new Error(`no result for Service "${name}"`);
  return s.condition;
}

/** The Services with status (ingress and condition) written from `result`, as the controller would. */
export function withStatus(services: IpamService[], result: IpamResult): IpamService[] {
  const byKey = new Map(result.services.map((s) => [`${s.namespace}/${s.name}`, s]));
  return services.map((svc) => {
    const a = byKey.get(`${svc.metadata?.namespace ?? "default"}/${svc.metadata?.name}`);
    if (a === undefined) return svc;
    return {
      ...svc,
      status: {
        loadBalancer: { ingress: a.addresses.map((ip) => ({ ip })) },
        conditions: [a.condition],
      },
    };
  });
}

/** The pools with status conditions written from `result`. */
export function withPoolStatus(pools: K8sAddressPool[], result: IpamResult): K8sAddressPool[] {
  const byName = new Map(result.pools.map((p) => [p.name, p]));
  return pools.map((p) => {
    const s = byName.get(p.metadata?.name ?? "");
    return s === undefined ? p : { ...p, status: { conditions: s.conditions } };
  });
}
