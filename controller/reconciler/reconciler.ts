/**
 * A generic reconciler: observes one table's changes and drives a target with idempotent
 * `update` / `delete` / `prune` operations, writing the outcome back into each row's status.
 *
 * - Rows whose status is pending (or error, after a restart) are updated; deleted rows are
 *   deleted; rows already done are skipped (that includes our own status write-backs).
 * - Changes are taken in batches; the status of a whole batch is written in one transaction,
 *   and only onto the very row object that was reconciled (a newer version stays pending).
 * - Failures are retried with exponential backoff; a newer version or a delete supersedes a
 *   queued retry.
 * - Prune (remove from the target what no row wants) runs only once the table is initialized,
 *   then on `triggerPrune()` or every `pruneIntervalMs`.
 *
 * @module
 */

import type { ReconcileStatus } from "../lb/status.ts";
import { DONE, errorStatus } from "../lb/status.ts";
import type { DB, Key, ReadTxn, Table } from "../statedb/mod.ts";
import { waitAny, Watch } from "../statedb/mod.ts";

/** What a reconciler does to its target. Every operation must be idempotent. */
export interface Operations<R> {
  /** Makes the target hold `row`. */
  update(txn: ReadTxn, row: R): Promise<void>;
  /** Removes `row` from the target. */
  delete(txn: ReadTxn, row: R): Promise<void>;
  /** Removes from the target everything not described by `rows` (the whole table). */
  prune(txn: ReadTxn, rows: readonly R[]): Promise<void>;
}

/** Configuration of a {@linkcode Reconciler}. */
export interface ReconcilerConfig<R> {
  /** Name used in logs and metrics. */
  readonly name: string;
  readonly db: DB;
  readonly table: Table<R>;
  readonly ops: Operations<R>;
  readonly getStatus: (row: R) => ReconcileStatus;
  /** Returns a copy of `row` with `status`. */
  readonly setStatus: (row: R, status: ReconcileStatus) => R;
  /** Changes per batch (default 1000). */
  readonly batchSize?: number;
  /** Backoff bounds for retries (default 10 ms .. 30 s). */
  readonly retryMinMs?: number;
  readonly retryMaxMs?: number;
  /** Periodic prune; 0 (default) prunes only after init and on trigger. */
  readonly pruneIntervalMs?: number;
  readonly log?: (level: "info" | "warn", msg: string, fields: Record<string, unknown>) => void;
}

