/**
 * Full validation of a policy module before it may serve. What is pinned and what is checked by
 * properties follows from who computes what:
 *
 * - **ABI and limits**: no imports, every export with its kind, the ABI version
 *   ({@link PolicyModule.load}); the memory cap after every call; the Maglev build time budget.
 * - **Flow hash: pinned.** The BPF program computes it, not the module; every golden vector must
 *   match exactly (both modes), or user space and the datapath would disagree about flows.
 *   The same for the IPv6 hash when the module exports it (`flow_hash6_checks.ts`, the vectors
 *   of `flow_hash6.json`); a module without it is valid and the TypeScript reference serves.
 * - **Maglev fill: properties** (`maglev_checks.ts`) on every golden vector's input: slots name
 *   given backends, weight 0 owns nothing, shares follow the weights, two builds are identical
 *   and the input order does not matter. Whether the tables equal the reference's (the vectors'
 *   digests) is reported, not required.
 * - **Health: invariants** (`health_checks.ts`) on the golden sequences and generated ones: a
 *   stricter module passes, a broken one fails. Whether the records equal the reference's is
 *   reported, not required.
 *
 * Every call runs first in a throwaway Worker with a per-call deadline (`preflight.ts`), so a
 * module that never returns is stopped instead of blocking this thread.
 *
 * @module
 */
import { newHealthRecord } from "./abi.ts";
import { healthPropertySequences, healthViolation } from "./health_checks.ts";
import { healthStepTs } from "./health_ts.ts";
import { firstOrderDifference, maglevViolation } from "./maglev_checks.ts";
import { encodeMaglevInput } from "./maglev_input.ts";
import {
  type PolicyLimits,
  PolicyModule,
  PolicyRejectedError,
  type RejectReason,
} from "./policy_module.ts";
import { preflight, type PreflightPlan } from "./preflight.ts";
import { tableDigest } from "./table_digest.ts";
import { flowHash6PreflightArgs, flowHash6Violation } from "./flow_hash6_checks.ts";
import {
  type FlowHash6Vector,
  type HealthVector,
  loadFlowHash6Vectors,
  type MaglevVector,
  type PolicyVectors,
} from "./vectors.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

/** What a successful validation measured. */
export interface ValidationReport {
  digest: string;
  size: number;
  flowHashVectors: number;
  /** IPv6 flow-hash vectors matched; 0: the module has no IPv6 hash (the reference serves). */
  flowHash6Vectors: number;
  maglevVectors: number;
  /** Health sequences checked (the golden ones and the generated ones) and their probes. */
  healthSequences: number;
  healthSteps: number;
  /** Slowest Maglev vector build, ms. */
  maxBuildMs: number;
  /** Largest deviation of a backend's slot count from its weight share, percent. */
  maxShareErrorPct: number;
  /** Every Maglev table equals the reference's (informational: a fill may differ). */
  maglevEqualsReference: boolean;
  /** Every health sequence equals the reference's (informational: health logic may differ). */
  healthEqualsReference: boolean;
  memoryPages: number;
}

function reject(reason: RejectReason, message: string, cause?: unknown): never {
  throw new PolicyRejectedError(reason, `Policy module rejected: ${message}`, { cause });
}

/** Options of {@link validatePolicyModule}. */
export interface ValidateOptions {
  /** Memory cap and build time budget (default `DEFAULT_LIMITS`: 128 pages, 50 ms). */
  limits?: Partial<PolicyLimits>;
  /**
   * Run every call first in a throwaway Worker with a deadline, so a module that never returns
   * is stopped instead of blocking this thread (default true).
   */
  preflight?: boolean;
  /**
   * How long any one call of the pre-flight may run before the module counts as a runaway loop
   * (default: {@link preflightCallDeadlineMs} of the build budget, at least 2 s). It bounds each
   * call, not the whole run, and sits orders of magnitude above the build budget, so a slow but
   * finishing module is judged by the budget however busy the machine is.
   */
  preflightDeadlineMs?: number;
  /** The clock that times Maglev builds (default `performance.now`; see `LoadOptions` of `policy_module.ts`). */
  now?: () => number;
  /**
   * The IPv6 flow-hash vectors, for a module with the `flow_hash6_*` exports (default: read from
   * `policy-as/vectors/flow_hash6.json`, only then).
   */
  flowHash6Vectors?: readonly FlowHash6Vector[];
}

