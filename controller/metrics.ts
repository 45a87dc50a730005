/**
 * Prometheus exposition of the control plane's state and counters through the shared registry
 * (`lib/metrics.ts`). The components keep plain counters (no registry dependency in hot
 * paths); this bridge copies them at scrape time.
 *
 * @module
 */

import { type Counter, type Registry, registry as rootRegistry } from "../lib/metrics.ts";
import type { ControlPlane } from "./control_plane.ts";

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
    {
      labelNames: ["reconciler"],
    },
  );
  const counters: [Counter, () => number][] = [];
  const counter = (name: string, help: string, read: () => number, labels = true) => {
    const c = registry.counter(name, help, labels ? { labelNames: ["reconciler"] } : {});
    counters.push([c, read]);
  };
  const r = cp.reconciler.metrics, o = cp.ops.metrics, w = cp.writer.metrics;
  counter(
    "holdfast_reconciler_updates_total",
    "Successful target updates.",
    () => r.holdfast_reconciler_updates_total,
  );
  counter(
    "holdfast_reconciler_deletes_total",
    "Successful target deletes.",
    () => r.holdfast_reconciler_deletes_total,
  );
  counter(
    "holdfast_reconciler_prunes_total",
    "Completed full reconciliations (prune, verify, repair).",
    () => r.holdfast_reconciler_prunes_total,
  );
  counter(
    "holdfast_reconciler_repairs_total",
    "Map entries rewritten by the full reconciliation: deleted or changed behind its back.",
    () => r.holdfast_reconciler_repairs_total,
  );
  counter(
    "holdfast_reconciler_errors_total",
    "Failed target operations.",
    () => r.holdfast_reconciler_errors_total,
  );
  counter(
    "holdfast_reconciler_retries_total",
    "Retries run.",
    () => r.holdfast_reconciler_retries_total,
  );
  counter(
    "holdfast_lbmaps_backend_writes_total",
    "Backend entries written.",
    () => o.holdfast_lbmaps_backend_writes_total,
    false,
  );
  counter(
    "holdfast_lbmaps_backend_deletes_total",
    "Backend entries deleted.",
    () => o.holdfast_lbmaps_backend_deletes_total,
    false,
  );
  counter(
    "holdfast_lbmaps_maglev_writes_total",
    "Maglev tables written.",
    () => o.holdfast_lbmaps_maglev_writes_total,
    false,
  );
  counter(
    "holdfast_lbmaps_maglev_reused_total",
    "Maglev tables reused from the previous frontend (same backends and M) instead of built.",
    () => o.holdfast_lbmaps_maglev_reused_total,
    false,
  );
  counter(
    "holdfast_lbmaps_service_writes_total",
    "Service entries written.",
    () => o.holdfast_lbmaps_service_writes_total,
    false,
  );
  counter(
    "holdfast_lbmaps_service_deletes_total",
    "Service entries deleted.",
    () => o.holdfast_lbmaps_service_deletes_total,
    false,
  );
  counter(
    "holdfast_lbmaps_pruned_total",
    "Entries removed by prune.",
    () => o.holdfast_lbmaps_pruned_total,
    false,
  );
  counter(
    "holdfast_writer_rejected_services_total",
    "Service writes rejected: a better-priority source owns the service.",
    () => w.holdfast_writer_rejected_services_total,
    false,
  );
  counter(
    "holdfast_writer_rejected_frontends_total",
    "Frontend writes rejected: a better-priority service owns the address.",
    () => w.holdfast_writer_rejected_frontends_total,
    false,
  );
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
