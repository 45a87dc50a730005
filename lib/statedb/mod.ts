/**
 * statedb: an in-memory transactional table store with indexes, watches, change iterators
 * and initializers, on persistent B+trees.
 *
 * @example
 * ```ts
 * import { DB, defineIndex } from "./mod.ts";
 * type Pet = { name: string; kind: string };
 * const byName = defineIndex<Pet>({ name: "name", unique: true, keys: (p) => p.name });
 * const byKind = defineIndex<Pet>({ name: "kind", unique: false, keys: (p) => p.kind });
 * const db = new DB();
 * const pets = db.createTable({ name: "pets", primary: byName, secondary: [byKind] });
 * const w = db.writeTxn(pets);
 * pets.insert(w, { name: "rex", kind: "dog" });
 * w.commit();
 * const [dogs, stale] = pets.listWatch(db.readTxn(), byKind.query("dog"));
 * console.assert(dogs.length === 1 && !stale.stale);
 * ```
 *
 * @module
 */
export { type Change, ChangeIterator } from "./_changes.ts";
export { DB } from "./db.ts";
export { Table, type TableSchema } from "./_table.ts";
export { ReadTxn, WriteTxn } from "./_txn.ts";
export { defineIndex, type IndexDef, type Key, type Query } from "./index_def.ts";
export { waitAny, Watch } from "./watch.ts";
