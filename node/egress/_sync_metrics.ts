/**
 * Metrics of the conntrack sync (sender and receiver share them).
 *
 * @module
 */

import {
  type Counter,
  type Gauge,
  type Registry,
  registry as defaultRegistry,
} from "../../lib/metrics.ts";

/** The sync's counters. */
export interface SyncMetrics {
  /** Entries by direction (sent/received) and op (upsert/remove). */
  entries: Counter;
  resyncs: Counter;
  dropped: Counter;
  overruns: Counter;
  failed: Counter;
  peers: Gauge;
}

/** Registers (or finds) the sync metrics in `registry`. */
export function syncMetrics(registry: Registry = defaultRegistry): SyncMetrics {
  return {
    entries: registry.counter(
      "holdfast_egress_sync_entries_total",
      "Conntrack entries streamed between NAT pods, by direction (sent, received) and op (upsert, remove).",
      { labelNames: ["direction", "op"] },
    ),
    resyncs: registry.counter(
      "holdfast_egress_sync_resyncs_total",
      "Full resyncs of the owned addresses' conntrack entries sent to standby peers.",
    ),
    dropped: registry.counter(
      "holdfast_egress_sync_dropped_total",
      "Entries dropped because a peer's send buffer was full (the peer is then resynced).",
    ),
    overruns: registry.counter(
      "holdfast_conntrack_overruns_total",
      "Conntrack event queue overruns (ENOBUFS: events lost, a resync follows).",
    ),
    failed: registry.counter(
      "holdfast_egress_sync_inject_failures_total",
      "Received entries the kernel refused to inject or remove.",
    ),
    peers: registry.gauge(
      "holdfast_egress_sync_peers_connected",
      "Standby peers the sync sender is connected to now.",
    ),
  };
}
