/**
 * Service rows: what a service is, independent of its addresses (frontends) and endpoints
 * (backends). Keyed by `namespace/name`.
 *
 * @module
 */

import type { FlowKeyMode } from "../maps/lbmaps.ts";
import type { HealthCheck } from "../sources/health_check.ts";
import { defineIndex, type Query } from "../../../lib/statedb/mod.ts";

/** A load-balanced service. Immutable: clone, change, insert. */
export interface Service {
  /** `namespace/name`. */
  readonly name: string;
  /** Data source that owns the row (`k8s`, `file`, ...). */
  readonly source: string;
  /** Flow keying: per connection or per client address. */
  readonly flowKeyMode: FlowKeyMode;
  /** Maglev table size (a prime in 251..131071); 0: the reconciler's default (docs/maglev.md). */
  readonly maglevSize: number;
  /** Probes the LB nodes run against its backends (`node/lb/health/`); absent: none. */
  readonly healthCheck?: HealthCheck;
  /**
   * True: the datapath takes no new TCP connection for it — a SYN that finds no flow is dropped
   * (the client retries; by then routers send it elsewhere), while every known flow goes on. An
   * anycast node sets it while it withdraws an address its pod still serves (docs/anycast.md).
   */
  readonly draining?: boolean;
}

/** Primary index: by name. */
export const serviceNameIndex = defineIndex<Service>({
  name: "name",
  unique: true,
  keys: (s) => s.name,
});

/** Query: the service called `name` (`namespace/name`). */
export function serviceByName(name: string): Query<Service> {
  return serviceNameIndex.query(name);
}

/** Column names of the printed table. */
export const serviceHeader = ["Name", "Source", "FlowKey", "Maglev"] as const;

/** One printed row. */
export function serviceToRow(s: Service): string[] {
  return [s.name, s.source, s.flowKeyMode, s.maglevSize === 0 ? "default" : String(s.maglevSize)];
}
