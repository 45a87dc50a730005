/**
 * Backend selection for a frontend: the one place that decides which backends a frontend
 * load-balances to. Used by the BPF reconciler and by the frontends table printer.
 *
 * Rules: the backends of the service (or of the local-redirect target, while that has usable
 * backends); per backend the instance of the best-priority source; active instances, or — only
 * when no active one remains — terminating ones; quarantined never; weight 0 never. A dual-stack
 * service (frontends of both families, as Kubernetes gives a dual-stack Service one LB IP per
 * family) pairs each frontend with backends of its own family; a single-family service takes
 * every backend (an IPv6 frontend may use IPv4 backends; an IPv4 frontend refuses IPv6 ones on
 * its row, maps/reconciler.ts).
 *
 * @module
 */

import type { ReadTxn } from "../../../lib/statedb/mod.ts";
import { backendsByService, type BackendState } from "./backend.ts";
import { type Frontend, frontendsByService } from "./frontend.ts";
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
  const fe6 = isV6(fe.address);
  let dual: boolean | undefined;
  // Only looked up when a backend of the other family shows up (rare outside dual stack).
  const dualStack = () =>
    dual ??= tables.frontends.list(txn, frontendsByService(fe.serviceName)).some((f) =>
      isV6(f.address) !== fe6
    );
  if (fe.redirectTo !== null) {
    const redirected = selectFrom(txn, tables, fe.redirectTo, "", fe6, dualStack);
    if (redirected.length > 0) return redirected;
  }
  return selectFrom(txn, tables, fe.serviceName, fe.portName, fe6, dualStack);
}

/** Whether a frontend's or backend's `IP:PORT/PROTO` is IPv6 (`[IPv6]:PORT/PROTO`). */
function isV6(address: string): boolean {
  return address.charCodeAt(0) === 91; // "["
}

/** Whether a service's frontends span both families (each then takes its own family's backends). */
export function isDualStack(frontends: readonly { readonly address: string }[]): boolean {
  let v4 = false, v6 = false;
  for (const f of frontends) {
    if (isV6(f.address)) v6 = true;
    else v4 = true;
  }
  return v4 && v6;
}

function selectFrom(
  txn: ReadTxn,
  tables: LBTables,
  service: string,
  portName: string,
  fe6: boolean,
  dualStack: () => boolean,
): SelectedBackend[] {
  const active: SelectedBackend[] = [];
  let terminating: SelectedBackend[] | null = null;
  for (const b of tables.backends.list(txn, backendsByService(service))) {
    if (isV6(b.address) !== fe6 && dualStack()) continue;
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
