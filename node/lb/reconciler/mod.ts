/**
 * Reconciler framework: drive a target from a table with update/delete/prune, a periodic full
 * pass that repairs what changed behind the reconciler's back, and the status kept in each row.
 *
 * @module
 */
export * from "./reconciler.ts";
export * from "./status.ts";
