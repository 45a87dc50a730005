/**
 * Holdfast's WASM policy: flow hash, weighted Maglev tables and health verdicts from a
 * hot-swappable AssemblyScript module (`policy-as/assembly/`), validated against the golden
 * vectors in `policy-as/vectors/` before it serves.
 *
 * @example Plug the WASM Maglev builder into the controller
 * ```ts ignore
 * import {
 *   MAGLEV_M_DEFAULT,
 *   PolicyHost,
 *   TsMaglevBuilder,
 *   WasmMaglevBuilder,
 * } from "./policy-as/host/mod.ts";
 * const host = await PolicyHost.create();
 * const r = await host.swap(await Deno.readFile("policy-as/build/release.wasm"));
 * if (!r.ok) throw new Error(r.error);
 * const maglev = new WasmMaglevBuilder(host, { fallback: new TsMaglevBuilder() });
 * const table = maglev.build([{ key: "10.1.0.1:8080", weight: 1 }], MAGLEV_M_DEFAULT);
 * ```
 *
 * @module
 */
export {
  ABI_VERSION,
  type HealthParams,
  type HealthProbe,
  type HealthRecord,
  HealthState,
  type HealthStateValue,
  MAGLEV_M_DEFAULT,
  MAGLEV_M_MAX,
  MAGLEV_M_MIN,
  newHealthRecord,
} from "./abi.ts";
export { followActivePolicy } from "./active_file.ts";
export { DEFAULT_ACTIVE_PATH, main } from "./cli.ts";
export {
  encapSourcePort,
  flowHash6ClientIp,
  flowHash6FiveTuple,
  flowHashClientIp,
  flowHashFiveTuple,
  type FlowTuple,
  type FlowTuple6,
} from "./flow_hash.ts";
export { healthStepTs } from "./health_ts.ts";
export {
  checkMaglevSize,
  checkMaglevWeights,
  encodeMaglevInput,
  isPrime,
  MAGLEV_MAX_VISITS,
  MAGLEV_WEIGHT_MAX,
  type MaglevBackend,
  type MaglevBuilder,
  maglevBuildVisits,
  type MaglevFillModule,
  MaglevInputError,
} from "./maglev_input.ts";
export { type MaglevFillStats, TsMaglevBuilder } from "./maglev_ts.ts";
export { PolicyHost, type PolicyHostOptions, type SwapResult } from "./policy_host.ts";
export {
  DEFAULT_LIMITS,
  mapSlots,
  type PolicyLimits,
  PolicyModule,
  PolicyRejectedError,
  type RejectReason,
} from "./policy_module.ts";
export { tableDigest } from "./table_digest.ts";
export { validatePolicyModule, type ValidationReport } from "./validate.ts";
export { loadVectors, type PolicyVectors, VECTORS_DIR } from "./vectors.ts";
export { type PolicySource, WasmMaglevBuilder } from "./wasm_maglev_builder.ts";
