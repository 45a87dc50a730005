/**
 * Reconcile status kept inside rows, so a caller can wait until its write reached the target
 * and an operator sees how long a row has been where it is ("Error … since 2m").
 *
 * The reconciler owns the kinds: a row is written pending, the reconciler makes it done or
 * error. `since` is when the row entered its current kind; a pending row written again stays
 * pending since the first write.
 *
 * @example
 * ```ts
 * import { errorStatus, pendingStatus, showStatus } from "./status.ts";
 * const st = pendingStatus(1_000);
 * if (pendingStatus(2_000, st) !== st) throw new Error("still pending since the first write");
 * if (showStatus(errorStatus("map full", 5_000)) !== "Error: map full") throw new Error();
 * ```
 *
 * @module
 */

/** Where a row is in reconciliation. */
export type StatusKind = "pending" | "done" | "error";

/** Reconcile status of a row. Immutable; shared between rows that entered it together. */
export interface ReconcileStatus {
  readonly kind: StatusKind;
  /** When the row entered this kind (ms since the epoch, from the writer's or reconciler's clock). */
  readonly since: number;
  /** Why the last attempt failed (kind "error"). */
  readonly error?: string;
}

/**
 * Status for a row that needs reconciling, entered at `now`; `prev` is the row's current status:
 * if it is pending already, it is returned as is (pending since the earlier write).
 */
export function pendingStatus(now: number, prev?: ReconcileStatus): ReconcileStatus {
  if (prev?.kind === "pending") return prev;
  return Object.freeze({ kind: "pending", since: now });
}

/** Status for a row that is in the target as written, since `now`. */
export function doneStatus(now: number): ReconcileStatus {
  return Object.freeze({ kind: "done", since: now });
}

/**
 * Status for a failed attempt (it will be retried); `prev` is the row's current status: a row
 * failing again keeps the time it first failed.
 */
export function errorStatus(message: string, now: number, prev?: ReconcileStatus): ReconcileStatus {
  const since = prev?.kind === "error" ? prev.since : now;
  return Object.freeze({ kind: "error", since, error: message });
}

/** Short printable form without the time: `Done`, `Pending`, `Error: msg`. */
export function showStatus(s: ReconcileStatus): string {
  return s.kind === "done" ? "Done" : s.kind === "pending" ? "Pending" : `Error: ${s.error ?? ""}`;
}
