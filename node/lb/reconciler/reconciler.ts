/**
 * A generic reconciler: observes one table's changes and drives a target with idempotent
 * `update` / `delete` / `prune` operations, writing the outcome back into each row's status.
 *
 * - Rows whose status is pending (or error, after a restart) are updated; deleted rows are
 *   deleted; rows already done are skipped (that includes our own status write-backs).
 * - Changes are taken in batches; a batch's statuses are written in one transaction, only onto
 *   the very row reconciled (a newer version stays pending; rows done in the same ms share one
 *   status). A target may stage a batch (`beginBatch`/`endBatch`); its failed rows are retried.
 * - Failures are retried with exponential backoff and jitter (`lib/backoff.ts`); a newer
 *   version or a delete supersedes a queued retry.
 * - A full reconciliation runs once the table is initialized, then on `triggerFullReconcile()`
 *   or every `fullReconcileIntervalMs`: prune (remove from the target what no row wants), then
 *   `verify` (find the done rows the target no longer holds as written, e.g. an entry deleted or
 *   changed behind our back) and update those again, logging `repaired map entry`.
 *
 * @module
 */

import { backoffDelay, type BackoffOptions } from "../../../lib/backoff.ts";
import { log, type Logger } from "../../../lib/log.ts";
import type { DB, Key, ReadTxn, Table } from "../../../lib/statedb/mod.ts";
import { waitAny, Watch } from "../../../lib/statedb/mod.ts";
import { doneStatus, errorStatus, type ReconcileStatus } from "./status.ts";

import type { ReconcilerConfig, ReconcilerMetrics } from "./config.ts";
export type * from "./config.ts";

interface Retry<R> {
  attempt: number;
  due: number;
  /** The deleted row for a failed delete; null for a failed update (re-read at retry time). */
  deleted: R | null;
}

/** Runs {@linkcode Operations} against a table's changes. Start it, stop it when done. */
export class Reconciler<R> {
  readonly config: ReconcilerConfig<R>;
  readonly metrics: ReconcilerMetrics = {
    holdfast_reconciler_updates_total: 0,
    holdfast_reconciler_deletes_total: 0,
    holdfast_reconciler_prunes_total: 0,
    holdfast_reconciler_repairs_total: 0,
    holdfast_reconciler_errors_total: 0,
    holdfast_reconciler_retries_total: 0,
    holdfast_reconciler_failing: 0,
  };
  readonly #retries = new Map<Key, Retry<R>>();
  /** Retries whose update resolved in the open batch (its `endBatch` may still fail them). */
  readonly #settled = new Map<Key, Retry<R>>();
  readonly #log: Logger;
  readonly #now: () => number;
  #lastDone: ReconcileStatus | null = null;
  readonly #retry: BackoffOptions;
  #stop = new AbortController();
  #loop: Promise<void> | null = null;
  #fullWanted = false;
  #fullWatch = new Watch();
  /** A full reconciliation completed since start (the first one waits for initialization). */
  #fullDone = false;
  #lastFull = 0;
  /** Failed full reconciliations in a row, and when the next try is due (backoff). */
  #fullFailures = 0;
  #fullDue = 0;
  #idle: (() => void)[] = [];
  #isIdle = false;
  #seenRev = -1;

