/**
 * The shapes a table takes: its immutable state inside a snapshot, and the edit a write
 * transaction holds on it; plus the revision index built from a primary tree.
 *
 * @module
 */

import { BTree, type BTreeEditor, type Key } from "./btree.ts";
import type { IndexDef } from "./index_def.ts";
import type { Table } from "./_table.ts";

/** A deleted row kept until every change iterator has seen it. */
export interface Grave<R> {
  readonly rev: number;
  readonly row: R;
}

/** The live window `gy[gyStart..gyEnd)` of a graveyard array, append-only and shared. */
export interface Graveyard<R> {
  readonly gy: Grave<R>[];
  readonly gyStart: number;
  readonly gyEnd: number;
}

/** One table's immutable state inside a snapshot. */
export interface TableState<R> extends Graveyard<R> {
  /** Revision of the last change. */
  readonly rev: number;
  /** Primary index; aux holds each row's revision. */
  readonly primary: BTree<R>;
  /**
   * Revision → row, for change iterators; null until the table is first observed with
   * `changes()` (tables nobody iterates don't pay for it).
   */
  readonly byRev: BTree<R> | null;
  readonly secondary: readonly BTree<R>[];
  /** Names of data sources that have not finished their initial sync. */
  readonly pendingInit: readonly string[];
}

/** A write transaction's edit of one locked table. */
export interface TableEdit<R> {
  table: Table<R>;
  rev: number;
  primary: BTreeEditor<R>;
  byRev: BTreeEditor<R> | null;
  secondary: BTreeEditor<R>[];
  graves: Grave<R>[];
  /** Flattened (old, new) pairs for firing key watches. */
  changed: (R | undefined)[];
  pendingInit: readonly string[];
}

/** The revision index of a primary tree (its aux numbers are the revisions). */
export function buildByRev<R>(primary: BTree<R>): BTree<R> {
  const entries: [number, R][] = [];
  primary.scan((_k, v, a) => {
    entries.push([a, v]);
  });
  entries.sort((x, y) => x[0] - y[0]);
  const ed = BTree.empty<R>().edit();
  for (const [rev, row] of entries) ed.set(rev, row);
  return ed.done();
}

/** The keys of `row` in index `def`, as a list. */
export function keysOf<R>(def: IndexDef<R>, row: R): readonly Key[] {
  const k = def.keys(row);
  return typeof k === "object" ? k : [k];
}
