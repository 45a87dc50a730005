/**
 * Prometheus counters for the datapath's per-CPU BPF counters, read at scrape time: packets by
 * outcome (`reason`), per frontend (service ID) packets/bytes/new flows/drops, new flows per
 * backend ID. Counters only move forward: after a datapath reload (fresh maps) the next delta
 * starts from zero again.
 *
 * @module
 */

import type { Registry } from "../../lib/metrics.ts";
import type { LbStats } from "./structs.ts";
import type { Reason } from "./consts.ts";

/** What the exporter reads; `Datapath` implements it. */
export interface DatapathCounters {
  reasons(): Record<Reason, bigint>;
  frontendStats(): Map<number, LbStats>;
  backendNewFlows(): Map<number, bigint>;
}

/** The per-frontend counters: [name, help, the lb_stats field it copies]. */
const FRONTEND_COUNTERS = [
  [
    "holdfast_datapath_frontend_packets_total",
    "Packets encapsulated to a backend, per frontend (service ID)",
    "packets",
  ],
  ["holdfast_datapath_frontend_bytes_total", "Inner IP bytes encapsulated, per frontend", "bytes"],
  [
    "holdfast_datapath_frontend_new_flows_total",
    "Flows created by Maglev on this node, per frontend",
    "newFlows",
  ],
  [
    "holdfast_datapath_frontend_drops_total",
    "Packets to a frontend dropped (bad packet, no backend, slot 0, too big), per frontend",
    "drops",
  ],
] as const satisfies readonly (readonly [string, string, keyof LbStats])[];

/**
 * Registers the datapath counters on `registry`; they are refreshed from the maps each time the
 * registry is exposed.
 *
 * @example
 * ```ts ignore
 * import { registry } from "../../lib/metrics.ts";
 * exportDatapathMetrics(dp, registry);
 * registry.expose(); // holdfast_datapath_packets_total{reason="tx_hit"} 1234 ...
 * ```
 */
export function exportDatapathMetrics(source: DatapathCounters, registry: Registry): void {
  // Registered first so its collect hook runs before the counters below are printed.
  const scrape = registry.gauge(
    "holdfast_datapath_scrape_seconds",
    "Time spent reading the datapath's BPF counters at the last scrape",
  );
  const packets = registry.counter(
    "holdfast_datapath_packets_total",
    "Packets seen by the LB XDP program, by outcome (bpf/consts.h enum hf_reason)",
    { labelNames: ["reason"] },
  );
  const frontend = FRONTEND_COUNTERS.map(([name, help, field]) =>
    [registry.counter(name, help, { labelNames: ["service_id"] }), field] as const
  );
  const beNew = registry.counter(
    "holdfast_datapath_backend_new_flows_total",
    "Flows assigned to a backend by Maglev on this node, per backend ID",
    { labelNames: ["backend_id"] },
  );
  const last = new Map<string, bigint>();
  const advance = (
    c: { inc(labels: Record<string, string | number>, v: number): void },
    id: string,
    labels: Record<string, string | number>,
    now: bigint,
  ) => {
    const prev = last.get(id) ?? 0n;
    const delta = now >= prev ? now - prev : now; // maps were recreated: count from zero
    if (delta > 0n) c.inc(labels, Number(delta));
    last.set(id, now);
  };
  scrape.onCollect(() => {
    const started = performance.now();
    for (const [reason, n] of Object.entries(source.reasons())) {
      advance(packets, `r/${reason}`, { reason }, n);
    }
    for (const [id, s] of source.frontendStats()) {
      for (const [c, field] of frontend) advance(c, `${field}/${id}`, { service_id: id }, s[field]);
    }
    for (const [id, n] of source.backendNewFlows()) {
      advance(beNew, `bn/${id}`, { backend_id: id }, n);
    }
    scrape.set(undefined, (performance.now() - started) / 1000);
  });
}

/** What {@linkcode exportPinMetrics} reads: a load's pinned-map decisions (`_pin_migrate.ts`). */
export interface PinDecisions {
  readonly decisions: readonly { readonly map: string; readonly action: string }[];
  /** Entries carried per migrated map, once finished. */
  readonly carried: ReadonlyMap<string, number>;
}

/**
 * Registers what became of the pinned maps at this process's load: `holdfast_bpf_pinned_maps`
 * by action (reused, created, migrated) and `holdfast_bpf_migrated_entries` per migrated map
 * (read at scrape time: 0 until the migration finished after the program swap).
 */
export function exportPinMetrics(pins: PinDecisions | null, registry: Registry): void {
  if (pins === null) return;
  const maps = registry.gauge(
    "holdfast_bpf_pinned_maps",
    "Pinned BPF maps at this agent's load, by what became of them (reused, created, migrated)",
    { labelNames: ["action"] },
  );
  for (const action of ["reused", "created", "migrated"]) {
    maps.set({ action }, pins.decisions.filter((d) => d.action === action).length);
  }
  const migrated = pins.decisions.filter((d) => d.action === "migrated");
  if (migrated.length === 0) return;
  const entries = registry.gauge(
    "holdfast_bpf_migrated_entries",
    "Entries carried into each pinned map migrated at this agent's load (layout changed)",
    { labelNames: ["map"] },
  );
  entries.onCollect(() => {
    for (const d of migrated) entries.set({ map: d.map }, pins.carried.get(d.map) ?? 0);
  });
}
