/**
 * Tables: a table's queries and their watch twins, its row writes, initializers and change
 * iterators. Rows live in the snapshot (`ReadTxn`) or write transaction passed to each call.
 *
 * @module
 */

import type { Key } from "./btree.ts";
import type { DB } from "./db.ts";
import type { IndexDef, Query } from "./index_def.ts";
import { ChangeIterator } from "./_changes.ts";
import { keysOf, type TableState } from "./_table_state.ts";
import { deleteRow, writeRow } from "./_table_write.ts";
import { type ReadTxn, WriteTxn } from "./_txn.ts";
import { Watch } from "./watch.ts";

/** Schema of a table: its name, unique primary index and secondary indexes. */
export interface TableSchema<R> {
  readonly name: string;
  readonly primary: IndexDef<R>;
  readonly secondary?: readonly IndexDef<R>[];
}

/**
 * A table of immutable rows of type `R`. Queries take any txn; writes take a {@linkcode WriteTxn}
 * that locked this table.
 */
export class Table<R> {
  /** @internal */
  readonly db: DB;
  /** @internal Slot in every snapshot. */
  readonly id: number;
  readonly name: string;
  readonly schema: TableSchema<R>;
  readonly #slots = new Map<IndexDef<R>, number>();
  #allWatch = new Watch();
  #initWatch = new Watch();
  /** Per index slot: key → watch, registered by `getWatch`/`listWatch`. */
  readonly #keyWatches: Map<Key, Watch>[];
  readonly #iterators = new Set<ChangeIterator<R>>();
  /** @internal Whether the revision index is maintained (set by the first `changes()`). */
  _tracked = false;

  /** @internal */
  constructor(db: DB, id: number, schema: TableSchema<R>) {
    this.db = db;
    this.id = id;
    this.name = schema.name;
    this.schema = schema;
    this.#slots.set(schema.primary, 0);
    (schema.secondary ?? []).forEach((d, i) => this.#slots.set(d, i + 1));
    this.#keyWatches = Array.from({ length: this.#slots.size }, () => new Map());
  }

  #slot(index: IndexDef<R>): number {
    const s = this.#slots.get(index);
    if (s === undefined) {
      throw new Error(`Table "${this.name}" has no index "${index.name}"`);
    }
    return s;
  }

  /** Primary key of a row. */
  primaryKey(row: R): Key {
    return this.schema.primary.keys(row) as Key;
  }

  // ---- queries ----

  /** The first row matching `q` (the row, for unique indexes). */
  get(txn: ReadTxn, q: Query<R>): R | undefined {
    const slot = this.#slot(q.index);
    const tree = txn.tree(this, slot);
    return tree.multi ? tree.collect(q.key, [], 1)[0] : tree.get(q.key);
  }

