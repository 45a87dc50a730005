/**
 * What a reconciler (`reconciler.ts`) is given: the operations on its target, its table and settings,
 * and the counters it keeps.
 *
 * @module
 */

import type { BackoffOptions } from "../../../lib/backoff.ts";
import type { Logger } from "../../../lib/log.ts";
import type { DB, ReadTxn, Table } from "../../../lib/statedb/mod.ts";
import type { ReconcileStatus } from "./status.ts";

/** A row whose target entries differ from what `update` wrote, and how. */
export interface Repair<R> {
  readonly row: R;
  /** What differs, for the log line (e.g. `service entry missing`). */
  readonly reason: string;
}

/** What a reconciler does to its target. Every operation must be idempotent. */
export interface Operations<R> {
  /** Makes the target hold `row`. */
  update(txn: ReadTxn, row: R): Promise<void>;
  /** Removes `row` from the target. */
  delete(txn: ReadTxn, row: R): Promise<void>;
  /** Removes from the target everything not described by `rows` (the whole table). */
  prune(txn: ReadTxn, rows: readonly R[]): Promise<void>;
  /**
   * Optional: compares the target with `rows` (the rows whose status is done) and returns those
   * it no longer holds as written. It must forget whatever would make `update` skip a write
   * (e.g. "already written" marks), since the reconciler calls `update` on each of them next.
   */
  verify?(txn: ReadTxn, rows: readonly R[]): Promise<readonly Repair<R>[]>;
  /**
   * Optional, with `endBatch`: a batch of `update`s follows (one round of changes and due
   * retries, or a full pass's repairs); the target may stage their writes until `endBatch`.
   */
  beginBatch?(): void;
  /**
   * Optional: makes the batch's staged writes take effect. Returns the rows whose writes failed
   * here (their `update` had resolved), each with its error: each is reported on its row and
   * retried like a failed `update`.
   */
  endBatch?(): Promise<readonly BatchFailure<R>[]>;
}

/** A row whose staged write failed at `endBatch`. */
export interface BatchFailure<R> {
  readonly row: R;
  readonly error: unknown;
}

/** Configuration of a `Reconciler`. */
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
  /** Retry schedule (default 10 ms .. 30 s, doubling, 20% jitter; `jitter: 0` for tests). */
  readonly retry?: BackoffOptions;
  /** Period of the full reconciliation; 0 (default): only after init and on trigger. */
  readonly fullReconcileIntervalMs?: number;
  /** Logger (default: the process logger with `component: "reconciler"`). */
  readonly logger?: Logger;
  /** The log field naming a row's primary key (default `key`; `frontend` for frontends). */
  readonly keyField?: string;
  /** Clock of the statuses' `since` (default `Date.now`; script tests pass a test clock). */
  readonly now?: () => number;
}

/** Prometheus-style counters of one reconciler. */
export interface ReconcilerMetrics {
  holdfast_reconciler_updates_total: number;
  holdfast_reconciler_deletes_total: number;
  /** Completed full reconciliations (prune, then verify). */
  holdfast_reconciler_prunes_total: number;
  /** Rows rewritten because the target no longer held them as written. */
  holdfast_reconciler_repairs_total: number;
  holdfast_reconciler_errors_total: number;
  holdfast_reconciler_retries_total: number;
  /** Rows currently failing (gauge). */
  holdfast_reconciler_failing: number;
}
