/**
 * Row writes inside a write transaction: one insert or delete carried into the primary index,
 * the revision index and every secondary index of the table's edit.
 *
 * @module
 */

import type { Key } from "./btree.ts";
import { keysOf, type TableEdit } from "./_table_state.ts";
import type { TableSchema } from "./_table.ts";

/** Inserts or replaces `row` (by primary key) in every index; returns the row it replaced. */
export function writeRow<R>(schema: TableSchema<R>, e: TableEdit<R>, row: R): R | undefined {
  const pk = schema.primary.keys(row) as Key;
  const rev = ++e.rev;
  const prev = e.primary.set(pk, row, rev);
  if (e.byRev !== null) {
    if (prev !== undefined) e.byRev.delete(e.primary.oldAux);
    e.byRev.set(rev, row);
  }
  const sec = schema.secondary;
  if (sec !== undefined) {
    for (let i = 0; i < sec.length; i++) {
      const def = sec[i]!, ed = e.secondary[i]!;
      const tb = def.unique ? undefined : pk;
      const nk = def.keys(row);
      if (typeof nk !== "object") {
        if (prev !== undefined) {
          const ok = def.keys(prev);
          if (typeof ok !== "object") {
            if (ok !== nk) ed.delete(ok, tb);
          } else {
            for (const k of ok) if (k !== nk) ed.delete(k, tb);
          }
        }
        // Same (key, tiebreak) replaces the old entry in place.
        ed.set(nk, row, 0, tb);
      } else {
        if (prev !== undefined) {
          for (const k of keysOf(def, prev)) if (!nk.includes(k)) ed.delete(k, tb);
        }
        for (const k of nk) ed.set(k, row, 0, tb);
      }
    }
  }
  e.changed.push(prev, row);
  return prev;
}

/**
 * Deletes the row with primary key `key` from every index; returns it. `keepGrave`: some
 * change iterator is open, so the row goes to the graveyard until it has seen the delete.
 */
export function deleteRow<R>(
  schema: TableSchema<R>,
  e: TableEdit<R>,
  key: Key,
  keepGrave: boolean,
): R | undefined {
  const prev = e.primary.delete(key);
  if (prev === undefined) return undefined;
  e.byRev?.delete(e.primary.oldAux);
  const sec = schema.secondary;
  if (sec !== undefined) {
    for (let i = 0; i < sec.length; i++) {
      const def = sec[i]!;
      const tb = def.unique ? undefined : key;
      for (const k of keysOf(def, prev)) e.secondary[i]!.delete(k, tb);
    }
  }
  const rev = ++e.rev;
  if (keepGrave) e.graves.push({ rev, row: prev });
  e.changed.push(prev, undefined);
  return prev;
}
