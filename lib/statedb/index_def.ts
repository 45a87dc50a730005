/**
 * Index definitions: how a row maps to keys in one index of a table.
 *
 * Row files declare their indexes as module constants (`frontendAddressIndex`) and export
 * queries built from them (`frontendByAddress("10.0.0.1:80/TCP")`).
 *
 * @module
 */

import type { Key } from "./btree.ts";

export type { Key } from "./btree.ts";

/** How rows of type `R` are keyed in one index. */
export interface IndexDef<R> {
  /** Name, unique within the table; shown in errors and `db/show`. */
  readonly name: string;
  /** Unique: one row per key (the primary index must be unique). */
  readonly unique: boolean;
  /** The row's key, or keys for a multi-key index (must be distinct within one row). */
  readonly keys: (row: R) => Key | readonly Key[];
}

/** A lookup in one index of a table. */
export interface Query<R> {
  readonly index: IndexDef<R>;
  readonly key: Key;
}

/** Declares an index; `query(key)` builds lookups against it. */
export function defineIndex<R>(
  def: IndexDef<R>,
): IndexDef<R> & { query(key: Key): Query<R> } {
  const d = {
    ...def,
    query(key: Key): Query<R> {
      return { index: d, key };
    },
  };
  return d;
}
