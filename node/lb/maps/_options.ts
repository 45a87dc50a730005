/**
 * Options and counters of the BPF reconciler (`maps/reconciler.ts`).
 *
 * @module
 */

import type { MaglevBuilder } from "../../../policy-as/host/maglev_input.ts";

/** Counters of the BPF reconciler. */
export interface BPFMetrics {
  holdfast_lbmaps_backend_writes_total: number;
  holdfast_lbmaps_backend_deletes_total: number;
  holdfast_lbmaps_maglev_writes_total: number;
  /** Maglev tables copied from the previous build (same backend set and M) instead of built. */
  holdfast_lbmaps_maglev_reused_total: number;
  /** Maglev tables rebuilt equal to the installed one (same digest and M): not written again. */
  holdfast_lbmaps_maglev_unchanged_total: number;
  /** Maglev tables built ahead on a worker (a large rebuild, `_maglev_workers.ts`). */
  holdfast_lbmaps_maglev_built_ahead_total: number;
  holdfast_lbmaps_service_writes_total: number;
  holdfast_lbmaps_service_deletes_total: number;
  holdfast_lbmaps_pruned_total: number;
}

/** Every counter at zero. */
export function bpfMetrics(): BPFMetrics {
  return {
    holdfast_lbmaps_backend_writes_total: 0,
    holdfast_lbmaps_backend_deletes_total: 0,
    holdfast_lbmaps_maglev_writes_total: 0,
    holdfast_lbmaps_maglev_reused_total: 0,
    holdfast_lbmaps_maglev_unchanged_total: 0,
    holdfast_lbmaps_maglev_built_ahead_total: 0,
    holdfast_lbmaps_service_writes_total: 0,
    holdfast_lbmaps_service_deletes_total: 0,
    holdfast_lbmaps_pruned_total: 0,
  };
}

/** Options of {@linkcode LBMapsOps}. */
export interface LBMapsOpsOptions {
  /** Maglev builder (default: the TypeScript reference; the policy WASM plugs in here). */
  maglev?: MaglevBuilder;
  /** Maglev table size when a service does not set one (prime; default 16,381, docs/maglev.md). */
  maglevSize?: number;
  /** Staged tables before a batch commits early (default 256; bounds tables built, not in). */
  maxStaged?: number;
  /**
   * Workers that build Maglev tables ahead when a full pass rebuilds many with a WASM module (a
   * policy swap; `_maglev_workers.ts`). Default: one per CPU, 1..2; 0: none.
   */
  maglevWorkers?: number;
  /**
   * The prune reads every backend ID (65,536 of each family by default) on the first full pass
   * and then on every this many (default 10: every 5 min with 30 s passes); the others read only
   * the IDs ever allocated. A stray entry above those names nothing the datapath can reach (no
   * table the control plane wrote points at it) and is overwritten if its ID is ever allocated.
   */
  readAllBackendIdsEvery?: number;
}
