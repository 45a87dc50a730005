/**
 * The Writer: the only write API of the LB tables. Data sources never insert rows themselves;
 * they get a {@linkcode SourceWriter} bound to their name and call it inside a write txn.
 *
 * Semantics (after the Cilium control-plane design note):
 * - Each row belongs to a source; removing a source removes only its rows.
 * - Backends may arrive before their service; frontends created later pick them up.
 * - Several sources may report the same backend for a service; the instance of the source with
 *   the best (lowest) priority is used; a lower-priority source's service definition never
 *   replaces a better one's.
 * - A local-redirect override may be set before or after its service exists; removing it
 *   restores the service's own backends.
 * - Any change to what a frontend would select marks it pending (a new revision) so the
 *   reconcilers pick it up.
 *
 * @module
 */

import { log, type Logger } from "../../../lib/log.ts";
import { pendingStatus, type ReconcileStatus } from "../reconciler/status.ts";
import type { WriteTxn } from "../../../lib/statedb/mod.ts";
import { type Frontend, frontendsByService, frontendsRedirectedTo } from "./frontend.ts";
import { SourceWriter, type WriterCore } from "./source_writer.ts";
import { type LBTables, lbWriteTxn } from "./tables.ts";

/**
 * Default source priorities; lower wins. Unknown sources get {@linkcode UNKNOWN_PRIORITY}.
 * `health` (the LB node's own probes, `node/lb/health/`) only ever writes `quarantined` instances
 * of backends another source reports, so its verdict overrides theirs until it releases them.
 */
export const DEFAULT_PRIORITIES: Readonly<Record<string, number>> = Object.freeze({
  health: 0,
  k8s: 10,
  file: 20,
  redis: 30,
  cluster: 40,
});
/** Priority of a source not in the priority table. */
export const UNKNOWN_PRIORITY = 100;

export type { BackendInput, FrontendInput, ServiceInput } from "./inputs.ts";

/** Counters of the writer's decisions, Prometheus-style names. */
export interface WriterMetrics {
  holdfast_writer_rejected_services_total: number;
  holdfast_writer_rejected_frontends_total: number;
}

/** Owns cross-table consistency of the LB tables. */
export class Writer implements WriterCore {
  readonly tables: LBTables;
  readonly #priorities: Readonly<Record<string, number>>;
  /** Backend-services already refreshed in a txn: refresh each at most once per txn. */
  readonly #refreshed = new WeakMap<WriteTxn, Set<string>>();
  readonly #strings = new Map<string, string>();
  readonly metrics: WriterMetrics = {
    holdfast_writer_rejected_services_total: 0,
    holdfast_writer_rejected_frontends_total: 0,
  };
  /** @internal Where the writer's decisions (rejections) are logged. */
  readonly log: Logger;
  readonly #now: () => number;
  /** The last pending status handed out: rows written in the same millisecond share it. */
  #pending: ReconcileStatus = pendingStatus(0);

  constructor(
    tables: LBTables,
    options: {
      priorities?: Readonly<Record<string, number>>;
      /** Logger (default: the process logger with `component: "writer"`). */
      logger?: Logger;
      /** Clock of the rows' pending `since` (default `Date.now`). */
      now?: () => number;
    } = {},
  ) {
    this.tables = tables;
    this.#priorities = options.priorities ?? DEFAULT_PRIORITIES;
    this.log = options.logger ?? log.with({ component: "writer" });
    this.#now = options.now ?? Date.now;
  }

  /**
   * The status of a row written now: `prev` if the row is pending already (pending since the
   * earlier write), else pending since now.
   * @internal
   */
  pending(prev?: ReconcileStatus): ReconcileStatus {
    if (prev?.kind === "pending") return prev;
    const now = this.#now();
    if (this.#pending.since !== now) this.#pending = pendingStatus(now);
    return this.#pending;
  }

  /** A write transaction locking all LB tables. Commit it before any `await`. */
  txn(): WriteTxn {
    return lbWriteTxn(this.tables);
  }

  /** The writer for one data source. */
  source(name: string): SourceWriter {
    return new SourceWriter(this, name);
  }

  /** Priority of a source (lower wins). */
  priority(source: string): number {
    return this.#priorities[source] ?? UNKNOWN_PRIORITY;
  }

  /** Shares equal small strings (port names, zones, sources) between rows. */
  intern(s: string): string {
    if (s.length === 0) return "";
    const got = this.#strings.get(s);
    if (got !== undefined) return got;
    if (this.#strings.size < 4096) this.#strings.set(s, s);
    return s;
  }

  /**
   * Marks pending every frontend whose selection depends on service `name`'s backends: those
   * using its backends (its own and those redirected to it) and its redirected frontends (they
   * fall back to it).
   * @internal
   */
  refreshFrontends(txn: WriteTxn, name: string): void {
    let done = this.#refreshed.get(txn);
    if (done === undefined) this.#refreshed.set(txn, done = new Set());
    if (done.has(name)) return;
    done.add(name);
    const fes = this.tables.frontends;
    const own = fes.list(txn, frontendsByService(name));
    // Those using its backends, in address order (as one index held them before): its own
    // without a redirect (or redirected to itself) and the others redirected to it.
    let uses = own;
    const redirected = fes.list(txn, frontendsRedirectedTo(name));
    if (redirected.some((fe) => fe.serviceName !== name)) {
      uses = own.filter((fe) => usesOwnBackends(fe, name)).concat(
        redirected.filter((fe) => fe.serviceName !== name),
      )
        .sort((a, b) => a.address < b.address ? -1 : 1);
    }
    for (const fe of uses) {
      if (uses === own && !usesOwnBackends(fe, name)) continue;
      // Written pending in this very txn (e.g. its service arrived with its backends): it
      // already has a revision no reconciler has seen; a second insert would change nothing.
      if (fe.status.kind === "pending" && fes.writtenIn(txn, fe.address)) continue;
      fes.insert(txn, { ...fe, status: this.pending(fe.status) });
    }
    for (const fe of own) {
      if (fe.redirectTo !== null && fe.redirectTo !== name) {
        fes.insert(txn, { ...fe, status: this.pending(fe.status) });
      }
    }
  }
}

/** Whether `fe`, a frontend of service `name`, uses that service's backends (no redirect away). */
function usesOwnBackends(fe: Frontend, name: string): boolean {
  return fe.redirectTo === null || fe.redirectTo === name;
}
