/**
 * Full validation of a policy module before it may serve: structural checks and ABI version
 * ({@link PolicyModule.load}), then every golden vector — flow hash (both modes), health
 * sequences, Maglev tables by digest — with the memory cap checked after each call and every
 * Maglev build held to the time budget.
 *
 * @module
 */
import { newHealthRecord } from "./abi.ts";
import { encodeMaglevInput } from "./maglev_input.ts";
import {
  type PolicyLimits,
  PolicyModule,
  PolicyRejectedError,
  type RejectReason,
} from "./policy_module.ts";
import { preflight, type PreflightPlan } from "./preflight.ts";
import { tableDigest } from "./table_digest.ts";
import type { PolicyVectors } from "./vectors.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

/** What a successful validation measured. */
export interface ValidationReport {
  digest: string;
  size: number;
  flowHashVectors: number;
  maglevVectors: number;
  healthSteps: number;
  /** Slowest Maglev vector build, ms. */
  maxBuildMs: number;
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
   * Run the vectors first in a throwaway Worker with a deadline, so a module that never returns
   * is stopped instead of blocking this thread (default true).
   */
  preflight?: boolean;
  /** Deadline of the pre-flight (default: 2 s plus the build budget for every Maglev build). */
  preflightDeadlineMs?: number;
}

function preflightPlan(vectors: PolicyVectors): PreflightPlan {
  return {
    flowHash: vectors.flowHash.map((v) => [
      parseIpv4(v.saddr),
      parseIpv4(v.daddr),
      v.sport,
      v.dport,
      v.proto,
      v.seed,
    ]),
    health: vectors.health.map((v) =>
      v.steps.map((s) => [
        s.ok ? 1 : 0,
        s.now_ms,
        v.params.rise,
        v.params.fall,
        v.params.backoffBaseMs,
        v.params.backoffMaxMs,
      ])
    ),
    maglev: vectors.maglev.map((v) => ({ records: encodeMaglevInput(v.backends, v.m), m: v.m })),
  };
}

/**
 * Loads `bytes` and runs every golden vector against it.
 *
 * @throws {PolicyRejectedError} naming the failed check and the first differing vector.
 */
export async function validatePolicyModule(
  bytes: Uint8Array,
  vectors: PolicyVectors,
  options: ValidateOptions = {},
): Promise<{ module: PolicyModule; report: ValidationReport }> {
  const policy = await PolicyModule.load(bytes, options.limits);
  if (options.preflight ?? true) {
    const deadline = options.preflightDeadlineMs ??
      2000 + 2 * vectors.maglev.length * policy.limits.buildBudgetMs;
    try {
      await preflight(bytes, preflightPlan(vectors), deadline);
    } catch (e) {
      reject("time-budget", (e as Error).message, e);
    }
  }
  const wrap = <T>(what: string, fn: () => T): T => {
    try {
      return fn();
    } catch (e) {
      if (e instanceof PolicyRejectedError) {
        if (e.reason === "trap") reject("trap", `${what}: ${e.message}`, e);
        throw e;
      }
      reject("vectors", `${what}: ${e instanceof Error ? e.message : e}`, e);
    }
  };

  for (const v of vectors.flowHash) {
    const saddr = parseIpv4(v.saddr);
    const tuple = {
      saddr,
      daddr: parseIpv4(v.daddr),
      sport: v.sport,
      dport: v.dport,
      proto: v.proto,
    };
    const five = wrap("flow hash", () => policy.flowHashFiveTuple(tuple, v.seed));
    if (five !== v.five_tuple) {
      reject(
        "vectors",
        `five-tuple flow hash of ${v.saddr}:${v.sport} → ${v.daddr}:${v.dport}/${v.proto} ` +
          `seed ${v.seed} is ${five}, the vectors say ${v.five_tuple}`,
      );
    }
    const client = wrap("flow hash", () => policy.flowHashClientIp(saddr, v.seed));
    if (client !== v.client_ip) {
      reject(
        "vectors",
        `client-ip flow hash of ${v.saddr} seed ${v.seed} is ${client}, the vectors say ` +
          `${v.client_ip}`,
      );
    }
  }

  let healthSteps = 0;
  for (const v of vectors.health) {
    const rec = newHealthRecord();
    for (const [i, step] of v.steps.entries()) {
      wrap(
        "health step",
        () => policy.healthStep(rec, { ok: step.ok, nowMs: step.now_ms, params: v.params }),
      );
      healthSteps++;
      for (const [field, want] of Object.entries(step.expect)) {
        const got = rec[field as keyof typeof rec];
        if (got !== want) {
          reject(
            "vectors",
            `health sequence "${v.name}" step ${i}: ${field} is ${got}, the vectors say ${want}`,
          );
        }
      }
    }
  }

  let maxBuildMs = 0;
  for (const v of vectors.maglev) {
    const records = encodeMaglevInput(v.backends, v.m);
    // The first run also pays for compilation tiers; the budget applies to the second.
    wrap(`Maglev "${v.name}"`, () => policy.buildMaglev(records, v.m));
    const built = wrap(
      `Maglev "${v.name}"`,
      () => policy.buildMaglev(records, v.m, { enforceBudget: true }),
    );
    maxBuildMs = Math.max(maxBuildMs, built.ms);
    const digest = await tableDigest(built.table);
    if (digest !== v.sha256) {
      const slot = Object.entries(v.slots).find(([i, want]) => built.table[Number(i)] !== want);
      reject(
        "vectors",
        `Maglev table "${v.name}" (M=${v.m}, N=${v.backends.length}) has digest ` +
          `${digest.slice(0, 16)}…, the vectors say ${v.sha256.slice(0, 16)}…` +
          (slot ? `; slot ${slot[0]} is ${built.table[Number(slot[0])]}, expected ${slot[1]}` : ""),
      );
    }
  }

  return {
    module: policy,
    report: {
      digest: policy.digest,
      size: policy.size,
      flowHashVectors: vectors.flowHash.length,
      maglevVectors: vectors.maglev.length,
      healthSteps,
      maxBuildMs,
      memoryPages: policy.memoryPages,
    },
  };
}
