/**
 * Exceptions-only flow sharing (`--flow-sharing exceptions`, docs/scale.md "Share exceptions, not
 * every flow"). While every LB node holds the same Maglev table for a service, a flow that ECMP
 * moves to another node picks the same backend there: it needs no shared state. Only
 * **exceptions** do — flows whose stored backend differs from what the node's current table of
 * their service picks (created under an older table, or of a quarantined backend).
 *
 * The rule ({@link isException}) is evaluated against a {@link TablePicker}: what this node's
 * current Maglev table picks for a flow key — and, for a while after the table changed, what the
 * previous one picked (a flow placed differently by either is announced, so peers whose table
 * still lags hold it too). A flow the picker cannot place (an IPv6 flow, a
 * service or table it does not know) counts as an exception: it is shared as in mode `all`.
 *
 * @module
 */

import type { AnyFlowKey, FlowBackend } from "../../bpf/flow.ts";

/** How flows are shared between LB nodes (`--flow-sharing`). */
export type FlowSharingMode = "all" | "exceptions";

/** The flow-sharing modes, default first. */
export const FLOW_SHARING_MODES: readonly FlowSharingMode[] = ["all", "exceptions"];

/** What a Maglev table picks for a flow, and the table's version. */
export interface TablePick {
  readonly backend: FlowBackend;
  /**
   * What the service's previous table picks, for a while after it changed (`null`: that table
   * cannot place the flow; absent: no recent change). A flow the previous table places elsewhere
   * is announced too, so a node whose table lags (the change reaches nodes one by one) holds it.
   */
  readonly previous?: FlowBackend | null;
  /** Version of the service's table ({@link tableVersion}): the same table, the same number. */
  readonly version: number;
}

/** What this node's current Maglev tables pick for flow keys. */
export interface TablePicker {
  /** The backend the current table of `key`'s service picks; undefined when it cannot tell. */
  pick(key: AnyFlowKey): TablePick | undefined;
}

/** A picker for one service's next table, handed to a table-change hook. */
export type NextPick = (key: AnyFlowKey) => FlowBackend | undefined;

/** A service's Maglev table is about to change: its frontend, and what the next table picks. */
export interface TableChange {
  readonly service: { readonly address: string; readonly port: number; readonly protocol: string };
  readonly next: NextPick;
  /** The next table's version. */
  readonly version: number;
}

/**
 * The exception rule: a flow whose `backend` is not what `pick` says its service's table picks
 * now — or whose pick is unknown — must be on every LB node.
 */
export function isException(pick: TablePick | FlowBackend | undefined, backend: FlowBackend) {
  if (pick === undefined) return true;
  if (typeof pick !== "object") return pick !== backend;
  return pick.backend !== backend || (pick.previous !== undefined && pick.previous !== backend);
}

/**
 * A table's version: FNV-1a (32-bit) over its slots' backend addresses (`addressOf` a backend ID;
 * IDs differ between nodes, addresses do not), so nodes holding the same table agree on it
 * without talking. 0 is never returned (0 is "no version" in a stored flow).
 */
export function tableVersion(table: Uint32Array, addressOf: (id: number) => string): number {
  let h = 0x811c9dc5;
  const names = new Map<number, string>();
  for (let i = 0; i < table.length; i++) {
    const id = table[i]!;
    let name = names.get(id);
    if (name === undefined) names.set(id, name = id === 0 ? "-" : addressOf(id));
    for (let j = 0; j < name.length; j++) {
      h ^= name.charCodeAt(j);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    h ^= 0x2c;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h === 0 ? 1 : h;
}