/** Prometheus-style counters of one reconciler. */
export interface ReconcilerMetrics {
  holdfast_reconciler_updates_total: number;
  holdfast_reconciler_deletes_total: number;
  holdfast_reconciler_prunes_total: number;
  holdfast_reconciler_errors_total: number;
  holdfast_reconciler_retries_total: number;
  /** Rows currently failing (gauge). */
  holdfast_reconciler_failing: number;
}

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
    holdfast_reconciler_errors_total: 0,
    holdfast_reconciler_retries_total: 0,
    holdfast_reconciler_failing: 0,
  };
  readonly #retries = new Map<Key, Retry<R>>();
  #stop = new AbortController();
  #loop: Promise<void> | null = null;
  #pruneWanted = false;
  #pruneWatch = new Watch();
  #pruned = false;
  #lastPrune = 0;
  #idle: (() => void)[] = [];
  #isIdle = false;

  constructor(config: ReconcilerConfig<R>) {
    this.config = config;
  }

  /** Starts the loop. */
  start(): void {
    if (this.#loop !== null) throw new Error(`Reconciler "${this.config.name}" already started`);
    this.#stop = new AbortController();
    this.#loop = this.#run().catch((e) => {
      this.#log("warn", "reconciler loop crashed", { error: String(e) });
    });
  }

  /** Stops the loop and waits for the current batch to finish. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    this.#loop = null;
  }

  /** Requests a prune now (effective once the table is initialized). */
  triggerPrune(): void {
    this.#pruneWanted = true;
    this.#isIdle = false;
    this.#pruneWatch.close();
  }

  /** Resolves once every change seen so far is reconciled and no retry is queued. */
  waitIdle(): Promise<void> {
    if (this.#isIdle && this.#stillIdle()) return Promise.resolve();
    return new Promise((r) => this.#idle.push(r));
  }

  #stillIdle(): boolean {
    const c = this.config;
    const txn = c.db.readTxn();
    return c.table.revision(txn) === this.#seenRev && this.#retries.size === 0 &&
      !this.#pruneWanted && (this.#pruned || !c.table.initialized(txn)[0]);
  }
  #seenRev = -1;

  #log(level: "info" | "warn", msg: string, fields: Record<string, unknown>): void {
    const f = { reconciler: this.config.name, ...fields };
    if (this.config.log) this.config.log(level, msg, f);
    else console.log(JSON.stringify({ level, msg, ...f }));
  }

  #backoff(attempt: number): number {
    const min = this.config.retryMinMs ?? 10, max = this.config.retryMaxMs ?? 30_000;
    return Math.min(max, min * 2 ** Math.min(attempt - 1, 30));
  }

  #fail(key: Key, deleted: R | null, e: unknown): string {
    const prev = this.#retries.get(key);
    const attempt = (prev?.attempt ?? 0) + 1;
    this.#retries.set(key, { attempt, due: Date.now() + this.#backoff(attempt), deleted });
    this.metrics.holdfast_reconciler_errors_total++;
    const message = e instanceof Error ? e.message : String(e);
    if (attempt === 1 || attempt % 10 === 0) {
      this.#log("warn", deleted ? "delete failed, will retry" : "update failed, will retry", {
        key,
        attempt,
        error: message,
      });
    }
    return message;
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
          try {
            await ops.update(txn, c.row);
            this.metrics.holdfast_reconciler_updates_total++;
            statuses.push([c.row, DONE]);
          } catch (e) {
            statuses.push([c.row, errorStatus(this.#fail(key, null, e))]);
          }
        }
        await this.#runRetries(statuses);
        this.#writeStatuses(statuses);
        this.#seenRev = table.revision(txn);

        const [init, initWatch] = table.initialized(db.readTxn());
        const interval = this.config.pruneIntervalMs ?? 0;
        if (
          init &&
          (!this.#pruned || this.#pruneWanted ||
            (interval > 0 && Date.now() - this.#lastPrune >= interval))
        ) {
          this.#pruneWanted = false;
          this.#pruneWatch = new Watch();
          const ptxn = db.readTxn();
          try {
            await ops.prune(ptxn, table.all(ptxn));
            this.metrics.holdfast_reconciler_prunes_total++;
            this.#pruned = true;
          } catch (e) {
            this.metrics.holdfast_reconciler_errors_total++;
            this.#pruneWanted = true; // retried on the next round
            this.#log("warn", "prune failed, will retry", { error: String(e) });
          }
          this.#lastPrune = Date.now();
        }
        this.metrics.holdfast_reconciler_failing = this.#retries.size;
        if (watch.stale && changes.length >= batchSize) continue;
        let timeoutMs: number | undefined;
        for (const r of this.#retries.values()) {
          timeoutMs = Math.min(timeoutMs ?? Infinity, r.due - Date.now());
        }
        if (this.#pruneWanted) {
          timeoutMs = Math.min(timeoutMs ?? Infinity, this.config.retryMinMs ?? 10);
        }
        if (init && interval > 0) timeoutMs = Math.min(timeoutMs ?? Infinity, interval);
        if (
          !watch.stale && this.#retries.size === 0 && !this.#pruneWanted && (this.#pruned || !init)
        ) {
          this.#isIdle = true;
          const idle = this.#idle;
          this.#idle = [];
          for (const r of idle) r();
        }
        const watches = [watch, this.#pruneWatch];
        if (!init) watches.push(initWatch);
        await waitAny(watches, { timeoutMs, signal });
        this.#isIdle = false;
      }
    } finally {
      iter.close();
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
      try {
        await ops.update(txn, cur);
        this.#retries.delete(key);
        this.metrics.holdfast_reconciler_updates_total++;
        statuses.push([cur, DONE]);
      } catch (e) {
        statuses.push([cur, errorStatus(this.#fail(key, null, e))]);
      }
    }
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
