/**
 * The agent's policy swaps: a new WASM policy module (from the model in Redis, or the active
 * file `--policy-follow` watches) is validated by the {@linkcode PolicyHost}; on acceptance every
 * Maglev table is rebuilt with it (the reconciler's table cache is dropped and a full pass
 * rebuilds each table whole; the pass's tables are swapped in together, `LBMaps.commitMaglev`)
 * and the health checker judges its next probe with the new module's `health_step`
 * (`node/lb/health/`: the step is looked up per probe); on rejection the
 * old module keeps serving and nothing is written (`policy rejected` log line,
 * `holdfast_policy_rejections_total{reason}`).
 *
 * A module may fill tables and judge health differently from the reference (validation checks
 * those by properties, `policy-as/host/validate.ts`): the `policy swapped` line says whether its
 * tables and health verdicts equal the reference's.
 *
 * @module
 */
import type { ControlPlane } from "./control_plane.ts";
import type { Logger } from "../../lib/log.ts";
import type { PolicyHost, SwapResult } from "../../policy-as/host/mod.ts";
import { sha256Hex } from "../../controller/model/schema.ts";

/** Swaps a module in and rebuilds the tables; never throws for a bad module. */
export type PolicySwapper = (bytes: Uint8Array, source: string) => Promise<SwapResult>;

/**
 * A swapper for `host` whose Maglev builder serves `cp`'s reconciler: an accepted module
 * rebuilds every table (`policy swapped`), a rejected one changes nothing (`policy rejected`;
 * with a `reporter`, `--model redis`, also reported to the controller: a `PolicyRejected` Event).
 */
export function policySwapper(
  host: PolicyHost,
  cp: Pick<ControlPlane, "ops" | "reconciler">,
  logger: Logger,
  reporter?: { policyRejected(sha256: string, reason: string): void } | null,
): PolicySwapper {
  return async (bytes, source) => {
    const r = await host.swap(bytes, { source });
    if (!r.ok) {
      logger.warn("policy rejected", {
        source,
        reason: r.reason,
        error: r.error,
        serving: r.serving ?? null,
      });
      if (reporter) reporter.policyRejected(await sha256Hex(bytes), `${r.reason}: ${r.error}`);
      return r;
    }
    if (r.digest === r.previous) return r;
    const frontends = cp.ops.rebuildMaglevTables();
    cp.reconciler.triggerFullReconcile();
    logger.info("policy swapped", {
      source,
      sha256: r.digest,
      previous: r.previous ?? null,
      rebuild_frontends: frontends,
      tables_equal_reference: r.report.maglevEqualsReference,
      health_equals_reference: r.report.healthEqualsReference,
    });
    return r;
  };
}
