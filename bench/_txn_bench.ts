/**
 * Write-transaction commits per second (one row per txn on a 10,000-row table) and commit →
 * watcher wake-up latency, for `bench/control_plane.ts`.
 *
 * @module
 */

import { DB, defineIndex } from "../lib/statedb/mod.ts";

export /** Write-transaction commits per second (one row per txn) and commit → watcher wake latency. */
async function txnBench(): Promise<{ commitsPerS: number; wakeP50Us: number; wakeP99Us: number }> {
  type Row = { id: string; n: number };
  const byId = defineIndex<Row>({ name: "id", unique: true, keys: (r) => r.id });
  const db = new DB();
  const t = db.createTable<Row>({ name: "t", primary: byId });
  // Prefill so commits work on a non-trivial tree.
  const w0 = db.writeTxn(t);
  for (let i = 0; i < 10_000; i++) t.insert(w0, { id: `k${i}`, n: 0 });
  w0.commit();
  const commits = 20_000;
  const t0 = performance.now();
  for (let i = 0; i < commits; i++) {
    const w = db.writeTxn(t);
    t.insert(w, { id: `k${i % 10_000}`, n: i });
    w.commit();
  }
  const commitsPerS = commits / ((performance.now() - t0) / 1000);
  const lat: number[] = [];
  for (let i = 0; i < 2000; i++) {
    const key = `k${i % 10_000}`;
    const [, watch] = t.getWatch(db.readTxn(), byId.query(key));
    let start = 0;
    const woke = watch.wait().then(() => performance.now() - start);
    start = performance.now();
    const w = db.writeTxn(t);
    t.insert(w, { id: key, n: -i });
    w.commit();
    lat.push(await woke);
  }
  lat.sort((a, b) => a - b);
  return {
    commitsPerS,
    wakeP50Us: lat[Math.floor(lat.length * 0.5)]! * 1000,
    wakeP99Us: lat[Math.floor(lat.length * 0.99)]! * 1000,
  };
}
