/**
 * Reconcile status kept inside rows, so a caller can wait until its write reached the target.
 *
 * Pending and done are shared constants (no allocation per row); errors carry the message.
 *
 * @module
 */

/** Where a row is in reconciliation. */
export type StatusKind = "pending" | "done" | "error";

/** Reconcile status of a row. */
export interface ReconcileStatus {
  readonly kind: StatusKind;
  /** Why the last attempt failed (kind "error"). */
  readonly error?: string;
}

/** Row needs reconciling. */
export const PENDING: ReconcileStatus = Object.freeze({ kind: "pending" });
/** Row is in the target as written. */
export const DONE: ReconcileStatus = Object.freeze({ kind: "done" });

/** Status for a failed attempt; will be retried. */
export function errorStatus(message: string): ReconcileStatus {
  return Object.freeze({ kind: "error", error: message });
}

/** Short printable form: `Done`, `Pending`, `Error: msg`. */
export function showStatus(s: ReconcileStatus): string {
  return s.kind === "done" ? "Done" : s.kind === "pending" ? "Pending" : `Error: ${s.error ?? ""}`;
}
