/**
 * Frontend rows: an address clients connect to (`IP:PORT/PROTO`) and the service behind it.
 * The BPF reconciler observes this table: each frontend is one services-map entry plus its
 * Maglev table. Its reconcile status lives here.
 *
 * @module
 */

import { defineIndex, type Query } from "../../../lib/statedb/mod.ts";
import { type ReconcileStatus, showStatus } from "../reconciler/status.ts";
import { formatAge } from "./print.ts";

/** A frontend. Immutable: clone, change, insert. */
export interface Frontend {
  /** Canonical `IP:PORT/PROTO`; primary key. */
  readonly address: string;
  /** Owning service, `namespace/name`. */
  readonly serviceName: string;
  /** Service port name; backends are matched by it ("" matches every backend port). */
  readonly portName: string;
  /** Local-redirect override: use this service's backends instead (null: none). */
  readonly redirectTo: string | null;
  /** Reconcile status of the BPF maps for this frontend. */
  readonly status: ReconcileStatus;
}

/** The service whose backends this frontend uses. */
export function backendServiceOf(fe: Frontend): string {
  return fe.redirectTo ?? fe.serviceName;
}

/** Primary index: by address. */
export const frontendAddressIndex = defineIndex<Frontend>({
  name: "address",
  unique: true,
  keys: (f) => f.address,
});

/** Frontends of a service. */
export const frontendServiceIndex = defineIndex<Frontend>({
  name: "service",
  unique: false,
  keys: (f) => f.serviceName,
});

/** No key: a frontend without a redirect is not in {@linkcode frontendRedirectIndex}. */
const NO_REDIRECT: readonly string[] = Object.freeze([]);

/**
 * Redirected frontends by their redirect target (a frontend without one has no entry: it uses
 * its own service's backends, which {@linkcode frontendServiceIndex} finds). Most frontends have
 * no redirect, so most row writes touch one secondary tree, not two.
 */
export const frontendRedirectIndex = defineIndex<Frontend>({
  name: "redirect",
  unique: false,
  keys: (f) => f.redirectTo ?? NO_REDIRECT,
});

/** Query: the frontend at `address` (`IP:PORT/PROTO`). */
export function frontendByAddress(address: string): Query<Frontend> {
  return frontendAddressIndex.query(address);
}

/** Query: frontends owned by service `name`. */
export function frontendsByService(name: string): Query<Frontend> {
  return frontendServiceIndex.query(name);
}

/** Query: frontends redirected to service `name` (their own service's or another's). */
export function frontendsRedirectedTo(name: string): Query<Frontend> {
  return frontendRedirectIndex.query(name);
}

/** Column names of the printed table. */
export const frontendHeader = [
  "Address",
  "Service",
  "PortName",
  "RedirectTo",
  "Status",
  "Since",
  "Backends",
] as const;

/**
 * One printed row; `backends` is the selection the reconciler would write (see select.ts).
 * `Since` is the status's age at `now` (e.g. `Error: map full  2m5s`).
 */
export function frontendToRow(
  f: Frontend,
  backends: readonly string[],
  now: number = Date.now(),
): string[] {
  return [
    f.address,
    f.serviceName,
    f.portName === "" ? "-" : f.portName,
    f.redirectTo ?? "-",
    showStatus(f.status),
    formatAge(now - f.status.since),
    backends.length === 0 ? "-" : backends.join(", "),
  ];
}
