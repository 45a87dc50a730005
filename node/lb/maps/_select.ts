/**
 * A frontend's selected backends as Maglev build input for the BPF reconciler: one key per
 * `IP:PORT` (the maps' identity of a backend, the same on every node), and the backend address
 * whose ID each key's slots hold.
 *
 * @module
 */

import { hostPort } from "../tables/address.ts";
import type { Frontend } from "../tables/frontend.ts";
import { selectBackends, type SelectedBackend } from "../tables/select.ts";
import { serviceByName } from "../tables/service.ts";
import type { LBTables } from "../tables/tables.ts";
import type { ReadTxn } from "../../../lib/statedb/mod.ts";
import type { MaglevBackend } from "../../../policy-as/host/maglev_input.ts";
import type { AheadJob } from "./_maglev_workers.ts";

/** Maglev keys of `selected` (sorted by address) and the address each key's ID is taken for. */
export interface MaglevSelection {
  readonly keys: MaglevBackend[];
  readonly addresses: string[];
}

/**
 * The Maglev keys of `selected`: a TCP and a UDP backend on the same pair (adjacent: selection is
 * sorted) share one key, with the larger weight, and the first one's ID.
 */
export function maglevSelection(selected: readonly SelectedBackend[]): MaglevSelection {
  // Sized up front (the selection's length at most): no growth on the hot path.
  const keys = new Array<MaglevBackend>(selected.length);
  const addresses = new Array<string>(selected.length);
  let n = 0;
  for (const b of selected) {
    const key = hostPort(b.address);
    if (n > 0 && keys[n - 1]!.key === key) {
      keys[n - 1] = { key, weight: Math.max(keys[n - 1]!.weight, b.weight) };
      continue;
    }
    addresses[n] = b.address;
    keys[n++] = { key, weight: b.weight };
  }
  keys.length = addresses.length = n;
  return { keys, addresses };
}

/**
 * The Maglev inputs of `rows` (in order) for building their tables ahead: their keys and the IDs
 * their backends hold now (`idOf`); a row with a backend not allocated yet, or no service, is
 * left to its update. `defaultM` for a service without a table size of its own.
 */
export function aheadJobs(
  txn: ReadTxn,
  tables: LBTables,
  rows: readonly { readonly row: Frontend }[],
  idOf: (address: string) => number | undefined,
  defaultM: number,
): AheadJob[] {
  const jobs: AheadJob[] = [];
  for (const { row: fe } of rows) {
    const svc = tables.services.get(txn, serviceByName(fe.serviceName));
    if (svc === undefined) continue;
    const { keys, addresses } = maglevSelection(selectBackends(txn, tables, fe));
    const ids: number[] = [];
    for (const a of addresses) {
      const id = idOf(a);
      if (id === undefined) break;
      ids.push(id);
    }
    if (ids.length !== keys.length) continue;
    jobs.push({ address: fe.address, keys, ids, m: svc.maglevSize || defaultM });
  }
  return jobs;
}
