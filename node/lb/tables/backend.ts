/**
 * Backend rows: one per backend address (`IP:PORT/PROTO`), carrying an instance per
 * (service, source) that uses it. Backends exist independently of services, so they may
 * arrive first; a backend with no instances left is deleted.
 *
 * @module
 */

import { defineIndex, type Key, type Query } from "../../../lib/statedb/mod.ts";

/** Lifecycle of a backend instance. */
export type BackendState = "active" | "terminating" | "quarantined";

/** One service's view of a backend, as one source reported it. */
export interface BackendInstance {
  /** Service, `namespace/name`. */
  readonly serviceName: string;
  /** Port name within the service ("" if unnamed). */
  readonly portName: string;
  /** Data source that reported it. */
  readonly source: string;
  /** Priority of that source; lower wins when two sources report the same backend. */
  readonly priority: number;
  readonly state: BackendState;
  /** Relative Maglev weight; 0 keeps it out of the table. */
  readonly weight: number;
  /** Topology zone ("" if unknown). */
  readonly zone: string;
}

/** A backend address and the instances that use it, sorted by (service, priority). */
export interface Backend {
  /** Canonical `IP:PORT/PROTO`; primary key. */
  readonly address: string;
  readonly instances: readonly BackendInstance[];
}

/** Default weight of a backend, as in Kubernetes-less sources. */
export const DEFAULT_WEIGHT = 100;

/** Primary index: by address. */
export const backendAddressIndex = defineIndex<Backend>({
  name: "address",
  unique: true,
  keys: (b) => b.address,
});

/** Multi-key index: every service with an instance of the backend. */
export const backendServiceIndex = defineIndex<Backend>({
  name: "service",
  unique: false,
  keys: (b): Key | Key[] => {
    const inst = b.instances;
    if (inst.length === 1) return inst[0]!.serviceName;
    const out: Key[] = [];
    for (const i of inst) if (out[out.length - 1] !== i.serviceName) out.push(i.serviceName);
    return out;
  },
});

/** Query: the backend at `address`. */
export function backendByAddress(address: string): Query<Backend> {
  return backendAddressIndex.query(address);
}

/** Query: backends with an instance for service `name`. */
export function backendsByService(name: string): Query<Backend> {
  return backendServiceIndex.query(name);
}

/** The preferred (lowest priority value) instance of `b` for a service, or undefined. */
export function preferredInstance(b: Backend, serviceName: string): BackendInstance | undefined {
  for (const i of b.instances) if (i.serviceName === serviceName) return i; // sorted by priority
  return undefined;
}

/** Orders instances by service name, then priority, then source. */
export function compareInstances(a: BackendInstance, b: BackendInstance): number {
  if (a.serviceName !== b.serviceName) return a.serviceName < b.serviceName ? -1 : 1;
  if (a.priority !== b.priority) return a.priority - b.priority;
  return a.source < b.source ? -1 : a.source > b.source ? 1 : 0;
}

/** Column names of the printed table. */
export const backendHeader = ["Address", "Instances"] as const;

/** One printed row: instances as `service[port] source state weight`, joined by `; `. */
export function backendToRow(b: Backend): string[] {
  return [
    b.address,
    b.instances.map((i) =>
      `${i.serviceName}${i.portName ? `[${i.portName}]` : ""} ${i.source} ${i.state} ${i.weight}` +
      (i.zone ? ` ${i.zone}` : "")
    ).join("; "),
  ];
}
