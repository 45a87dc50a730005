/**
 * The comparison behind the BPF reconciler's `verify`: what one frontend's entries in the maps
 * should be (as last written) against what a `dump()` found there. Pure, so the full pass costs
 * one dump plus one scan of each Maglev table.
 *
 * @module
 */

import type { FlowKeyMode, ServiceEntry } from "./lbmaps.ts";
import type { Service } from "../tables/service.ts";

/** What was written for one frontend. */
export interface WrittenFrontend {
  readonly serviceId: number;
  /** Distinct backend IDs its Maglev table names, ascending. */
  readonly backendIds: readonly number[];
  readonly maglevSize: number;
  /** Undefined: the service row is gone (its delete is on the way); the mode is not checked. */
  readonly flowKeyMode: FlowKeyMode | undefined;
  /** Whether the service takes no new connections (checked with the mode). */
  readonly draining?: boolean;
}

/** What a frontend's entry should hold: its IDs, and its service row's settings (if any). */
export function writtenFrontend(
  serviceId: number,
  backendIds: readonly number[],
  svc: Service | undefined,
  defaultM: number,
): WrittenFrontend {
  return {
    serviceId,
    backendIds,
    maglevSize: svc?.maglevSize || defaultM,
    flowKeyMode: svc?.flowKeyMode,
    draining: svc?.draining ?? false,
  };
}

/**
 * How the maps differ from `want`, or null if they match. `lost` holds the backend IDs whose
 * entries are missing or changed; `scratch` is a zeroed array with a slot per backend ID in use
 * (left zeroed again). A slot moved between two of the frontend's own backends is not noticed.
 */
export function frontendDiffers(
  want: WrittenFrontend,
  entry: ServiceEntry | undefined,
  table: Uint32Array | undefined,
  lost: ReadonlySet<number>,
  scratch: Uint8Array,
): string | null {
  const ids = want.backendIds;
  if (entry === undefined) return "service entry missing";
  if (
    entry.serviceId !== want.serviceId || entry.backendCount !== ids.length ||
    entry.maglevSize !== want.maglevSize ||
    (want.flowKeyMode !== undefined && entry.flowKeyMode !== want.flowKeyMode) ||
    (want.flowKeyMode !== undefined && want.draining !== undefined &&
      (entry.draining ?? false) !== want.draining)
  ) return `service entry differs: ${JSON.stringify(entry)}`;
  const gone = ids.find((id) => lost.has(id));
  if (gone !== undefined) return `backend ${gone} missing or changed`;
  if (table === undefined) return `maglev table ${want.serviceId} missing`;
  if (table.length !== want.maglevSize) {
    return `maglev table ${want.serviceId} has ${table.length} slots, not ${want.maglevSize}`;
  }
  // 1: expected, 2: expected and seen. A slot naming anything else (0 = unset, when there are
  // backends) is wrong; so is an expected backend no slot names.
  for (const id of ids) scratch[id] = 1;
  let seen = 0, foreign = -1;
  for (let s = 0; s < table.length; s++) {
    const v = table[s]!;
    const mark = v < scratch.length ? scratch[v] : 0;
    if (mark === 1) {
      scratch[v] = 2;
      seen++;
    } else if (mark !== 2 && !(v === 0 && ids.length === 0)) {
      foreign = v;
      break;
    }
  }
  for (const id of ids) scratch[id] = 0;
  if (foreign >= 0) return `maglev table ${want.serviceId} names backend ${foreign}`;
  if (seen !== ids.length) return `maglev table ${want.serviceId} lacks some of its backends`;
  return null;
}
