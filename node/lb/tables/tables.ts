/**
 * The load-balancer tables and their creation in a {@linkcode DB}.
 *
 * @module
 */

import { type DB, type Table, type WriteTxn } from "../../../lib/statedb/mod.ts";
import { type Backend, backendAddressIndex, backendServiceIndex } from "./backend.ts";
import {
  type Frontend,
  frontendAddressIndex,
  frontendRedirectIndex,
  frontendServiceIndex,
} from "./frontend.ts";
import { type LocalRedirect, redirectServiceIndex } from "./redirect.ts";
import { type Service, serviceNameIndex } from "./service.ts";

/** The four tables of the load-balancer model. */
export interface LBTables {
  readonly db: DB;
  readonly services: Table<Service>;
  readonly frontends: Table<Frontend>;
  readonly backends: Table<Backend>;
  readonly redirects: Table<LocalRedirect>;
}

/** Creates the LB tables in `db`. */
export function createLBTables(db: DB): LBTables {
  return {
    db,
    services: db.createTable<Service>({ name: "services", primary: serviceNameIndex }),
    frontends: db.createTable<Frontend>({
      name: "frontends",
      primary: frontendAddressIndex,
      secondary: [frontendServiceIndex, frontendRedirectIndex],
    }),
    backends: db.createTable<Backend>({
      name: "backends",
      primary: backendAddressIndex,
      secondary: [backendServiceIndex],
    }),
    redirects: db.createTable<LocalRedirect>({ name: "redirects", primary: redirectServiceIndex }),
  };
}

/** A write transaction locking every LB table (what the Writer uses). */
export function lbWriteTxn(t: LBTables): WriteTxn {
  return t.db.writeTxn(t.services, t.frontends, t.backends, t.redirects);
}
