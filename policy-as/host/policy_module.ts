/**
 * One compiled and instantiated policy module, checked for the structural limits (no imports,
 * every ABI export present with the right kind, memory cap) and wrapped in typed calls that copy
 * results out of linear memory — a caller never holds a view that a later call overwrites.
 *
 * Behavioural checks (ABI version, golden vectors, time budget) are in `validate.ts`.
 *
 * @module
 */
import {
  ABI_VERSION,
  type HealthProbe,
  type HealthRecord,
  type HealthStateValue,
  MAGLEV_ERRORS,
  type PolicyExports,
  REQUIRED_EXPORTS,
} from "./abi.ts";
import {
  flowHash6ClientIp,
  flowHash6FiveTuple,
  type FlowTuple,
  type FlowTuple6,
} from "./flow_hash.ts";
import { flowHash6ExportsProblem } from "./flow_hash6_checks.ts";
import { MaglevInputError } from "./maglev_input.ts";
import { timedBuild } from "./build_timer.ts";

/** Why a module was rejected; the `reason` label of the rejection metric. */
export type RejectReason =
  | "compile"
  | "imports"
  | "exports"
  | "abi"
  | "memory"
  | "trap"
  | "vectors"
  | "time-budget";

/** A policy module failed a check; the old module (if any) keeps serving. */
export class PolicyRejectedError extends Error {
  override name = "PolicyRejectedError";
  /** Which check failed. */
  readonly reason: RejectReason;
  constructor(reason: RejectReason, message: string, options?: ErrorOptions) {
    super(message, options);
    this.reason = reason;
  }
}

/** Resource limits a module must respect. */
export interface PolicyLimits {
  /** Linear memory may never exceed this many 64 KiB pages (default 128 = 8 MiB). */
  maxMemoryPages: number;
  /** A Maglev build may take at most this long, in ms (default 50). */
  buildBudgetMs: number;
}

/** Limits used when none are given. */
export const DEFAULT_LIMITS: Readonly<PolicyLimits> = { maxMemoryPages: 128, buildBudgetMs: 50 };

/** Options of {@link PolicyModule.load} beyond the limits. */
export interface LoadOptions {
  /** The clock (ms) that times Maglev builds for the budget (default: `build_timer.ts`). */
  now?: () => number;
}

/** Result of one Maglev build. */
export interface MaglevBuildResult {
  /** A fresh copy: slot → backend input index + 1, 0 = empty. */
  table: Uint32Array;
  /** Backends used (weight > 0). */
  used: number;
  /** Time of the module call, in ms (the lesser of wall and process CPU time: `build_timer.ts`). */
  ms: number;
}

/**
 * Copies a table of input indices + 1 (`slots`) into `out` with each non-empty slot replaced by
 * `values[index]` (0 stays 0). Returns -1, or the first slot that names no input (the copy stops
 * there). Self-contained (no outer references): the Maglev workers run its source text too.
 */
export function mapSlots(
  slots: Uint32Array,
  values: ArrayLike<number>,
  out: Uint32Array,
): number {
  // One typed lookup (index + 1 → value, 0 → 0): the loop reads no JS array, whatever kind of
  // array `values` is (1.5–2.0 → 0.9–1.2 µs at M = 1,021).
  const n = values.length;
  const lut = new Uint32Array(n + 1);
  for (let i = 0; i < n; i++) lut[i + 1] = values[i]!;
  for (let s = 0; s < slots.length; s++) {
    const v = slots[s]!;
    if (v > n) return s;
    out[s] = lut[v]!;
  }
  return -1;
}

/** Hex SHA-256 of `bytes`, to name a module in logs. */
export async function moduleDigest(bytes: Uint8Array): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource));
  return Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
}

function trapMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A loaded policy module. Create with {@link PolicyModule.load}. */
export class PolicyModule {
  /** Hex SHA-256 of the module bytes. */
  readonly digest: string;
  /** Size of the module in bytes. */
  readonly size: number;
  /**
   * The compiled module: what other threads (Workers) instantiate to build the same tables; posted
   * to them it shares the code compiled here, optimised tiers included.
   */
  readonly compiled: WebAssembly.Module;
  readonly limits: Readonly<PolicyLimits>;
  #e: PolicyExports;
  #now: (() => number) | undefined;

  private constructor(
    e: PolicyExports,
    compiled: WebAssembly.Module,
    digest: string,
    size: number,
    limits: PolicyLimits,
    now: (() => number) | undefined,
  ) {
    this.#e = e;
    this.#now = now;
    this.compiled = compiled;
    this.digest = digest;
    this.size = size;
    this.limits = limits;
  }