  constructor(config: ReconcilerConfig<R>) {
    this.config = config;
    this.#log = (config.logger ?? log.with({ component: "reconciler" })).with({
      reconciler: config.name,
    });
    this.#now = config.now ?? Date.now;
    this.#retry = { minMs: 10, maxMs: 30_000, ...config.retry };
    backoffDelay(1, this.#retry); // a bad schedule fails here, not at the first failure
  }

  /** Starts the loop. */
  start(): void {
    if (this.#loop !== null) throw new Error(`Reconciler "${this.config.name}" already started`);
    this.#stop = new AbortController();
    this.#loop = this.#run().catch((err) => {
      this.#log.error("reconciler loop crashed", { err });
    });
  }

  /** Stops the loop and waits for the current batch to finish. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    this.#loop = null;
  }

  /** Requests a full reconciliation (prune, verify, repair) now; runs once the table is initialized. */
  triggerFullReconcile(): void {
    this.#fullWanted = true;
    this.#isIdle = false;
    this.#fullWatch.close();
  }

  /** Resolves once every change seen so far is reconciled and no retry is queued. */
  waitIdle(): Promise<void> {
    if (this.#isIdle && this.#stillIdle()) return Promise.resolve();
    return new Promise((r) => this.#idle.push(r));
  }

  /**
   * {@link waitIdle} bounded by `timeoutMs`: true once idle, false when the time ran out first
   * (e.g. a write keeps failing and stays queued for retry).
   */
  async waitIdleWithin(timeoutMs: number): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([
        this.waitIdle().then(() => true),
        new Promise<false>((r) => timer = setTimeout(() => r(false), timeoutMs)),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  #stillIdle(): boolean {
    const c = this.config;
    const txn = c.db.readTxn();
    return c.table.revision(txn) === this.#seenRev && this.#retries.size === 0 &&
      !this.#fullWanted && (this.#fullDone || !c.table.initialized(txn)[0]);
  }

  #keyFields(key: Key): Record<string, unknown> {
    return { [this.config.keyField ?? "key"]: key };
  }

  #fail(key: Key, deleted: R | null, err: unknown): string {
    const prev = this.#retries.get(key) ?? this.#settled.get(key);
    const attempt = (prev?.attempt ?? 0) + 1;
    const due = Date.now() + backoffDelay(attempt, this.#retry);
    this.#retries.set(key, { attempt, due, deleted });
    this.metrics.holdfast_reconciler_errors_total++;
    if (attempt === 1 || attempt % 10 === 0) {
      this.#log.warn(deleted ? "delete failed, will retry" : "update failed, will retry", {
        ...this.#keyFields(key),
        attempt,
        err,
      });
    }
    return err instanceof Error ? err.message : String(err);
  }

  #doneAt(now: number): ReconcileStatus {
    return this.#lastDone?.since === now ? this.#lastDone : (this.#lastDone = doneStatus(now));
  }
  /** Updates `row`; its new status goes to `statuses`. Returns whether the update succeeded. */
  async #update(txn: ReadTxn, key: Key, row: R, statuses: [R, ReconcileStatus][]) {
    try {
      await this.config.ops.update(txn, row);
      this.metrics.holdfast_reconciler_updates_total++;
      statuses.push([row, this.#doneAt(this.#now())]);
      return true;
    } catch (e) {
      const prev = this.config.getStatus(row);
      statuses.push([row, errorStatus(this.#fail(key, null, e), this.#now(), prev)]);
      return false;
    }
  }

  async #run(): Promise<void> {
    const { db, table, ops, getStatus } = this.config;
    const batchSize = this.config.batchSize ?? 1000;
    const iter = table.changes();
    const signal = this.#stop.signal;
    try {
      while (!signal.aborted) {
        const txn = db.readTxn();
        const [changes, watch] = iter.next(txn, batchSize);
        const statuses: [R, ReconcileStatus][] = [];
        ops.beginBatch?.();
        for (const c of changes) {
          const key = table.primaryKey(c.row);
          if (c.deleted) {
            this.#retries.delete(key);
            try {
              await ops.delete(txn, c.row);
              this.metrics.holdfast_reconciler_deletes_total++;
            } catch (e) {
              this.#fail(key, c.row, e);
            }
            continue;
          }
          const kind = getStatus(c.row).kind;
          if (kind === "done") continue;
          if (kind === "error" && this.#retries.has(key)) continue;
          this.#retries.delete(key);
          await this.#update(txn, key, c.row, statuses);
        }
        await this.#runRetries(statuses);
        await this.#endBatch(statuses);
        this.#seenRev = table.revision(txn);

        // A trigger is remembered in #fullWanted; a fired watch must not wake every round.
        if (this.#fullWatch.stale) this.#fullWatch = new Watch();
        const [init, initWatch] = table.initialized(db.readTxn());
        const interval = this.config.fullReconcileIntervalMs ?? 0;
        if (
          init && Date.now() >= this.#fullDue &&
          (!this.#fullDone || this.#fullWanted ||
            (interval > 0 && Date.now() - this.#lastFull >= interval))
        ) {
          await this.#fullReconcile(statuses);
        }
        this.#writeStatuses(statuses);
        this.metrics.holdfast_reconciler_failing = this.#retries.size;
        if (watch.stale && changes.length >= batchSize) continue;
        let timeoutMs: number | undefined;
        for (const r of this.#retries.values()) {
          timeoutMs = Math.min(timeoutMs ?? Infinity, r.due - Date.now());
        }
        if (this.#fullWanted && init) {
          timeoutMs = Math.min(timeoutMs ?? Infinity, this.#fullDue - Date.now());
        }
        if (init && interval > 0) {
          timeoutMs = Math.min(timeoutMs ?? Infinity, this.#lastFull + interval - Date.now());
        }
        if (
          !watch.stale && this.#retries.size === 0 && !this.#fullWanted && (this.#fullDone || !init)
        ) {
          this.#isIdle = true;
          const idle = this.#idle;
          this.#idle = [];
          for (const r of idle) r();
        }
        const watches = [watch, this.#fullWatch];
        if (!init) watches.push(initWatch);
        await waitAny(watches, { timeoutMs, signal });
        this.#isIdle = false;
      }
    } finally {
      iter.close();
    }
  }

  /** Prune, then verify the done rows and update those the target lost or changed. */
  async #fullReconcile(statuses: [R, ReconcileStatus][]): Promise<void> {
    const { db, table, ops, getStatus } = this.config;
    this.#fullWanted = false;
    this.#lastFull = Date.now();
    const txn = db.readTxn();
    const rows = table.all(txn);
    try {
      await ops.prune(txn, rows);
      const repairs = ops.verify === undefined
        ? []
        : await ops.verify(txn, rows.filter((r) => getStatus(r).kind === "done"));
      const repaired: [Key, string, R][] = [], from = statuses.length;
      ops.beginBatch?.();
      for (const { row, reason } of repairs) {
        const key = table.primaryKey(row);
        if (this.#retries.has(key)) continue;
        if (await this.#update(txn, key, row, statuses)) repaired.push([key, reason, row]);
      }
      const failed = await this.#endBatch(statuses, from);
      for (const [key, reason, row] of repaired) {
        if (failed.has(row)) continue;
        this.metrics.holdfast_reconciler_repairs_total++;
        this.#log.info("repaired map entry", { ...this.#keyFields(key), reason });
      }
      this.metrics.holdfast_reconciler_prunes_total++;
      this.#fullDone = true;
      this.#fullFailures = 0;
    } catch (err) {
      this.metrics.holdfast_reconciler_errors_total++;
      const attempt = ++this.#fullFailures;
      this.#fullWanted = true; // retried with backoff
      this.#fullDue = Date.now() + backoffDelay(attempt, this.#retry);
      if (attempt === 1 || attempt % 10 === 0) {
        this.#log.warn("full reconciliation failed, will retry", { attempt, err });
      }
    }
  }

  async #runRetries(statuses: [R, ReconcileStatus][]): Promise<void> {
    if (this.#retries.size === 0) return;
    const { db, table, ops, getStatus } = this.config;
    const now = Date.now();
    const txn = db.readTxn();
    for (const [key, r] of [...this.#retries]) {
      if (r.due > now) continue;
      this.metrics.holdfast_reconciler_retries_total++;
      const cur = table.get(txn, { index: table.schema.primary, key });
      if (r.deleted !== null) {
        if (cur !== undefined) {
          this.#retries.delete(key); // re-inserted: its update supersedes the delete
          continue;
        }
        try {
          await ops.delete(txn, r.deleted);
          this.#retries.delete(key);
          this.metrics.holdfast_reconciler_deletes_total++;
        } catch (e) {
          this.#fail(key, r.deleted, e);
        }
        continue;
      }
      if (cur === undefined || getStatus(cur).kind === "done") {
        this.#retries.delete(key);
        continue;
      }
      if (await this.#update(txn, key, cur, statuses)) {
        this.#retries.delete(key);
        this.#settled.set(key, r);
      }
    }
  }

  /**
   * Ends the batch (`ops.endBatch`): each row whose staged write failed there gets an error
   * status in place of its done one, and a retry. Returns those rows.
   */
  async #endBatch(statuses: [R, ReconcileStatus][], from = 0): Promise<Set<R>> {
    const { ops, table, getStatus } = this.config;
    const failed = new Set<R>();
    let failures: readonly { row: R; error: unknown }[] = [];
    try {
      if (ops.endBatch !== undefined) failures = await ops.endBatch();
    } catch (error) {
      // Nothing says which write failed: every update of the batch is failed and retried.
      const done = statuses.slice(from).filter(([, st]) => st.kind === "done");
      failures = done.map(([row]) => ({ row, error }));
    }
    for (const { row, error } of failures) {
      if (failed.has(row)) continue;
      failed.add(row);
      const message = this.#fail(table.primaryKey(row), null, error);
      const i = statuses.findLastIndex(([r, st]) => r === row && st.kind === "done");
      if (i < 0) continue;
      statuses[i] = [row, errorStatus(message, this.#now(), getStatus(row))];
      this.metrics.holdfast_reconciler_updates_total--;
    }
    this.#settled.clear();
    return failed;
  }

  #writeStatuses(statuses: [R, ReconcileStatus][]): void {
    if (statuses.length === 0) return;
    const { db, table, setStatus, getStatus } = this.config;
    const w = db.writeTxn(table);
    try {
      for (const [row, st] of statuses) {
        const cur = table.get(w, { index: table.schema.primary, key: table.primaryKey(row) });
        // Only the version we reconciled; a newer one stays pending for the next round.
        if (cur !== row) continue;
        const old = getStatus(row);
        if (old.kind === st.kind && old.error === st.error) continue;
        table.insert(w, setStatus(row, st));
      }
      w.commit();
    } finally {
      w.abort();
    }
  }
}

/**
 * Waits until the row with primary key `key` has status done at a revision ≥ `minRevision`
 * (or is absent, with `absent: true`). Rejects on timeout with the last status seen.
 */
export async function waitReconciled<R>(
  db: DB,
  table: Table<R>,
  key: Key,
  options: {
    getStatus: (row: R) => ReconcileStatus;
    minRevision?: number;
    timeoutMs?: number;
    absent?: boolean;
  },
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 5000);
  for (;;) {
    const txn = db.readTxn();
    const [row, watch] = table.getWatch(txn, { index: table.schema.primary, key });
    const rev = table.rowRevision(txn, key);
    if (
      options.absent
        ? row === undefined
        : row !== undefined && options.getStatus(row).kind === "done" &&
          rev >= (options.minRevision ?? 0)
    ) return;
    const left = deadline - Date.now();
    if (left <= 0 || (await waitAny([watch], { timeoutMs: left })) === "timeout") {
      const st = row === undefined ? "absent" : JSON.stringify(options.getStatus(row));
      throw new Error(
        `Timed out waiting for "${
          String(key)
        }" in table "${table.name}" to reconcile: status ${st}`,
      );
    }
  }
}
