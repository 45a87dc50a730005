/**
 * The table store: a database of tables with read snapshots and write transactions.
 *
 * - A {@linkcode ReadTxn} is one array of immutable table states: taking it is O(1) and needs
 *   no lock; it never changes, whatever commits later.
 * - A {@linkcode WriteTxn} locks the tables it names (a second writer on a locked table fails
 *   fast: write transactions must not span an `await`), edits transient copies of their trees,
 *   and on `commit()` publishes all of them at once, then fires the watches of what changed.
 *   `abort()` drops the edits.
 * - Every insert or delete takes the table's next revision; deleted rows go to a graveyard while
 *   some change iterator has not seen them yet.
 *
 * This file holds {@linkcode DB}: creating tables, locking, committing. Transactions are in
 * `_txn.ts`, tables in `_table.ts` and `_table_write.ts`, change iterators and the graveyard in
 * `_changes.ts`, the state shapes in `_table_state.ts`.
 *
 * @module
 */

import { BTree } from "./btree.ts";
import { appendGraves, trimGraveyard } from "./_changes.ts";
import { buildByRev, type TableEdit, type TableState } from "./_table_state.ts";
import { Table, type TableSchema } from "./_table.ts";
import { ReadTxn, WriteTxn } from "./_txn.ts";

/** Holds the tables and the current root; the only place snapshots are swapped. */
export class DB {
  #states: TableState<unknown>[] = [];
  readonly #tables: Table<unknown>[] = [];
  readonly #locked: boolean[] = [];
  /** Count of commits, for metrics. */
  commits = 0;

  /** Creates a table; do this before the first transaction that uses it. */
  createTable<R>(schema: TableSchema<R>): Table<R> {
    if (!schema.primary.unique) {
      throw new Error(`Cannot create table "${schema.name}": primary index must be unique`);
    }
    if (this.#tables.some((t) => t.name === schema.name)) {
      throw new Error(`Cannot create table "${schema.name}": a table of that name exists`);
    }
    const t = new Table<R>(this, this.#tables.length, schema);
    this.#tables.push(t as Table<unknown>);
    this.#locked.push(false);
    const secondary = (schema.secondary ?? []).map((d) => BTree.empty<R>({ unique: d.unique }));
    const st: TableState<R> = {
      rev: 0,
      primary: BTree.empty<R>({ aux: true }),
      byRev: null,
      secondary,
      gy: [],
      gyStart: 0,
      gyEnd: 0,
      pendingInit: [],
    };
    this.#states = [...this.#states, st as TableState<unknown>];
    return t;
  }

  /** The tables, in creation order. */
  get tables(): readonly Table<unknown>[] {
    return this.#tables;
  }

  /** A consistent snapshot of every table. O(1), lock-free. */
  readTxn(): ReadTxn {
    return new ReadTxn(this.#states);
  }

  /** Starts a write transaction locking `tables`. Throws if one is locked by an open txn. */
  // deno-lint-ignore no-explicit-any
  writeTxn(...tables: Table<any>[]): WriteTxn {
    for (const t of tables) {
      if (t.db !== this) throw new Error(`Cannot lock table "${t.name}": it belongs to another DB`);
      if (this.#locked[t.id]) {
        throw new Error(
          `Cannot lock table "${t.name}": locked by another open write transaction ` +
            `(write transactions must not span an await)`,
        );
      }
    }
    for (const t of tables) this.#locked[t.id] = true;
    return new WriteTxn(this, this.#states, tables as Table<unknown>[]);
  }

  /** @internal Adds the revision index to the committed state of a table (no new revision). */
  _buildRevisionIndex(table: Table<unknown>): void {
    const s = this.#states[table.id]!;
    if (s.byRev !== null) return;
    const states = this.#states.slice();
    states[table.id] = { ...s, byRev: buildByRev(s.primary) };
    this.#states = states;
  }

  /** @internal */
  _release(edits: readonly (TableEdit<unknown> | undefined)[]): void {
    for (const e of edits) if (e) this.#locked[e.table.id] = false;
  }

  /** @internal */
  _commit(edits: readonly (TableEdit<unknown> | undefined)[]): ReadTxn {
    const states = this.#states.slice();
    const fired: TableEdit<unknown>[] = [];
    for (const e of edits) {
      if (e === undefined) continue;
      const old = states[e.table.id]!;
      const changedRows = e.rev !== old.rev;
      const initChanged = e.pendingInit !== old.pendingInit;
      if (!changedRows && !initChanged) continue;
      const g = e.graves.length > 0 ? appendGraves(old, e.graves) : old;
      states[e.table.id] = {
        rev: e.rev,
        primary: e.primary.done(),
        byRev: e.byRev?.done() ?? null,
        secondary: e.secondary.map((s) => s.done()),
        gy: g.gy,
        gyStart: g.gyStart,
        gyEnd: g.gyEnd,
        pendingInit: e.pendingInit,
      };
      fired.push(e);
    }
    this.#states = states;
    this.commits++;
    this._release(edits);
    for (const e of fired) e.table._afterCommit(e.changed, e.pendingInit.length === 0);
    for (const e of fired) this.#collectGraveyard(e.table);
    return new ReadTxn(states);
  }

  #collectGraveyard(table: Table<unknown>): void {
    const s = this.#states[table.id]!;
    if (s.gyEnd === s.gyStart) return;
    const g = trimGraveyard(s, table._lowWatermark());
    if (g === null) return;
    const states = this.#states.slice();
    states[table.id] = { ...s, gy: g.gy, gyStart: g.gyStart, gyEnd: g.gyEnd };
    this.#states = states;
  }
}
