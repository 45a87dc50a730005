/**
 * The policy module ABI (version 1): what a WASM policy module must export, and the error codes
 * its Maglev builder returns. Source of truth for the AssemblyScript side is
 * `policy-as/assembly/index.ts`; keep both in step and bump {@link ABI_VERSION} on any change.
 *
 * Memory protocol for a Maglev build (all values little-endian u32):
 * 1. `ptr = maglev_input_ptr(n, m)` reserves space (0 = out of memory);
 * 2. the host writes `n` records `{keyHash1, keyHash2, weight}` (12 bytes each) at `ptr`;
 * 3. `r = maglev_build(n, m)`: `r >= 0` is the number of backends used (weight > 0), `r < 0` an
 *    error code ({@link MAGLEV_ERRORS});
 * 4. the table is `m` u32 at `maglev_table_ptr()`: input index + 1, 0 = empty (no backends).
 *
 * Health step: the host writes the 32-byte {@link HealthRecord} at `health_record_ptr()`, calls
 * `health_step(ok, nowMs, rise, fall, backoffBaseMs, backoffMaxMs)` and reads the record back.
 *
 * @module
 */

/** The ABI version this host speaks; a module whose `abi_version()` differs is rejected. */
export const ABI_VERSION = 1;

/** Exports every module must provide, with their WASM kinds. */
export const REQUIRED_EXPORTS = {
  memory: "memory",
  abi_version: "function",
  flow_hash_5tuple: "function",
  flow_hash_client_ip: "function",
  maglev_input_ptr: "function",
  maglev_build: "function",
  maglev_table_ptr: "function",
  health_record_ptr: "function",
  health_step: "function",
} as const;

/**
 * Exports a module may provide, both or neither: the IPv6 flow hash (docs/contracts.md "IPv6"),
 * checked against `flow_hash6.json` when present (`flow_hash6_checks.ts`); modules built before
 * IPv6 stay valid without them.
 */
export const OPTIONAL_EXPORTS = {
  flow_hash6_5tuple: "function",
  flow_hash6_client_ip: "function",
} as const;

/** The optional IPv6 flow-hash exports: addresses as four host-order u32 words each. */
export interface FlowHash6Exports {
  flow_hash6_5tuple(
    s0: number,
    s1: number,
    s2: number,
    s3: number,
    d0: number,
    d1: number,
    d2: number,
    d3: number,
    sport: number,
    dport: number,
    proto: number,
    seed: number,
  ): number;
  flow_hash6_client_ip(s0: number, s1: number, s2: number, s3: number, seed: number): number;
}

/** The instance exports as the host calls them (numbers only). */
export interface PolicyExports extends Partial<FlowHash6Exports> {
  memory: WebAssembly.Memory;
  abi_version(): number;
  flow_hash_5tuple(
    saddr: number,
    daddr: number,
    sport: number,
    dport: number,
    proto: number,
    seed: number,
  ): number;
  flow_hash_client_ip(saddr: number, seed: number): number;
  maglev_input_ptr(n: number, m: number): number;
  maglev_build(n: number, m: number): number;
  maglev_table_ptr(): number;
  health_record_ptr(): number;
  health_step(
    ok: number,
    nowMs: number,
    rise: number,
    fall: number,
    backoffBaseMs: number,
    backoffMaxMs: number,
  ): number;
}

/** Maglev build error codes returned (negative) by `maglev_build`. */
export const MAGLEV_ERRORS: Readonly<Record<number, string>> = {
  [-1]: "table size M is outside 251..131071",
  [-2]: "table size M is not prime",
  [-3]: "more backends than table slots (N > M)",
  [-4]: "no memory reserved for this build",
  [-5]: "two backends have the same key hash",
};

/** Smallest allowed Maglev table size. */
export const MAGLEV_M_MIN = 251;
/** Largest allowed Maglev table size. */
export const MAGLEV_M_MAX = 131071;
/**
 * Default Maglev table size, for services that set none: 16,381 (as Cilium). With 100 backends
 * the busiest has 0.1 % more slots than the average and removing one moves 1.3 % of the others'
 * slots (at 1,021: 7.7 % and 3.6 %); a table takes 128 KiB of kernel memory (a BPF array stores
 * 8 bytes per slot; 65,537: 512 KiB) and ~0.5 ms to build. Measurements: `docs/maglev.md`.
 */
export const MAGLEV_M_DEFAULT = 16381;

/** Backend health states as the health step returns them. */
export const HealthState = {
  /** Not judged yet: enters the table after `rise` successful probes. */
  New: 0,
  /** Serving; in the Maglev table. */
  Active: 1,
  /** Out of the table until `rise` successes and the backoff hold has passed. */
  Quarantined: 2,
} as const;

/** A backend health state number ({@link HealthState}). */
export type HealthStateValue = typeof HealthState[keyof typeof HealthState];

/** Per-backend health memory, mirrored byte for byte in the module's 32-byte record. */
export interface HealthRecord {
  state: HealthStateValue;
  /** Consecutive successful probes since the last failure or transition. */
  consecutiveOk: number;
  /** Consecutive failed probes since the last success or transition. */
  consecutiveFail: number;
  /** Quarantines so far (each doubles the hold); forgiven after a stable max-backoff period. */
  strikes: number;
  /** No return to Active before this time (ms). */
  holdUntilMs: number;
  /** When the backend last became Active (ms). */
  activeSinceMs: number;
}

/** Rise/fall and backoff settings of the health step. */
export interface HealthParams {
  /** Consecutive successes needed to become Active. */
  rise: number;
  /** Consecutive failures that quarantine an Active (or New) backend. */
  fall: number;
  /** Hold after the first quarantine; doubles per strike. */
  backoffBaseMs: number;
  /** Cap of the hold; also how long Active must last to forgive strikes. */
  backoffMaxMs: number;
}

/** One probe result, when it was taken, and the policy settings to judge it by. */
export interface HealthProbe {
  ok: boolean;
  nowMs: number;
  params: HealthParams;
}

/** A fresh record for a backend just discovered. */
export function newHealthRecord(): HealthRecord {
  return {
    state: HealthState.New,
    consecutiveOk: 0,
    consecutiveFail: 0,
    strikes: 0,
    holdUntilMs: 0,
    activeSinceMs: 0,
  };
}