/**
 * The pre-flight's per-call deadline for a build budget: 40 × the budget, at least 2 s. A runaway
 * loop never returns; a slow build returns within a small multiple of the budget even on a loaded
 * machine, and the budget check then names it.
 *
 * @example
 * ```ts
 * import { preflightCallDeadlineMs } from "./validate.ts";
 * if (preflightCallDeadlineMs(50) !== 2000) throw new Error("floor");
 * if (preflightCallDeadlineMs(100) !== 4000) throw new Error("40x");
 * ```
 */
export function preflightCallDeadlineMs(buildBudgetMs: number): number {
  return Math.max(2000, 40 * buildBudgetMs);
}

/** One golden Maglev input: built twice in order, once reversed. */
interface MaglevCase {
  vector: MaglevVector;
  records: Uint32Array;
  reversed: Uint32Array;
}

/** Calls `fn`; a trap stays a trap, anything else is a failed vector — both named by `what`. */
function checked<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof PolicyRejectedError) {
      if (e.reason === "trap") reject("trap", `${what}: ${e.message}`, e);
      throw e;
    }
    reject("vectors", `${what}: ${e instanceof Error ? e.message : e}`, e);
  }
}

/**
 * Loads `bytes` and checks it against `vectors`: flow hash exactly, Maglev and health by
 * properties (module doc).
 *
 * @throws {PolicyRejectedError} naming the failed check and the first vector that fails it.
 */
export async function validatePolicyModule(
  bytes: Uint8Array,
  vectors: PolicyVectors,
  options: ValidateOptions = {},
): Promise<{ module: PolicyModule; report: ValidationReport }> {
  const policy = await PolicyModule.load(bytes, options.limits, { now: options.now });
  const vectors6 = policy.hasFlowHash6
    ? options.flowHash6Vectors ?? await loadFlowHash6Vectors()
    : [];
  const sequences = healthPropertySequences(vectors.health);
  const cases: MaglevCase[] = vectors.maglev.map((vector) => ({
    vector,
    records: encodeMaglevInput(vector.backends, vector.m),
    reversed: encodeMaglevInput([...vector.backends].reverse(), vector.m),
  }));
  if (options.preflight ?? true) {
    const plan: PreflightPlan = {
      flowHash: vectors.flowHash.map((v) => [
        parseIpv4(v.saddr),
        parseIpv4(v.daddr),
        v.sport,
        v.dport,
        v.proto,
        v.seed,
      ]),
      flowHash6: flowHash6PreflightArgs(vectors6),
      health: sequences.map(({ params: p, probes }) =>
        probes.map((s) => [s.ok ? 1 : 0, s.nowMs, p.rise, p.fall, p.backoffBaseMs, p.backoffMaxMs])
      ),
      maglev: cases.flatMap(({ vector: { m }, records, reversed }) => [
        { records, m },
        { records, m },
        { records: reversed, m },
      ]),
    };
    const deadline = options.preflightDeadlineMs ??
      preflightCallDeadlineMs(policy.limits.buildBudgetMs);
    try {
      await preflight(bytes, plan, deadline);
    } catch (e) {
      reject("time-budget", (e as Error).message, e);
    }
  }
  checkFlowHash(policy, vectors);
  const bad6 = checked("IPv6 flow hash", () => flowHash6Violation(policy, vectors6));
  if (bad6 !== null) reject("vectors", bad6);
  const health = checkHealth(policy, vectors.health, sequences);
  const maglev = await checkMaglev(policy, cases);
  return {
    module: policy,
    report: {
      digest: policy.digest,
      size: policy.size,
      flowHashVectors: vectors.flowHash.length,
      flowHash6Vectors: vectors6.length,
      maglevVectors: vectors.maglev.length,
      healthSequences: sequences.length,
      healthSteps: health.steps,
      maxBuildMs: maglev.maxBuildMs,
      maxShareErrorPct: Number((maglev.maxShareError * 100).toFixed(3)),
      maglevEqualsReference: maglev.equalsReference,
      healthEqualsReference: health.equalsReference,
      memoryPages: policy.memoryPages,
    },
  };
}

