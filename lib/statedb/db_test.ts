import { deepStrictEqual, ok, throws } from "node:assert/strict";
import { mulberry32 } from "../../node/lb/_testing.ts";
import { DB, defineIndex, type ReadTxn, type Table, Watch } from "./mod.ts";

type Obj = {
  readonly id: string;
  readonly group: string;
  readonly tags: readonly string[];
  readonly n: number;
};

const byId = defineIndex<Obj>({ name: "id", unique: true, keys: (o) => o.id });
const byGroup = defineIndex<Obj>({ name: "group", unique: false, keys: (o) => o.group });
const byTag = defineIndex<Obj>({ name: "tag", unique: false, keys: (o) => o.tags });

function setup() {
  const db = new DB();
  const a = db.createTable<Obj>({ name: "a", primary: byId, secondary: [byGroup, byTag] });
  const b = db.createTable<Obj>({ name: "b", primary: byId, secondary: [byGroup] });
  return { db, a, b };
}

function sorted(m: Map<string, Obj>): Obj[] {
  return [...m.values()].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
}

Deno.test("statedb property: random txns agree with a naive model (isolation, indexes, watches, changes)", () => {
  for (const seed of [1, 2, 3, 4]) {
    const rnd = mulberry32(seed);
    const { db, a, b } = setup();
    const model = { a: new Map<string, Obj>(), b: new Map<string, Obj>() };
    const tables = { a, b } as const;
    const iter = a.changes();
    const replica = new Map<string, Obj>();
    const snapshots: { txn: ReadTxn; a: Obj[]; b: Obj[] }[] = [];
    const groups = ["g0", "g1", "g2", "g3"];
    const tagsPool = ["x", "y", "z"];
    for (let step = 0; step < 300; step++) {
      // Watches taken before this step, per group of table a.
      const rtxn = db.readTxn();
      const watches = groups.map((g) => a.listWatch(rtxn, byGroup.query(g)));
      const [, tagWatch] = a.listWatch(rtxn, byTag.query("x"));
      const touchedGroups = new Set<string>();
      let touchedTagX = false;
      const aborted = rnd() < 0.1;
      const txn = db.writeTxn(a, b);
      const pending = { a: new Map(model.a), b: new Map(model.b) };
      const nops = 1 + Math.floor(rnd() * 8);
      for (let i = 0; i < nops; i++) {
        const tname = rnd() < 0.7 ? "a" : "b";
        const t: Table<Obj> = tables[tname];
        const id = `o${Math.floor(rnd() * 40)}`;
        const old = pending[tname].get(id);
        if (rnd() < 0.65) {
          const tags = tagsPool.filter(() => rnd() < 0.4);
          const o: Obj = { id, group: groups[Math.floor(rnd() * groups.length)]!, tags, n: step };
          deepStrictEqual(t.insert(txn, o), old);
          pending[tname].set(id, o);
          if (tname === "a") {
            touchedGroups.add(o.group);
            if (old) touchedGroups.add(old.group);
            touchedTagX ||= o.tags.includes("x") || (old?.tags.includes("x") ?? false);
          }
        } else {
          deepStrictEqual(t.deleteKey(txn, id), old);
          pending[tname].delete(id);
          if (tname === "a" && old) {
            touchedGroups.add(old.group);
            touchedTagX ||= old.tags.includes("x");
          }
        }
      }
      // Reads inside the txn see its own writes.
      deepStrictEqual(a.all(txn), sorted(pending.a));
      if (aborted) {
        txn.abort();
      } else {
        txn.commit();
        model.a = pending.a;
        model.b = pending.b;
      }
      const now = db.readTxn();
      deepStrictEqual(a.all(now), sorted(model.a), `table a after step ${step}`);
      deepStrictEqual(b.all(now), sorted(model.b), `table b after step ${step}`);
      for (const g of groups) {
        deepStrictEqual(
          a.list(now, byGroup.query(g)),
          sorted(model.a).filter((o) => o.group === g),
        );
      }
      for (const tag of tagsPool) {
        deepStrictEqual(
          a.list(now, byTag.query(tag)),
          sorted(model.a).filter((o) => o.tags.includes(tag)),
        );
      }
      if (!aborted) {
        groups.forEach((g, i) => {
          if (touchedGroups.has(g)) {
            ok(watches[i]![1].stale, `watch on group ${g} did not fire at step ${step}`);
          }
        });
        if (touchedTagX) ok(tagWatch.stale, `watch on tag x did not fire at step ${step}`);
      }
      // The change iterator, applied to a replica, reproduces the table: no lost deletes.
      if (rnd() < 0.5) {
        const [changes] = iter.next(now);
        for (const c of changes) {
          if (c.deleted) replica.delete(c.row.id);
          else replica.set(c.row.id, c.row);
        }
        deepStrictEqual(sorted(replica), sorted(model.a), `replica at step ${step}`);
      }
      if (rnd() < 0.2) snapshots.push({ txn: now, a: sorted(model.a), b: sorted(model.b) });
    }
    // Old snapshots are unchanged.
    for (const s of snapshots) {
      deepStrictEqual(a.all(s.txn), s.a);
      deepStrictEqual(b.all(s.txn), s.b);
    }
    iter.close();
  }
});

