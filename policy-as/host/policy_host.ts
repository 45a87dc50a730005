/**
 * Holds the policy module in service and replaces it atomically. A candidate is fully validated
 * (`validate.ts`) before the single reference swap; on any failure the old module keeps serving.
 * Every swap and rejection is one structured log line and a counter increment.
 *
 * @module
 */
import { log as rootLog, type Logger } from "../../lib/log.ts";
import {
  type Counter,
  type Gauge,
  type Registry,
  registry as rootRegistry,
} from "../../lib/metrics.ts";
import {
  type PolicyLimits,
  type PolicyModule,
  PolicyRejectedError,
  type RejectReason,
} from "./policy_module.ts";
import { validatePolicyModule, type ValidationReport } from "./validate.ts";
import { loadVectors, type PolicyVectors } from "./vectors.ts";

/** Options of a {@link PolicyHost}. */
export interface PolicyHostOptions {
  /** Golden vectors every candidate must reproduce (default: `loadVectors()`). */
  vectors?: PolicyVectors;
  limits?: Partial<PolicyLimits>;
  /** Metrics registry (default: the process-wide one). */
  registry?: Registry;
  logger?: Logger;
}

/** Outcome of {@link PolicyHost.swap}. */
export type SwapResult =
  | { ok: true; digest: string; previous: string | undefined; report: ValidationReport }
  | { ok: false; reason: RejectReason; error: string; serving: string | undefined };

/**
 * The serving policy module and its swaps.
 *
 * @example
 * ```ts ignore
 * const host = await PolicyHost.create();
 * const first = await host.swap(await Deno.readFile("policy-as/build/release.wasm"));
 * if (!first.ok) throw new Error(first.error);
 * const h = host.current.flowHashClientIp(0x0a000001, 0);
 * ```
 */
export class PolicyHost {
  #current: PolicyModule | undefined;
  #vectors: PolicyVectors;
  #limits: Partial<PolicyLimits>;
  #log: Logger;
  #swaps: Counter;
  #rejections: Counter;
  #serving: Gauge;
  #queue: Promise<unknown> = Promise.resolve();

  private constructor(vectors: PolicyVectors, options: PolicyHostOptions) {
    this.#vectors = vectors;
    this.#limits = options.limits ?? {};
    this.#log = (options.logger ?? rootLog).with({ component: "policy" });
    const reg = options.registry ?? rootRegistry;
    this.#swaps = reg.counter(
      "holdfast_policy_swaps_total",
      "Policy WASM modules that passed validation and replaced the serving one.",
    );
    this.#rejections = reg.counter(
      "holdfast_policy_rejections_total",
      "Policy WASM modules rejected by validation; the old module kept serving.",
      { labelNames: ["reason"] },
    );
    this.#serving = reg.gauge(
      "holdfast_policy_module",
      "1 for the SHA-256 digest of the serving policy module, 0 for modules it replaced.",
      { labelNames: ["digest"] },
    );
  }

  /** A host with no module yet; the first successful {@link swap} installs one. */
  static async create(options: PolicyHostOptions = {}): Promise<PolicyHost> {
    return new PolicyHost(options.vectors ?? await loadVectors(), options);
  }

  /** The serving module. @throws {Error} when none has been installed yet. */
  get current(): PolicyModule {
    if (!this.#current) {
      throw new Error("No policy module is serving: no module has passed validation yet");
    }
    return this.#current;
  }

  /** True once a module serves. */
  get ready(): boolean {
    return this.#current !== undefined;
  }

  /**
   * Validates `bytes` and, only if every check passes, makes it the serving module. Swaps are
   * serialized. Never throws for a bad module: the result says why it was rejected.
   */
  swap(bytes: Uint8Array, options: { source?: string } = {}): Promise<SwapResult> {
    const run = this.#queue.then(() => this.#swapNow(bytes, options.source ?? "bytes"));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #swapNow(bytes: Uint8Array, source: string): Promise<SwapResult> {
    const previous = this.#current?.digest;
    try {
      const { module, report } = await validatePolicyModule(bytes, this.#vectors, {
        limits: this.#limits,
      });
      this.#current = module; // the one and only point where readers switch
      this.#swaps.inc();
      if (previous !== undefined) this.#serving.set({ digest: previous }, 0);
      this.#serving.set({ digest: module.digest }, 1);
      this.#log.info("policy module swapped", {
        source,
        digest: module.digest.slice(0, 16),
        previous: previous?.slice(0, 16),
        bytes: report.size,
        max_build_ms: Number(report.maxBuildMs.toFixed(3)),
        memory_pages: report.memoryPages,
        // IPv6 flow hash: the module's (held to flow_hash6.json) or the TypeScript reference's
        flow_hash6: report.flowHash6Vectors > 0 ? "module" : "reference",
      });
      return { ok: true, digest: module.digest, previous, report };
    } catch (e) {
      const reason: RejectReason = e instanceof PolicyRejectedError ? e.reason : "vectors";
      const error = e instanceof Error ? e.message : String(e);
      this.#rejections.inc({ reason });
      this.#log.warn("policy module rejected", {
        source,
        reason,
        error,
        serving: previous?.slice(0, 16),
      });
      return { ok: false, reason, error, serving: previous };
    }
  }
}
