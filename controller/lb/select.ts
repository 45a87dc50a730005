/**
 * Backend selection for a frontend: the one place that decides which backends a frontend
 * load-balances to. Used by the BPF reconciler and by the frontends table printer.
 *
 * Rules: the backends of the service (or of the local-redirect target, while that has usable
 * backends); per backend the instance of the best-priority source; active instances, or — only
 * when no active one remains — terminating ones; quarantined never; weight 0 never.
 *
 * @module
 */

import type { ReadTxn } from "../statedb/mod.ts";
import { backendsByService, type BackendState } from "./backend.ts";
import type { Frontend } from "./frontend.ts";
import type { LBTables } from "./tables.ts";

/** A backend chosen for a frontend. */
export interface SelectedBackend {
  /** `IP:PORT/PROTO`. */
  readonly address: string;
  readonly weight: number;
  readonly state: BackendState;
}

/** The backends `fe` balances to in `txn`, sorted by address. */
export function selectBackends(txn: ReadTxn, tables: LBTables, fe: Frontend): SelectedBackend[] {
  if (fe.redirectTo !== null) {
    const redirected = selectFrom(txn, tables, fe.redirectTo, "");
    if (redirected.length > 0) return redirected;
  }
  return selectFrom(txn, tables, fe.serviceName, fe.portName);
}

function selectFrom(
  txn: ReadTxn,
  tables: LBTables,
  service: string,
  portName: string,
): SelectedBackend[] {
  const active: SelectedBackend[] = [];
  let terminating: SelectedBackend[] | null = null;
  for (const b of tables.backends.list(txn, backendsByService(service))) {
    for (const inst of b.instances) {
      if (inst.serviceName !== service) continue;
      if (portName !== "" && inst.portName !== portName) continue;
      // First match is the best-priority instance (instances are sorted).
      if (inst.weight > 0) {
        if (inst.state === "active") {
          active.push({ address: b.address, weight: inst.weight, state: inst.state });
        } else if (inst.state === "terminating") {
          (terminating ??= []).push({ address: b.address, weight: inst.weight, state: inst.state });
        }
      }
      break;
    }
  }
  return active.length > 0 ? active : terminating ?? active;
}