/** The flow hash must equal every golden vector, in both modes. */
function checkFlowHash(policy: PolicyModule, vectors: PolicyVectors): void {
  for (const v of vectors.flowHash) {
    const saddr = parseIpv4(v.saddr);
    const tuple = {
      saddr,
      daddr: parseIpv4(v.daddr),
      sport: v.sport,
      dport: v.dport,
      proto: v.proto,
    };
    const five = checked("flow hash", () => policy.flowHashFiveTuple(tuple, v.seed));
    if (five !== v.five_tuple) {
      reject(
        "vectors",
        `five-tuple flow hash of ${v.saddr}:${v.sport} → ${v.daddr}:${v.dport}/${v.proto} ` +
          `seed ${v.seed} is ${five}, the vectors say ${v.five_tuple}`,
      );
    }
    const client = checked("flow hash", () => policy.flowHashClientIp(saddr, v.seed));
    if (client !== v.client_ip) {
      reject(
        "vectors",
        `client-ip flow hash of ${v.saddr} seed ${v.seed} is ${client}, the vectors say ` +
          `${v.client_ip}`,
      );
    }
  }
}

/** Runs every sequence through the module's health step and checks the invariants. */
function checkHealth(
  policy: PolicyModule,
  golden: readonly HealthVector[],
  sequences: ReturnType<typeof healthPropertySequences>,
): { steps: number; equalsReference: boolean } {
  let steps = 0;
  let equalsReference = true;
  for (const [k, seq] of sequences.entries()) {
    const rec = newHealthRecord(), ref = newHealthRecord();
    const expect = golden[k]?.steps; // the golden sequences come first, in order
    const states = seq.probes.map((probe, i) => {
      const step = { ...probe, params: seq.params };
      const state = checked(
        `health sequence "${seq.name}" step ${i}`,
        () => policy.healthStep(rec, step),
      );
      steps++;
      if (expect) {
        equalsReference &&= Object.entries(expect[i]!.expect).every(([field, want]) =>
          rec[field as keyof typeof rec] === want
        );
      } else {
        equalsReference &&= healthStepTs(ref, step) === state;
      }
      return state;
    });
    const bad = healthViolation(seq, states);
    if (bad) {
      reject(
        "vectors",
        `health check "${bad.check}" fails on sequence "${seq.name}" step ${bad.step}: ` +
          bad.message,
      );
    }
  }
  return { steps, equalsReference };
}

/** Builds every golden Maglev input (twice, then reversed) and checks the tables' properties. */
async function checkMaglev(
  policy: PolicyModule,
  cases: readonly MaglevCase[],
): Promise<{ maxBuildMs: number; maxShareError: number; equalsReference: boolean }> {
  let maxBuildMs = 0, maxShareError = 0;
  let equalsReference = true;
  for (const { vector: v, records, reversed } of cases) {
    const what = `Maglev vector "${v.name}" (M=${v.m}, N=${v.backends.length})`;
    const failed = (check: string, message: string): never =>
      reject("vectors", `Maglev check "${check}" fails on ${what}: ${message}`);
    // The first run also pays for compilation tiers; the budget applies to the second.
    const first = checked(what, () => policy.buildMaglev(records, v.m));
    const built = checked(what, () => policy.buildMaglev(records, v.m, { enforceBudget: true }));
    maxBuildMs = Math.max(maxBuildMs, built.ms);
    const result = maglevViolation(v.backends, v.m, built.table);
    if ("check" in result) failed(result.check, result.message);
    else maxShareError = Math.max(maxShareError, result.shareError);
    const differs = built.table.findIndex((slot, i) => first.table[i] !== slot);
    if (differs >= 0) {
      failed(
        "deterministic",
        `slot ${differs} is ${built.table[differs]} in one build, ${
          first.table[differs]
        } in another`,
      );
    }
    const other = checked(what, () => policy.buildMaglev(reversed, v.m)).table;
    const slot = firstOrderDifference(built.table, other, v.backends.length);
    if (slot >= 0) {
      failed(
        "order-independent",
        `slot ${slot} holds ${built.table[slot]} (input index + 1), or ${other[slot]} of the ` +
          `same ${v.backends.length} backends in reverse order`,
      );
    }
    equalsReference &&= await tableDigest(built.table) === v.sha256;
  }
  return { maxBuildMs, maxShareError, equalsReference };
}
