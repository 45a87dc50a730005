/**
 * Transactions: a {@linkcode ReadTxn} is one array of immutable table states; a
 * {@linkcode WriteTxn} adds the edits of the tables it locked and reads through them.
 *
 * @module
 */

import type { BTree } from "./btree.ts";
import type { DB } from "./db.ts";
import { buildByRev, type TableEdit, type TableState } from "./_table_state.ts";
import type { Table } from "./_table.ts";

/** A consistent, immutable snapshot of every table. */
export class ReadTxn {
  /** @internal */
  readonly states: readonly TableState<unknown>[];
  /** @internal */
  constructor(states: readonly TableState<unknown>[]) {
    this.states = states;
  }
  /** @internal The tree of index `slot` (0 primary, 1.. secondary, -1 by revision). */
  tree<R>(table: Table<R>, slot: number): BTree<R> {
    const s = this.states[table.id] as TableState<R>;
    return slot === 0
      ? s.primary
      : slot === -1
      ? s.byRev ?? buildByRev(s.primary)
      : s.secondary[slot - 1]!;
  }
  /** @internal */
  state<R>(table: Table<R>): TableState<R> {
    return this.states[table.id] as TableState<R>;
  }
}

/** A write transaction over the tables it locked. Reads see its own uncommitted writes. */
export class WriteTxn extends ReadTxn {
  readonly #db: DB;
  readonly #edits: (TableEdit<unknown> | undefined)[];
  #done = false;

  /** @internal */
  constructor(db: DB, states: readonly TableState<unknown>[], tables: readonly Table<unknown>[]) {
    super(states);
    this.#db = db;
    this.#edits = new Array(states.length);
    for (const t of tables) {
      const s = states[t.id]!;
      this.#edits[t.id] = {
        table: t,
        rev: s.rev,
        primary: s.primary.edit(),
        byRev: (s.byRev ?? (t._tracked ? buildByRev(s.primary) : null))?.edit() ?? null,
        secondary: s.secondary.map((b) => b.edit()),
        graves: [],
        changed: [],
        pendingInit: s.pendingInit,
      };
    }
  }

  /** @internal */
  override tree<R>(table: Table<R>, slot: number): BTree<R> {
    const e = this.#edits[table.id] as TableEdit<R> | undefined;
    if (e === undefined) return super.tree(table, slot);
    if (slot === -1) return e.byRev?.view() ?? buildByRev(e.primary.view());
    return (slot === 0 ? e.primary : e.secondary[slot - 1]!).view();
  }

  /** @internal */
  override state<R>(table: Table<R>): TableState<R> {
    const e = this.#edits[table.id] as TableEdit<R> | undefined;
    if (e === undefined) return super.state(table);
    const s = super.state(table);
    return { ...s, rev: e.rev, pendingInit: e.pendingInit };
  }

  /** @internal The table's revision when this transaction started. */
  baseRevision<R>(table: Table<R>): number {
    return super.state(table).rev;
  }

  /** @internal The edit of a locked table; throws if the table was not locked by this txn. */
  edit<R>(table: Table<R>): TableEdit<R> {
    if (this.#done) {
      throw new Error(`Cannot write table "${table.name}": transaction already ended`);
    }
    const e = this.#edits[table.id] as TableEdit<R> | undefined;
    if (e === undefined) {
      throw new Error(`Cannot write table "${table.name}": not locked by this write transaction`);
    }
    return e;
  }

  /** Publishes every change atomically and fires watches; returns a snapshot of the result. */
  commit(): ReadTxn {
    if (this.#done) throw new Error("Cannot commit: transaction already ended");
    this.#done = true;
    return this.#db._commit(this.#edits);
  }

  /** Drops every change and releases the locks. Safe to call after commit (no-op). */
  abort(): void {
    if (this.#done) return;
    this.#done = true;
    this.#db._release(this.#edits);
  }

  /** `using` support: aborts if not committed. */
  [Symbol.dispose](): void {
    this.abort();
  }
}
