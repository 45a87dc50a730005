/**
 * Holdfast's control plane: the table store, the load-balancer model and its Writer, the
 * generic reconciler (with the reconcile status rows carry), the BPF-maps reconciler, the
 * in-memory maps and the data sources. The script-test runner (`script/`) and the test helpers
 * (`_testing.ts`) are not part of it.
 *
 * @example
 * ```ts
 * import { createControlPlane, DEFAULT_CONFIG_YAML, FileSource, MemoryLBMaps } from "./mod.ts";
 * const cp = await createControlPlane(new MemoryLBMaps());
 * const file = new FileSource(cp.writer);
 * cp.start();
 * file.load(DEFAULT_CONFIG_YAML);
 * await cp.waitFrontend("10.0.100.1:80/TCP");
 * await cp.stop();
 * ```
 *
 * @module
 */
export { type BPFMetrics, LBMapsOps, type LBMapsOpsOptions } from "./maps/reconciler.ts";
export {
  type ControlPlane,
  type ControlPlaneOptions,
  createControlPlane,
  frontendStatus,
} from "./control_plane.ts";
export * from "./tables/mod.ts";
export type * from "./maps/lbmaps.ts";
export { FaultyLBMaps, InjectedFault, MemoryLBMaps } from "./maps/memory.ts";
// Maglev tables: one home, policy-as/host (the builder interface, its checks, the TS builder).
export { MAGLEV_M_DEFAULT } from "../../policy-as/host/abi.ts";
export {
  checkMaglevSize,
  type MaglevBackend,
  type MaglevBuilder,
  MaglevInputError,
} from "../../policy-as/host/maglev_input.ts";
export { TsMaglevBuilder } from "../../policy-as/host/maglev_ts.ts";
export { exportControlPlaneMetrics } from "./metrics.ts";
export * from "./reconciler/mod.ts";
export {
  ConfigError,
  DEFAULT_CONFIG_YAML,
  type FileConfig,
  FileSource,
  parseConfig,
} from "./sources/file_source.ts";
export * from "./sources/k8s_convert.ts";
export { type K8sEvent, K8sSource } from "./sources/k8s_source.ts";
export { RedisModelSource, type RedisModelSourceOptions } from "./sources/redis_source.ts";
export {
  connectModelStore,
  type ModelEntry,
  ModelPublisher,
  type ModelStore,
  RedisModelStore,
  startModelPublisher,
} from "../../controller/model/mod.ts";
export * from "../../lib/statedb/mod.ts";
