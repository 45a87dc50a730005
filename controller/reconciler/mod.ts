/**
 * Reconciler framework: drive a target from a table with update/delete/prune.
 *
 * @module
 */
export * from "./reconciler.ts";