  /**
   * Compiles and instantiates `bytes` after the structural checks, then checks the ABI version.
   *
   * @throws {PolicyRejectedError} reason `compile` (not WASM), `imports` (any import),
   *   `exports` (missing or wrong kind; one IPv6 flow-hash export without the other), `memory` (over the page cap), `trap` (start trapped),
   *   `abi` (version differs from {@link ABI_VERSION}).
   */
  static async load(
    bytes: Uint8Array,
    limits: Partial<PolicyLimits> = {},
    options: LoadOptions = {},
  ): Promise<PolicyModule> {
    const lim: PolicyLimits = { ...DEFAULT_LIMITS, ...limits };
    let module: WebAssembly.Module;
    try {
      module = await WebAssembly.compile(bytes as BufferSource);
    } catch (e) {
      throw new PolicyRejectedError(
        "compile",
        `Policy module rejected: not valid WebAssembly (${trapMessage(e)})`,
        { cause: e },
      );
    }
    const imports = WebAssembly.Module.imports(module);
    if (imports.length > 0) {
      const names = imports.map((i) => `"${i.module}.${i.name}"`).join(", ");
      throw new PolicyRejectedError(
        "imports",
        `Policy module rejected: it imports ${names}; policy modules must have no imports`,
      );
    }
    const exports = new Map(WebAssembly.Module.exports(module).map((x) => [x.name, x.kind]));
    for (const [name, kind] of Object.entries(REQUIRED_EXPORTS)) {
      const got = exports.get(name);
      if (got !== kind) {
        throw new PolicyRejectedError(
          "exports",
          got === undefined
            ? `Policy module rejected: missing export "${name}" (${kind})`
            : `Policy module rejected: export "${name}" is a ${got}, expected a ${kind}`,
        );
      }
    }
    const v6 = flowHash6ExportsProblem(exports);
    if (v6) throw new PolicyRejectedError("exports", `Policy module rejected: ${v6}`);
    let instance: WebAssembly.Instance;
    try {
      instance = await WebAssembly.instantiate(module, {});
    } catch (e) {
      throw new PolicyRejectedError(
        "trap",
        `Policy module rejected: instantiation failed (${trapMessage(e)})`,
        { cause: e },
      );
    }
    const e = instance.exports as unknown as PolicyExports;
    const policy = new PolicyModule(
      e,
      module,
      await moduleDigest(bytes),
      bytes.length,
      lim,
      options.now,
    );
    policy.#checkMemory("instantiation");
    let version: number;
    try {
      version = e.abi_version();
    } catch (err) {
      throw new PolicyRejectedError(
        "trap",
        `Policy module rejected: abi_version() trapped (${trapMessage(err)})`,
        { cause: err },
      );
    }
    if (version !== ABI_VERSION) {
      throw new PolicyRejectedError(
        "abi",
        `Policy module rejected: ABI version ${version}, this host speaks ${ABI_VERSION}`,
      );
    }
    return policy;
  }

  /** Linear memory size in 64 KiB pages. */
  get memoryPages(): number {
    return this.#e.memory.buffer.byteLength / 65536;
  }

