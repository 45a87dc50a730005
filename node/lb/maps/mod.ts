/**
 * The BPF-maps side of the LB control plane: the narrow {@linkcode LBMaps} interface to the
 * datapath's maps (`lbmaps.ts`; the real maps are `node/bpf/lbmaps_bpf.ts`), the in-memory maps
 * with a fault injector (`memory.ts`: unit and script tests, benches, `--datapath memory`), and
 * the reconciler that writes the frontends table into them ({@linkcode LBMapsOps},
 * `reconciler.ts`: backends, then the Maglev table, then the service entry). It never touches
 * BPF itself. The `_*.ts` files are the reconciler's parts (ID pools, Maglev cache, staging,
 * verification).
 *
 * @module
 */
export type * from "./lbmaps.ts";
export { FaultyLBMaps, InjectedFault, MemoryLBMaps, StagedMemoryLBMaps } from "./memory.ts";
export { type BPFMetrics, LBMapsOps, type LBMapsOpsOptions } from "./reconciler.ts";
