/**
 * {@link MaglevBuilder} backed by the serving WASM policy module: what the agent plugs into the
 * controller instead of the TypeScript builder (`maglev_ts.ts`, the fallback). Each call uses whatever module serves at that moment, so
 * a swap takes effect at the next build; every table returned is copied out of the module's
 * memory (into the caller's `out` when given), never a view of it.
 *
 * @module
 */
import { log as rootLog, type Logger } from "../../lib/log.ts";
import { type Counter, type Registry, registry as rootRegistry } from "../../lib/metrics.ts";
import { MAGLEV_ERRORS } from "./abi.ts";
import {
  duplicateKeyError,
  encodeMaglevInput,
  type MaglevBackend,
  type MaglevBuilder,
  type MaglevFillModule,
  MaglevInputError,
  singleBackendTable,
} from "./maglev_input.ts";
import type { PolicyModule } from "./policy_module.ts";
import { PolicyRejectedError } from "./policy_module.ts";

/** Anything that yields the serving module (a `PolicyHost`, or a fixed module in tests). */
export interface PolicySource {
  /** The serving module; may throw when none serves (see `ready`). */
  readonly current: PolicyModule;
  /** False while no module serves (a `PolicyHost` before its first accepted swap). */
  readonly ready?: boolean;
}

/** Options of {@link WasmMaglevBuilder}. */
export interface WasmMaglevBuilderOptions {
  /** Used when the module traps or runs over its budget (e.g. the TypeScript builder). */
  fallback?: MaglevBuilder;
  registry?: Registry;
  logger?: Logger;
}

/**
 * Builds Maglev tables in the serving policy module.
 *
 * @example
 * ```ts ignore
 * const host = await PolicyHost.create();
 * await host.swap(await Deno.readFile("policy-as/build/release.wasm"));
 * const builder = new WasmMaglevBuilder(host, { fallback: new TsMaglevBuilder() });
 * const table = builder.build([{ key: "10.1.0.1:80", weight: 1 }], 65537);
 * ```
 */
export class WasmMaglevBuilder implements MaglevBuilder {
  #source: PolicySource;
  #fallback?: MaglevBuilder;
  #log: Logger;
  #overBudget: Counter;
  #failures: Counter;

  constructor(source: PolicySource, options: WasmMaglevBuilderOptions = {}) {
    this.#source = source;
    this.#fallback = options.fallback;
    this.#log = (options.logger ?? rootLog).with({ component: "policy" });
    const reg = options.registry ?? rootRegistry;
    this.#overBudget = reg.counter(
      "holdfast_policy_build_over_budget_total",
      "Maglev builds in the policy module that took longer than the time budget.",
    );
    this.#failures = reg.counter(
      "holdfast_policy_build_failures_total",
      "Maglev builds in the policy module that trapped (fallback used if configured).",
    );
  }

  /**
   * The serving module: tables built from its bytes on other threads equal `build`'s. Undefined
   * while none serves (every build then goes to the fallback).
   */
  fillModule(): MaglevFillModule | undefined {
    return this.#serving();
  }

  #serving(): PolicyModule | undefined {
    return this.#source.ready === false ? undefined : this.#source.current;
  }

  /**
   * {@link MaglevBuilder.build}; the table is copied out of the module's memory into `out` (or a
   * new array), `values` put in its slots in the same pass.
   *
   * @throws {MaglevInputError} for invalid input (bad M, N > M, bad weight, duplicate key,
   *   weights too uneven for the build budget).
   * @throws {PolicyRejectedError} when the module traps and there is no fallback.
   */
  build(
    backends: readonly MaglevBackend[],
    m: number,
    out?: Uint32Array,
    values?: readonly number[],
  ): Uint32Array {
    const module = this.#serving();
    if (module === undefined) {
      // No module has passed validation (say, the agent's own was rejected at start): the
      // fallback serves until one does.
      if (!this.#fallback) {
        throw new Error(
          "Cannot build a Maglev table: no policy module is serving (none has passed " +
            "validation yet) and there is no fallback builder",
        );
      }
      return this.#fallback.build(backends, m, out, values);
    }
    // One backend: the one table any module may fill (no call into it).
    const single = singleBackendTable(backends, m, out, values);
    if (single !== null) return single;
    const records = encodeMaglevInput(backends, m);
    try {
      const result = module.buildMaglev(records, m, { into: out, values });
      if (result.ms > module.limits.buildBudgetMs) {
        this.#overBudget.inc();
        this.#log.warn("maglev build over time budget", {
          ms: Number(result.ms.toFixed(3)),
          budget_ms: module.limits.buildBudgetMs,
          n: backends.length,
          m,
        });
      }
      return result.table;
    } catch (e) {
      if (e instanceof MaglevInputError && e.message.endsWith(MAGLEV_ERRORS[-5]!)) {
        throw duplicateKeyError(backends);
      }
      if (!(e instanceof PolicyRejectedError)) throw e;
      this.#failures.inc();
      this.#log.error("maglev build failed in policy module", {
        error: e.message,
        digest: module.digest.slice(0, 16),
        fallback: this.#fallback !== undefined,
      });
      if (!this.#fallback) throw e;
      return this.#fallback.build(backends, m, out, values);
    }
  }
}