  #checkMemory(after: string): void {
    const pages = this.memoryPages;
    if (pages > this.limits.maxMemoryPages) {
      throw new PolicyRejectedError(
        "memory",
        `Policy module over its memory cap after ${after}: ${pages} pages > ` +
          `${this.limits.maxMemoryPages}`,
      );
    }
  }

  #call<T>(what: string, fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      if (e instanceof PolicyRejectedError || e instanceof MaglevInputError) throw e;
      throw new PolicyRejectedError("trap", `Policy module trapped in ${what}: ${trapMessage(e)}`, {
        cause: e,
      });
    }
  }

  /** Five-tuple flow hash (docs/contracts.md). @throws {PolicyRejectedError} on a trap. */
  flowHashFiveTuple(t: FlowTuple, seed: number): number {
    return this.#call(
      "flow_hash_5tuple",
      () => this.#e.flow_hash_5tuple(t.saddr, t.daddr, t.sport, t.dport, t.proto, seed) >>> 0,
    );
  }

  /** Client-IP flow hash (docs/contracts.md). @throws {PolicyRejectedError} on a trap. */
  flowHashClientIp(saddr: number, seed: number): number {
    return this.#call("flow_hash_client_ip", () => this.#e.flow_hash_client_ip(saddr, seed) >>> 0);
  }

  /** Whether the module exports the IPv6 flow hash (else its methods answer with the reference). */
  get hasFlowHash6(): boolean {
    return this.#e.flow_hash6_5tuple !== undefined;
  }

  /** IPv6 five-tuple flow hash (docs/contracts.md "IPv6"); the TypeScript reference without it. */
  flowHash6FiveTuple(t: FlowTuple6, seed: number): number {
    const f = this.#e.flow_hash6_5tuple;
    if (f === undefined) return flowHash6FiveTuple(t, seed);
    return this.#call(
      "flow_hash6_5tuple",
      () => f(...t.saddr, ...t.daddr, t.sport, t.dport, t.proto, seed) >>> 0,
    );
  }

  /** IPv6 client-IP flow hash of `saddr`'s four words; the TypeScript reference without it. */
  flowHash6ClientIp(saddr: FlowTuple6["saddr"], seed: number): number {
    const f = this.#e.flow_hash6_client_ip;
    if (f === undefined) return flowHash6ClientIp(saddr, seed);
    return this.#call("flow_hash6_client_ip", () => f(...saddr, seed) >>> 0);
  }

  /**
   * Builds a Maglev table of size `m` from ABI records (`3 * n` u32, see `maglev_input.ts`).
   * The module's own range/prime checks map to {@link MaglevInputError}. The table is copied out
   * of linear memory into `into` (length `m`) when given, else into a new array; with `values`
   * (one per record) each non-empty slot holds `values[index]` instead of index + 1, mapped in
   * the same pass as the copy.
   *
   * @throws {MaglevInputError} when the module refuses the input.
   * @throws {PolicyRejectedError} `trap`, `memory`, or `time-budget` (when `enforceBudget`).
   */
  buildMaglev(
    records: Uint32Array,
    m: number,
    options: {
      enforceBudget?: boolean;
      into?: Uint32Array;
      values?: ArrayLike<number>;
    } = {},
  ): MaglevBuildResult {
    const n = records.length / 3;
    const e = this.#e;
    return this.#call("maglev_build", () => {
      const { value: used, ms } = timedBuild(this.#now, this.limits.buildBudgetMs, m, () => {
        const ptr = e.maglev_input_ptr(n, m) >>> 0;
        this.#checkMemory("maglev_input_ptr");
        if (ptr === 0) {
          throw new MaglevInputError(
            `Cannot build Maglev table: module has no memory for N=${n}, M=${m}`,
          );
        }
        new Uint32Array(e.memory.buffer, ptr, records.length).set(records);
        return e.maglev_build(n, m);
      });
      this.#checkMemory("maglev_build");
      if (used < 0) {
        throw new MaglevInputError(
          `Cannot build Maglev table (N=${n}, M=${m}): ${MAGLEV_ERRORS[used] ?? `error ${used}`}`,
        );
      }
      if (options.enforceBudget && ms > this.limits.buildBudgetMs) {
        throw new PolicyRejectedError(
          "time-budget",
          `Policy module over its time budget: Maglev build N=${n}, M=${m} took ` +
            `${ms.toFixed(2)} ms > ${this.limits.buildBudgetMs} ms`,
        );
      }
      const tablePtr = e.maglev_table_ptr() >>> 0;
      if (tablePtr + m * 4 > e.memory.buffer.byteLength || tablePtr % 4 !== 0) {
        throw new PolicyRejectedError(
          "trap",
          `Policy module returned table pointer ${tablePtr} outside its memory`,
        );
      }
      const slots = new Uint32Array(e.memory.buffer, tablePtr, m);
      const into = options.into?.length === m ? options.into : undefined;
      const values = options.values;
      if (values === undefined) {
        const table = into ?? new Uint32Array(m);
        table.set(slots);
        return { table, used, ms };
      }
      const table = into ?? new Uint32Array(m);
      const bad = mapSlots(slots, values, table);
      if (bad >= 0) {
        throw new PolicyRejectedError(
          "trap",
          `Policy module filled slot ${bad} with backend ${slots[bad]}, but there are only ` +
            `${values.length} backends`,
        );
      }
      return { table, used, ms };
    });
  }

  /** Applies one probe result to `rec` (updated in place); returns the new state. */
  healthStep(rec: HealthRecord, probe: HealthProbe): HealthStateValue {
    const { params } = probe;
    const e = this.#e;
    return this.#call("health_step", () => {
      const ptr = e.health_record_ptr() >>> 0;
      if (ptr + 32 > e.memory.buffer.byteLength) {
        throw new PolicyRejectedError("trap", `Policy module health record ${ptr} outside memory`);
      }
      const view = new DataView(e.memory.buffer, ptr, 32);
      view.setUint32(0, rec.state, true);
      view.setUint32(4, rec.consecutiveOk, true);
      view.setUint32(8, rec.consecutiveFail, true);
      view.setUint32(12, rec.strikes, true);
      view.setFloat64(16, rec.holdUntilMs, true);
      view.setFloat64(24, rec.activeSinceMs, true);
      e.health_step(
        probe.ok ? 1 : 0,
        probe.nowMs,
        params.rise,
        params.fall,
        params.backoffBaseMs,
        params.backoffMaxMs,
      );
      const out = new DataView(e.memory.buffer, ptr, 32);
      const state = out.getUint32(0, true);
      if (state > 2) {
        throw new PolicyRejectedError("trap", `Policy module returned health state ${state}`);
      }
      rec.state = state as HealthStateValue;
      rec.consecutiveOk = out.getUint32(4, true);
      rec.consecutiveFail = out.getUint32(8, true);
      rec.strikes = out.getUint32(12, true);
      rec.holdUntilMs = out.getFloat64(16, true);
      rec.activeSinceMs = out.getFloat64(24, true);
      return rec.state;
    });
  }
}
