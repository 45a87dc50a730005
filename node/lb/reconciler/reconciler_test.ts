import { deepStrictEqual, ok } from "node:assert/strict";
import { waitUntil } from "../_testing.ts";
import { captureLogs } from "../../../lib/log.ts";
import { DB, defineIndex, type ReadTxn } from "../../../lib/statedb/mod.ts";
import { type Operations, Reconciler, type Repair, waitReconciled } from "./reconciler.ts";
import { pendingStatus, type ReconcileStatus } from "./status.ts";

type Obj = { readonly id: string; readonly value: number; readonly status: ReconcileStatus };
const byId = defineIndex<Obj>({ name: "id", unique: true, keys: (o) => o.id });

/** A target that holds id → value and fails while `failing` says so. */
class Target implements Operations<Obj> {
  readonly data = new Map<string, number>();
  failing: (op: string, id: string) => boolean = () => false;
  readonly log: string[] = [];
  /** Updates begun (before the gate), as `id=value`. */
  readonly begun: string[] = [];
  /** Resolves the in-flight update when set (to interleave a write). */
  gate: Promise<void> | null = null;
  /** Called as each update begins, before the gate and the fault (to look at the row then). */
  onUpdate: (o: Obj) => void = () => {};

  async update(_txn: ReadTxn, o: Obj): Promise<void> {
    this.begun.push(`${o.id}=${o.value}`);
    this.onUpdate(o);
    if (this.gate) await this.gate;
    if (this.failing("update", o.id)) throw new Error(`target refused ${o.id}`);
    this.log.push(`update ${o.id}=${o.value}`);
    this.data.set(o.id, o.value);
  }
  delete(_txn: ReadTxn, o: Obj): Promise<void> {
    if (this.failing("delete", o.id)) {
      return Promise.reject(new Error(`target refused delete ${o.id}`));
    }
    this.log.push(`delete ${o.id}`);
    this.data.delete(o.id);
    return Promise.resolve();
  }
  prune(_txn: ReadTxn, rows: readonly Obj[]): Promise<void> {
    if (this.failing("prune", "")) return Promise.reject(new Error("target refused prune"));
    const keep = new Set(rows.map((r) => r.id));
    this.log.push(`prune ${rows.length}`);
    for (const k of [...this.data.keys()]) if (!keep.has(k)) this.data.delete(k);
    return Promise.resolve();
  }
  verify(_txn: ReadTxn, rows: readonly Obj[]): Promise<Repair<Obj>[]> {
    const repairs: Repair<Obj>[] = [];
    for (const row of rows) {
      const got = this.data.get(row.id);
      if (got !== row.value) repairs.push({ row, reason: `holds ${got}, want ${row.value}` });
    }
    return Promise.resolve(repairs);
  }
}

function setup(options: { batchSize?: number; fullReconcileIntervalMs?: number } = {}) {
  let clock = 1_000;
  const db = new DB();
  const table = db.createTable<Obj>({ name: "objs", primary: byId });
  const target = new Target();
  const r = new Reconciler<Obj>({
    name: "test",
    db,
    table,
    ops: target,
    getStatus: (o) => o.status,
    setStatus: (o, status) => ({ ...o, status }),
    retry: { minMs: 1, maxMs: 8, jitter: 0 },
    batchSize: options.batchSize,
    fullReconcileIntervalMs: options.fullReconcileIntervalMs,
    now: () => clock,
  });
  const put = (id: string, value: number) => {
    const w = db.writeTxn(table);
    table.insert(w, { id, value, status: pendingStatus(clock) });
    w.commit();
  };
  const del = (id: string) => {
    const w = db.writeTxn(table);
    table.deleteKey(w, id);
    w.commit();
  };
  const wait = (id: string) =>
    waitReconciled(db, table, id, { getStatus: (o) => o.status, timeoutMs: 10_000 });
  const tick = (ms: number) => (clock += ms);
  /** Registers an initializer (no prune until then); returns the function that completes it. */
  const holdInitialization = () => {
    const w = db.writeTxn(table);
    const done = table.registerInitializer(w, "source");
    w.commit();
    return () => {
      const w2 = db.writeTxn(table);
      done(w2);
      w2.commit();
    };
  };
  return { db, table, target, r, put, del, wait, tick, holdInitialization };
}

Deno.test("reconciler: updates, deletes, writes status back, prunes only after init", async () => {
  const { db, table, target, r, put, del, wait, holdInitialization } = setup({ batchSize: 2 });
  const initialized = holdInitialization();
  target.data.set("stale", 1); // left over in the target from a previous run
  r.start();
  for (let i = 0; i < 5; i++) put(`o${i}`, i);
  await wait("o4");
  await r.waitIdle();
  deepStrictEqual(table.all(db.readTxn()).map((o) => o.status.kind), [
    "done",
    "done",
    "done",
    "done",
    "done",
  ]);
  ok(target.data.has("stale"), "pruned before the table was initialized");
  ok(!target.log.some((l) => l.startsWith("prune")));
  initialized();
  await r.waitIdle();
  ok(!target.data.has("stale"), "not pruned after initialization");
  deepStrictEqual(target.log.filter((l) => l.startsWith("prune")), ["prune 5"]);
  del("o1");
  await waitReconciled(db, table, "o1", { getStatus: (o) => o.status, absent: true });
  await r.waitIdle();
  deepStrictEqual(target.data.has("o1"), false);
  deepStrictEqual(r.metrics.holdfast_reconciler_deletes_total, 1);
  await r.stop();
});