Deno.test("statedb: deleted rows stay in the graveyard until every iterator saw them", () => {
  const { db, a } = setup();
  const slow = a.changes(), fast = a.changes();
  let w = db.writeTxn(a);
  a.insert(w, { id: "x", group: "g", tags: [], n: 1 });
  w.commit();
  fast.next(db.readTxn());
  slow.next(db.readTxn());
  w = db.writeTxn(a);
  a.deleteKey(w, "x");
  w.commit();
  deepStrictEqual(fast.next(db.readTxn())[0].map((c) => [c.row.id, c.deleted]), [["x", true]]);
  deepStrictEqual(db.readTxn().state(a).gyEnd - db.readTxn().state(a).gyStart, 1);
  deepStrictEqual(slow.next(db.readTxn())[0].map((c) => [c.row.id, c.deleted]), [["x", true]]);
  // A later commit collects it.
  w = db.writeTxn(a);
  a.insert(w, { id: "y", group: "g", tags: [], n: 1 });
  w.commit();
  deepStrictEqual(db.readTxn().state(a).gyEnd - db.readTxn().state(a).gyStart, 0);
  // Limits: changes come in revision order across calls.
  const it = a.changes();
  w = db.writeTxn(a);
  for (let i = 0; i < 10; i++) a.insert(w, { id: `k${i}`, group: "g", tags: [], n: i });
  w.commit();
  const seen: string[] = [];
  for (let i = 0; i < 20; i++) {
    const [cs, watch] = it.next(db.readTxn(), 3);
    seen.push(...cs.map((c) => c.row.id));
    if (!watch.stale) break;
  }
  deepStrictEqual(seen, ["y", ...Array.from({ length: 10 }, (_, i) => `k${i}`)]);
});

Deno.test("statedb: write locks, initializers, revisions and watch wake-up", async () => {
  const { db, a, b } = setup();
  const w1 = db.writeTxn(a);
  throws(() => db.writeTxn(a, b), /Cannot lock table "a"/);
  const doneK8s = a.registerInitializer(w1, "k8s");
  const doneFile = a.registerInitializer(w1, "file");
  a.insert(w1, { id: "x", group: "g", tags: [], n: 1 });
  w1.commit();
  let [init, initWatch] = a.initialized(db.readTxn());
  deepStrictEqual(init, false);
  const [, rowWatch] = a.getWatch(db.readTxn(), byId.query("x"));
  const woke = rowWatch.wait().then(() => "woke");
  let w = db.writeTxn(a);
  doneK8s(w);
  a.insert(w, { id: "x", group: "h", tags: [], n: 2 });
  w.commit();
  deepStrictEqual(await woke, "woke");
  deepStrictEqual(initWatch.stale, false);
  deepStrictEqual(a.pendingInitializers(db.readTxn()), ["file"]);
  w = db.writeTxn(a);
  doneFile(w);
  w.commit();
  ok(initWatch.stale);
  [init, initWatch] = a.initialized(db.readTxn());
  deepStrictEqual(init, true);
  deepStrictEqual(a.rowRevision(db.readTxn(), "x"), 2);
  deepStrictEqual(a.revision(db.readTxn()), 2);
  // Unrelated key: no wake.
  const [, other] = a.getWatch(db.readTxn(), byId.query("nope"));
  const [, xw] = a.getWatch(db.readTxn(), byId.query("x"));
  w = db.writeTxn(a);
  a.insert(w, { id: "z", group: "g", tags: [], n: 3 });
  w.commit();
  deepStrictEqual(other.stale, false);
  deepStrictEqual(xw.stale, false);
  ok(Watch.fired().stale);
  // A watch from an old snapshot is already stale.
  const old = db.readTxn();
  w = db.writeTxn(a);
  a.insert(w, { id: "q", group: "g", tags: [], n: 4 });
  w.commit();
  ok(a.getWatch(old, byId.query("x"))[1].stale);
});

Deno.test("statedb: prefix query and its watch twin", () => {
  const { db, a } = setup();
  const w = db.writeTxn(a);
  for (const id of ["10.0.0.1:80", "10.0.0.1:443", "10.0.0.2:80"]) {
    a.insert(w, { id, group: "g", tags: [], n: 0 });
  }
  w.commit();
  const [rows, watch] = a.prefixWatch(db.readTxn(), byId, "10.0.0.1:");
  deepStrictEqual(rows.map((r) => r.id), ["10.0.0.1:443", "10.0.0.1:80"]);
  const w2 = db.writeTxn(a);
  a.deleteKey(w2, "10.0.0.1:80");
  w2.commit();
  ok(watch.stale);
});
