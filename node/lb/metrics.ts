/**
 * Prometheus exposition of the control plane's state and counters through the shared registry
 * (`lib/metrics.ts`). The components keep plain counters (no registry dependency in hot
 * paths); this bridge copies them at scrape time.
 *
 * @module
 */

import { type Counter, type Registry, registry as rootRegistry } from "../../lib/metrics.ts";
import type { ControlPlane } from "./control_plane.ts";

/** A counter a component keeps as a plain field named like the metric: [name, help]. */
type CopiedCounter<K extends string> = readonly [name: K, help: string];

/** The reconciler's counters, labelled `{reconciler}`. */
const RECONCILER_COUNTERS = [
  ["holdfast_reconciler_updates_total", "Successful target updates."],
  ["holdfast_reconciler_deletes_total", "Successful target deletes."],
  ["holdfast_reconciler_prunes_total", "Completed full reconciliations (prune, verify, repair)."],
  [
    "holdfast_reconciler_repairs_total",
    "Map entries rewritten by the full reconciliation: deleted or changed behind its back.",
  ],
  ["holdfast_reconciler_errors_total", "Failed target operations."],
  ["holdfast_reconciler_retries_total", "Retries run."],
] as const;

/** The BPF-maps writes. */
const LBMAPS_COUNTERS = [
  ["holdfast_lbmaps_backend_writes_total", "Backend entries written."],
  ["holdfast_lbmaps_backend_deletes_total", "Backend entries deleted."],
  ["holdfast_lbmaps_maglev_writes_total", "Maglev tables written."],
  [
    "holdfast_lbmaps_maglev_reused_total",
    "Maglev tables reused from the previous frontend (same backends and M) instead of built.",
  ],
  [
    "holdfast_lbmaps_maglev_unchanged_total",
    "Maglev tables rebuilt equal to the installed one (same digest), so not written again.",
  ],
  [
    "holdfast_lbmaps_maglev_built_ahead_total",
    "Maglev tables built ahead on a worker thread (a rebuild of many, e.g. a policy swap).",
  ],
  ["holdfast_lbmaps_service_writes_total", "Service entries written."],
  ["holdfast_lbmaps_service_deletes_total", "Service entries deleted."],
  ["holdfast_lbmaps_pruned_total", "Entries removed by prune."],
] as const;

/** The writer's rejections. */
const WRITER_COUNTERS = [
  [
    "holdfast_writer_rejected_services_total",
    "Service writes rejected: a better-priority source owns the service.",
  ],
  [
    "holdfast_writer_rejected_frontends_total",
    "Frontend writes rejected: a better-priority service owns the address.",
  ],
] as const;

/**
 * Registers the control plane's metrics on `registry` (default: the process registry):
 * gauges `holdfast_lb_frontends{status}`, `holdfast_lb_services`, `holdfast_lb_backends`,
 * `holdfast_reconciler_failing` and counters of the reconciler, the BPF-maps writes and the
 * writer's rejections (all `{reconciler="bpf-lbmaps"}` where it applies).
 */
export function exportControlPlaneMetrics(
  cp: ControlPlane,
  registry: Registry = rootRegistry,
): void {
  const frontends = registry.gauge("holdfast_lb_frontends", "Frontends by reconcile status.", {
    labelNames: ["status"],
  });
  const services = registry.gauge("holdfast_lb_services", "Services in the table.");
  const backends = registry.gauge("holdfast_lb_backends", "Backend addresses in the table.");
  const failing = registry.gauge(
    "holdfast_reconciler_failing",
    "Rows whose last reconcile failed.",
    { labelNames: ["reconciler"] },
  );
  const counters: [Counter, () => number][] = [];
  const copy = <K extends string>(
    fields: Readonly<Record<K, number>>,
    rows: readonly CopiedCounter<K>[],
    labelNames: readonly string[] = [],
  ) => {
    for (const [name, help] of rows) {
      counters.push([registry.counter(name, help, { labelNames }), () => fields[name]]);
    }
  };
  const r = cp.reconciler.metrics;
  copy(r, RECONCILER_COUNTERS, ["reconciler"]);
  copy(cp.ops.metrics, LBMAPS_COUNTERS);
  copy(cp.writer.metrics, WRITER_COUNTERS);
  const labels = { reconciler: cp.reconciler.config.name };
  const seen = new Map<Counter, number>();
  // Registered first among these, so its collect runs before the counters are printed.
  frontends.onCollect(() => {
    const txn = cp.db.readTxn();
    const by = { done: 0, pending: 0, error: 0 };
    cp.tables.frontends.scan(txn, (fe) => {
      by[fe.status.kind]++;
    });
    for (const [k, v] of Object.entries(by)) frontends.set({ status: k }, v);
    services.set(undefined, cp.tables.services.count(txn));
    backends.set(undefined, cp.tables.backends.count(txn));
    failing.set(labels, r.holdfast_reconciler_failing);
    for (const [c, read] of counters) {
      const now = read(), before = seen.get(c) ?? 0;
      if (now > before) c.inc(c.labelNames.length > 0 ? labels : undefined, now - before);
      seen.set(c, now);
    }
  });
}