Deno.test("reconciler: failures set error status, retry with backoff and converge", async () => {
  using _logs = captureLogs();
  const { db, table, target, r, put, wait } = setup();
  let failures = 0;
  target.failing = (_op, id) => id === "x" && failures++ < 3;
  // The error is visible in the row while it is retried: looked at as each retry begins (a poll
  // could miss the few ms between a failure and its retry).
  const seen: string[] = [];
  target.onUpdate = (o) => {
    const row = table.get(db.readTxn(), byId.query(o.id));
    seen.push(`${row?.status.kind}:${row?.status.error ?? ""}`);
  };
  r.start();
  put("x", 1);
  await wait("x");
  // A retry already due when its batch ends runs before that batch writes the error status (a
  // busy machine makes this likelier), so a retry may still see "pending"; later ones see the
  // error, and at least one does.
  deepStrictEqual(seen.length, 4, `one update and three retries: ${seen}`);
  ok(
    seen.every((s) => s === "pending:" || s === "error:target refused x"),
    `status at each retry: ${seen}`,
  );
  ok(seen.slice(2).every((s) => s === "error:target refused x"), `later retries: ${seen}`);
  deepStrictEqual(target.data.get("x"), 1);
  deepStrictEqual(r.metrics.holdfast_reconciler_errors_total, 3);
  ok(r.metrics.holdfast_reconciler_retries_total >= 3);
  // A failing delete is retried too.
  let delFailures = 0;
  target.failing = (op) => op === "delete" && delFailures++ < 2;
  const w = db.writeTxn(table);
  table.deleteKey(w, "x");
  w.commit();
  await r.waitIdle();
  deepStrictEqual(target.data.has("x"), false);
  await r.stop();
});

Deno.test("reconciler: a row changed during its update stays pending and is reconciled again", async () => {
  const { db, table, target, r, put, wait } = setup();
  let release!: () => void;
  target.gate = new Promise((res) => (release = res));
  r.start();
  put("y", 1);
  await waitUntil(() => target.begun.includes("y=1"), "the update of y=1 in flight");
  put("y", 2);
  target.gate = null;
  release();
  await wait("y");
  await r.waitIdle();
  deepStrictEqual(target.data.get("y"), 2);
  deepStrictEqual(table.get(db.readTxn(), byId.query("y"))?.value, 2);
  deepStrictEqual(target.log.filter((l) => l.startsWith("update")), ["update y=1", "update y=2"]);
  await r.stop();
});

Deno.test("reconciler: status since is when the row entered its status, kept while it stays", async () => {
  using _logs = captureLogs();
  const { db, table, target, r, put, wait, tick } = setup();
  let failing = true;
  target.failing = (_op, id) => id === "e" && failing;
  r.start();
  put("e", 1);
  const row = () => table.get(db.readTxn(), byId.query("e"))!;
  await waitUntil(() => row().status.kind === "error", "the first error");
  deepStrictEqual([row().status.kind, row().status.since], ["error", 1_000]);
  tick(60_000); // failing for a minute: the error keeps its first time
  const retries = r.metrics.holdfast_reconciler_retries_total;
  await waitUntil(
    () => r.metrics.holdfast_reconciler_retries_total >= retries + 2,
    "two more retries",
  );
  deepStrictEqual([row().status.kind, row().status.since], ["error", 1_000]);
  failing = false;
  await wait("e");
  deepStrictEqual([row().status.kind, row().status.since], ["done", 61_000]);
  await r.stop();
});

Deno.test("reconciler: a full reconciliation repairs an entry deleted behind its back", async () => {
  using logs = captureLogs();
  const { db, table, target, r, put, wait, holdInitialization } = setup();
  const initialized = holdInitialization();
  r.start();
  put("a", 1);
  put("b", 2);
  await wait("b");
  initialized();
  await r.waitIdle();
  target.data.delete("a"); // behind the reconciler's back
  target.data.set("b", 99);
  r.triggerFullReconcile();
  await r.waitIdle();
  deepStrictEqual([target.data.get("a"), target.data.get("b")], [1, 2]);
  deepStrictEqual(r.metrics.holdfast_reconciler_repairs_total, 2);
  const repaired = logs.records.filter((l) => l.msg === "repaired map entry");
  deepStrictEqual(repaired.map((l) => [l.key, l.reason]), [
    ["a", "holds undefined, want 1"],
    ["b", "holds 99, want 2"],
  ]);
  deepStrictEqual(table.all(db.readTxn()).map((o) => o.status.kind), ["done", "done"]);
  await r.stop();
});

