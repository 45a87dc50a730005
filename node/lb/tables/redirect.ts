/**
 * Local-redirect overrides: "serve service A from service B's (node-local) backends". Kept in
 * their own table so an override may be set before service A exists and removed cleanly.
 *
 * @module
 */

import { defineIndex, type Query } from "../../../lib/statedb/mod.ts";

/** A local-redirect override. */
export interface LocalRedirect {
  /** The service whose frontends are redirected. */
  readonly serviceName: string;
  /** The service whose backends they use instead (e.g. a node-local DNS cache). */
  readonly target: string;
  /** Data source that set it. */
  readonly source: string;
}

/** Primary index: by redirected service. */
export const redirectServiceIndex = defineIndex<LocalRedirect>({
  name: "service",
  unique: true,
  keys: (r) => r.serviceName,
});

/** Query: the override of service `name`. */
export function redirectByService(name: string): Query<LocalRedirect> {
  return redirectServiceIndex.query(name);
}

/** Column names of the printed table. */
export const redirectHeader = ["Service", "Target", "Source"] as const;

/** One printed row. */
export function redirectToRow(r: LocalRedirect): string[] {
  return [r.serviceName, r.target, r.source];
}
