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
 * @module
 */

import { BTree, type BTreeEditor, type Key } from "./btree.ts";
import type { IndexDef, Query } from "./index_def.ts";
import { Watch } from "./watch.ts";

/** A deleted row kept until every change iterator has seen it. */
interface Grave<R> {
  readonly rev: number;
  readonly row: R;
}

/** One table's immutable state inside a snapshot. @internal */
export interface TableState<R> {
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
  /** Graveyard: `gy[gyStart..gyEnd)`; the array is append-only and shared between states. */
  readonly gy: Grave<R>[];
  readonly gyStart: number;
  readonly gyEnd: number;
  /** Names of data sources that have not finished their initial sync. */
  readonly pendingInit: readonly string[];
}

/** Schema of a table: its name, unique primary index and secondary indexes. */
export interface TableSchema<R> {
  readonly name: string;
  readonly primary: IndexDef<R>;
  readonly secondary?: readonly IndexDef<R>[];
}

/** A change reported by {@linkcode ChangeIterator.next}. */
export interface Change<R> {
  readonly row: R;
  readonly rev: number;
  readonly deleted: boolean;
}

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

interface TableEdit<R> {
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
      let gy = old.gy, gyStart = old.gyStart, gyEnd = old.gyEnd;
      if (e.graves.length > 0) {
        if (gyEnd !== gy.length) {
          // Another state appended past our end can't happen (one writer per table), but a
          // trimmed array may be shared: copy the live part to stay append-only.
          gy = gy.slice(gyStart, gyEnd);
          gyStart = 0;
          gyEnd = gy.length;
        }
        for (const g of e.graves) gy.push(g);
        gyEnd = gy.length;
      }
      states[e.table.id] = {
        rev: e.rev,
        primary: e.primary.done(),
        byRev: e.byRev?.done() ?? null,
        secondary: e.secondary.map((s) => s.done()),
        gy,
        gyStart,
        gyEnd,
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
    const low = table._lowWatermark();
    let start = s.gyStart;
    while (start < s.gyEnd && s.gy[start]!.rev <= low) start++;
    if (start === s.gyStart) return;
    let gy = s.gy, end = s.gyEnd;
    if (start === end) {
      gy = [];
      start = 0;
      end = 0;
    } else if (start > 64 && start * 2 > end) {
      gy = gy.slice(start, end);
      end -= start;
      start = 0;
    }
    const states = this.#states.slice();
    states[table.id] = { ...s, gy, gyStart: start, gyEnd: end };
    this.#states = states;
  }
}

/** The revision index of a primary tree (its aux numbers are the revisions). */
function buildByRev<R>(primary: BTree<R>): BTree<R> {
  const entries: [number, R][] = [];
  primary.scan((_k, v, a) => {
    entries.push([a, v]);
  });
  entries.sort((x, y) => x[0] - y[0]);
  const ed = BTree.empty<R>().edit();
  for (const [rev, row] of entries) ed.set(rev, row);
  return ed.done();
}

function keysOf<R>(def: IndexDef<R>, row: R): readonly Key[] {
  const k = def.keys(row);
  return typeof k === "object" ? k : [k];
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
    const e = txn.edit(this);
    const pk = this.schema.primary.keys(row) as Key;
    const rev = ++e.rev;
    const prev = e.primary.set(pk, row, rev);
    if (e.byRev !== null) {
      if (prev !== undefined) e.byRev.delete(e.primary.oldAux);
      e.byRev.set(rev, row);
    }
    const sec = this.schema.secondary;
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

  /** Deletes the row with `row`'s primary key; returns the deleted row. */
  delete(txn: WriteTxn, row: R): R | undefined {
    return this.deleteKey(txn, this.primaryKey(row));
  }

  /** Deletes the row with primary key `key`; returns it. */
  deleteKey(txn: WriteTxn, key: Key): R | undefined {
    const e = txn.edit(this);
    const prev = e.primary.delete(key);
    if (prev === undefined) return undefined;
    e.byRev?.delete(e.primary.oldAux);
    const sec = this.schema.secondary;
    if (sec !== undefined) {
      for (let i = 0; i < sec.length; i++) {
        const def = sec[i]!;
        const tb = def.unique ? undefined : key;
        for (const k of keysOf(def, prev)) e.secondary[i]!.delete(k, tb);
      }
    }
    const rev = ++e.rev;
    if (this.#iterators.size > 0) e.graves.push({ rev, row: prev });
    e.changed.push(prev, undefined);
    return prev;
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

/** Reports inserts/updates and deletes of a table in revision order. */
export class ChangeIterator<R> {
  readonly #table: Table<R>;
  /** Highest revision reported. */
  seen = 0;
  readonly #deleteFloor: number;
  #closed = false;

  /** @internal */
  constructor(table: Table<R>, deleteFloor: number) {
    this.#table = table;
    this.#deleteFloor = deleteFloor;
  }

  /**
   * Changes after the last call up to `txn`'s revision (at most `limit`), and a watch that fires
   * when there are more.
   */
  next(txn: ReadTxn, limit = Infinity): [Change<R>[], Watch] {
    if (this.#closed) throw new Error(`Change iterator of table "${this.#table.name}" is closed`);
    const s = txn.state(this.#table);
    const out: Change<R>[] = [];
    const from = this.seen;
    const gy = s.gy;
    let gi = s.gyStart;
    const floor = Math.max(from, this.#deleteFloor);
    while (gi < s.gyEnd && gy[gi]!.rev <= floor) gi++;
    const emitGravesBelow = (rev: number): boolean => {
      while (gi < s.gyEnd && gy[gi]!.rev < rev) {
        if (out.length >= limit) return false;
        const g = gy[gi++]!;
        out.push({ row: g.row, rev: g.rev, deleted: true });
      }
      return true;
    };
    let stopped = false;
    (s.byRev ?? buildByRev(s.primary)).scan((k, v) => {
      const rev = k as number;
      if (!emitGravesBelow(rev) || out.length >= limit) {
        stopped = true;
        return false;
      }
      out.push({ row: v, rev, deleted: false });
    }, from + 1);
    if (!stopped) emitGravesBelow(Infinity);
    if (out.length > 0) this.seen = out[out.length - 1]!.rev;
    const more = out.length >= limit;
    if (!more) this.seen = Math.max(this.seen, s.rev);
    const w = more ? Watch.fired() : this.#table.watch(txn);
    return [out, w];
  }

  /** Stops observing; the graveyard no longer keeps deletes for this iterator. */
  close(): void {
    this.#closed = true;
    this.#table._closeIterator(this);
  }
}