Deno.test("reconciler: the periodic full reconciliation repairs without a trigger", async () => {
  using _logs = captureLogs();
  const { db, table, target, r, put, wait } = setup({ fullReconcileIntervalMs: 20 });
  r.start(); // no initializer: the table counts as initialized at once
  put("p", 7);
  await wait("p");
  target.data.delete("p");
  // Repaired by a periodic pass (every 20 ms); the wait bound is only how long a failure takes.
  await waitUntil(() => target.data.has("p"), "the periodic repair");
  deepStrictEqual(target.data.get("p"), 7);
  ok(r.metrics.holdfast_reconciler_repairs_total >= 1);
  deepStrictEqual(table.get(db.readTxn(), byId.query("p"))?.status.kind, "done");
  await r.stop();
});

Deno.test("reconciler: a full reconciliation requested before initialization waits for it", async () => {
  const { target, r, put, wait, holdInitialization } = setup();
  const initialized = holdInitialization();
  r.start();
  put("q", 1);
  await wait("q");
  r.triggerFullReconcile();
  // The loop must keep yielding to timers while it waits (no busy wake-ups).
  await new Promise((res) => setTimeout(res, 20));
  deepStrictEqual(target.log.filter((l) => l.startsWith("prune")), []);
  initialized();
  await r.waitIdle();
  deepStrictEqual(target.log.filter((l) => l.startsWith("prune")), ["prune 1"]);
  await r.stop();
});

Deno.test("reconciler: a failing full reconciliation is retried with backoff until it succeeds", async () => {
  using logs = captureLogs();
  const { r, put, wait, target } = setup();
  let failures = 0;
  target.failing = (op) => op === "prune" && failures++ < 3;
  r.start(); // no initializer: the first full pass runs at once, and fails three times
  put("z", 1);
  await wait("z");
  await r.waitIdle();
  deepStrictEqual(target.log.filter((l) => l.startsWith("prune")), ["prune 1"]);
  deepStrictEqual(r.metrics.holdfast_reconciler_prunes_total, 1);
  deepStrictEqual(r.metrics.holdfast_reconciler_errors_total, 3);
  const warned = logs.records.filter((l) => l.msg === "full reconciliation failed, will retry");
  deepStrictEqual(warned.map((l) => l.attempt), [1]); // the first, then every tenth
  await r.stop();
});

/** A target staging its writes between `beginBatch` and `endBatch`, which may fail some. */
class BatchTarget extends Target {
  staged = new Map<string, Obj>();
  batches: string[][] = [];
  /** IDs whose staged write `endBatch` fails (while they are in it). */
  failAtEnd = new Set<string>();
  inBatch = false;
  beginBatch(): void {
    this.inBatch = true;
  }
  override update(txn: ReadTxn, o: Obj): Promise<void> {
    if (!this.inBatch) return super.update(txn, o);
    this.staged.set(o.id, o);
    return Promise.resolve();
  }
  async endBatch() {
    this.inBatch = false;
    const failures = [];
    for (const o of this.staged.values()) {
      if (this.failAtEnd.has(o.id)) {
        failures.push({ row: o, error: new Error(`no room for ${o.id}`) });
      } else await super.update(null as unknown as ReadTxn, o);
    }
    if (this.staged.size > 0) this.batches.push([...this.staged.keys()]);
    this.staged.clear();
    return failures;
  }
}

Deno.test("reconciler: writes staged in a batch go in at endBatch; a row failed there gets its error and is retried", async () => {
  using _logs = captureLogs();
  let clock = 1_000;
  const db = new DB();
  const table = db.createTable<Obj>({ name: "objs", primary: byId });
  const target = new BatchTarget();
  target.failAtEnd.add("b");
  const r = new Reconciler<Obj>({
    name: "test",
    db,
    table,
    ops: target,
    getStatus: (o) => o.status,
    setStatus: (o, status) => ({ ...o, status }),
    retry: { minMs: 1, maxMs: 4, jitter: 0 },
    now: () => clock,
  });
  const w = db.writeTxn(table);
  for (const id of ["a", "b", "c"]) table.insert(w, { id, value: 1, status: pendingStatus(clock) });
  w.commit();
  r.start();
  // One batch: a and c land together; b's row says why it failed, and it is retried.
  const row = () => table.get(db.readTxn(), byId.query("b"));
  await waitUntil(() => row()?.status.kind === "error", "b's error");
  deepStrictEqual(row()?.status.kind, "error");
  deepStrictEqual(row()?.status.error, "no room for b");
  deepStrictEqual(target.batches[0], ["a", "b", "c"]);
  deepStrictEqual(table.get(db.readTxn(), byId.query("a"))?.status.kind, "done");
  deepStrictEqual(target.data.has("b"), false);
  ok(r.metrics.holdfast_reconciler_errors_total >= 1);
  target.failAtEnd.clear();
  clock += 10;
  await r.waitIdle();
  deepStrictEqual(table.get(db.readTxn(), byId.query("b"))?.status.kind, "done");
  deepStrictEqual([...target.data], [["a", 1], ["c", 1], ["b", 1]]);
  deepStrictEqual(r.metrics.holdfast_reconciler_updates_total, 3);
  await r.stop();
});
