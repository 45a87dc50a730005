/**
 * The model's entries derived from the LB tables: a service row, its frontends and, per
 * backend address and port name, the best-priority instance reported for it.
 *
 * @module
 */

import { backendsByService } from "../../node/lb/tables/backend.ts";
import { frontendsByService } from "../../node/lb/tables/frontend.ts";
import { serviceByName } from "../../node/lb/tables/service.ts";
import type { LBTables } from "../../node/lb/tables/tables.ts";
import type { BackendInput } from "../../node/lb/tables/writer.ts";
import type { ReadTxn } from "../../lib/statedb/mod.ts";
import type { ModelEntry } from "./schema.ts";

/** The entry of service `name` in `txn`, or undefined when the service has no row. */
export function deriveEntry(t: LBTables, txn: ReadTxn, name: string): ModelEntry | undefined {
  const svc = t.services.get(txn, serviceByName(name));
  if (svc === undefined) return undefined;
  const frontends = t.frontends.list(txn, frontendsByService(name))
    .map((f) => ({ address: f.address, portName: f.portName }));
  const backends: BackendInput[] = [];
  for (const be of t.backends.list(txn, backendsByService(name))) {
    const seen = new Set<string>();
    for (const i of be.instances) { // sorted by service, then priority: the first wins
      if (i.serviceName !== name || seen.has(i.portName)) continue;
      seen.add(i.portName);
      backends.push({
        address: be.address,
        portName: i.portName,
        state: i.state,
        weight: i.weight,
        ...(i.zone ? { zone: i.zone } : {}),
      });
    }
  }
  return {
    service: {
      name,
      flowKeyMode: svc.flowKeyMode,
      ...(svc.maglevSize ? { maglevSize: svc.maglevSize } : {}),
      ...(svc.healthCheck ? { healthCheck: svc.healthCheck } : {}),
      frontends,
    },
    backends,
  };
}

/** Every service's entry in `txn`. */
export function deriveAll(t: LBTables, txn: ReadTxn): Map<string, ModelEntry> {
  const out = new Map<string, ModelEntry>();
  for (const s of t.services.all(txn)) out.set(s.name, deriveEntry(t, txn, s.name)!);
  return out;
}