  /** {@linkcode Table.get} and a watch that fires when its answer may have changed. */
  getWatch(txn: ReadTxn, q: Query<R>): [R | undefined, Watch] {
    return [this.get(txn, q), this.#keyWatch(txn, this.#slot(q.index), q.key)];
  }

  /** Every row matching `q`, in primary-key order. */
  list(txn: ReadTxn, q: Query<R>): R[] {
    return txn.tree(this, this.#slot(q.index)).collect(q.key, []);
  }

  /** {@linkcode Table.list} and its watch twin. */
  listWatch(txn: ReadTxn, q: Query<R>): [R[], Watch] {
    return [this.list(txn, q), this.#keyWatch(txn, this.#slot(q.index), q.key)];
  }

  /** Rows whose key in `index` starts with `prefix` (string keys). */
  prefix(txn: ReadTxn, index: IndexDef<R>, prefix: string): R[] {
    const out: R[] = [];
    txn.tree(this, this.#slot(index)).scan((k, v) => {
      if (typeof k !== "string" || !k.startsWith(prefix)) return false;
      out.push(v);
    }, prefix);
    return out;
  }

  /** {@linkcode Table.prefix} and its watch twin (fires on any change to the table). */
  prefixWatch(txn: ReadTxn, index: IndexDef<R>, prefix: string): [R[], Watch] {
    return [this.prefix(txn, index, prefix), this.watch(txn)];
  }

  /** All rows in primary-key order. */
  all(txn: ReadTxn): R[] {
    return txn.tree(this, 0).values();
  }

  /** {@linkcode Table.all} and a watch that fires on any change to the table. */
  allWatch(txn: ReadTxn): [R[], Watch] {
    return [this.all(txn), this.watch(txn)];
  }

  /** A watch that fires on the next change to the table after `txn`. */
  watch(txn: ReadTxn): Watch {
    return this.#tableWatch(txn);
  }

  /** Calls `fn` for every row in primary-key order; stop by returning `false`. */
  scan(txn: ReadTxn, fn: (row: R, rev: number) => boolean | void): void {
    txn.tree(this, 0).scan((_k, v, a) => fn(v, a));
  }

  /** Number of rows. */
  count(txn: ReadTxn): number {
    return txn.tree(this, 0).size;
  }

  /** The table's revision (of its last change) in `txn`. */
  revision(txn: ReadTxn): number {
    return txn.state(this).rev;
  }

  /** The revision of the row with primary key `key`, or 0 if absent. */
  rowRevision(txn: ReadTxn, key: Key): number {
    return Math.max(0, txn.tree(this, 0).getAux(key));
  }

  /** Whether the row with primary key `key` was inserted or replaced inside write txn `txn`. */
  writtenIn(txn: WriteTxn, key: Key): boolean {
    return txn.tree(this, 0).getAux(key) > txn.baseRevision(this);
  }

  /** The row with primary key `key` and its revision. */
  getWithRevision(txn: ReadTxn, key: Key): { row: R; rev: number } | undefined {
    const t = txn.tree(this, 0);
    const row = t.get(key);
    return row === undefined ? undefined : { row, rev: t.getAux(key) };
  }

  #tableWatch(txn: ReadTxn): Watch {
    if (txn.state(this).rev !== this.#committed().rev) return Watch.fired();
    return this.#allWatch;
  }

  #keyWatch(txn: ReadTxn, slot: number, key: Key): Watch {
    if (txn instanceof WriteTxn) return this.#allWatch;
    if (txn.state(this).rev !== this.#committed().rev) return Watch.fired();
    const m = this.#keyWatches[slot]!;
    let w = m.get(key);
    if (w === undefined) m.set(key, w = new Watch());
    return w;
  }

  #committed(): TableState<R> {
    return this.db.readTxn().state(this);
  }

  // ---- writes ----

  /** Inserts or replaces a row (by primary key); returns the row it replaced. */
  insert(txn: WriteTxn, row: R): R | undefined {
    return writeRow(this.schema, txn.edit(this), row);
  }

  /** Deletes the row with `row`'s primary key; returns the deleted row. */
  delete(txn: WriteTxn, row: R): R | undefined {
    return this.deleteKey(txn, this.primaryKey(row));
  }

  /** Deletes the row with primary key `key`; returns it. */
  deleteKey(txn: WriteTxn, key: Key): R | undefined {
    return deleteRow(this.schema, txn.edit(this), key, this.#iterators.size > 0);
  }

  // ---- initializers ----

  /**
   * Registers a data source that must finish its initial sync before the table counts as
   * initialized; returns the function the source calls (in a write txn) when it has.
   */
  registerInitializer(txn: WriteTxn, name: string): (txn: WriteTxn) => void {
    const e = txn.edit(this);
    e.pendingInit = [...e.pendingInit, name];
    let done = false;
    return (t: WriteTxn) => {
      if (done) return;
      done = true;
      const e2 = t.edit(this);
      const i = e2.pendingInit.indexOf(name);
      if (i >= 0) e2.pendingInit = e2.pendingInit.filter((_, j) => j !== i);
    };
  }

  /** Whether every registered initializer has finished, and a watch for when that changes. */
  initialized(txn: ReadTxn): [boolean, Watch] {
    const pending = txn.state(this).pendingInit;
    if (pending.length === 0) return [true, Watch.fired()];
    if (txn.state(this).pendingInit !== this.#committed().pendingInit) {
      return [false, Watch.fired()];
    }
    return [false, this.#initWatch];
  }

  /** Names of initializers still pending in `txn`. */
  pendingInitializers(txn: ReadTxn): readonly string[] {
    return txn.state(this).pendingInit;
  }

  // ---- changes ----

  /**
   * Starts observing changes. The first `next()` reports every current row as an insert; later
   * calls report what changed since, deletes included. `close()` when done, or deleted rows are
   * kept for this observer forever.
   */
  changes(): ChangeIterator<R> {
    if (!this._tracked) {
      this._tracked = true;
      this.db._buildRevisionIndex(this as Table<unknown>);
    }
    const it = new ChangeIterator(this, this.#committed().rev);
    this.#iterators.add(it);
    return it;
  }

  /** @internal */
  _closeIterator(it: ChangeIterator<R>): void {
    this.#iterators.delete(it);
  }

  /** @internal Lowest revision every iterator has seen (deletes at or below can go). */
  _lowWatermark(): number {
    let low = Infinity;
    for (const it of this.#iterators) low = Math.min(low, it.seen);
    return low;
  }

  /** @internal */
  _afterCommit(changed: (R | undefined)[], initialized: boolean): void {
    const all = this.#allWatch;
    this.#allWatch = new Watch();
    all.close();
    if (initialized) this.#initWatch.close();
    const sec = this.schema.secondary ?? [];
    for (let slot = 0; slot < this.#keyWatches.length; slot++) {
      const m = this.#keyWatches[slot]!;
      if (m.size === 0) continue;
      const def = slot === 0 ? this.schema.primary : sec[slot - 1]!;
      for (const row of changed) {
        if (row === undefined) continue;
        for (const k of keysOf(def, row)) {
          const w = m.get(k);
          if (w !== undefined) {
            m.delete(k);
            w.close();
          }
        }
      }
    }
  }
}
