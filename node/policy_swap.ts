/**
 * The agent's policy swaps: a new WASM policy module (from the model in Redis, or the active
 * file `--policy-follow` watches) is validated by the {@linkcode PolicyHost}; on acceptance every
 * Maglev table is rebuilt with it (the reconciler's table cache is dropped and a full pass
 * replaces each table with one map update), on rejection the old module keeps serving and
 * nothing is written (`policy rejected` log line, `holdfast_policy_rejections_total`).
 *
 * @module
 */
import type { ControlPlane } from "../controller/control_plane.ts";
import type { Logger } from "../lib/log.ts";
import type { PolicyHost, SwapResult } from "../policy-as/host/mod.ts";

/** Swaps a module in and rebuilds the tables; never throws for a bad module. */
export type PolicySwapper = (bytes: Uint8Array, source: string) => Promise<SwapResult>;

/**
 * A swapper for `host` whose Maglev builder serves `cp`'s reconciler: an accepted module
 * rebuilds every table (`policy swapped`), a rejected one changes nothing (`policy rejected`).
 */
export function policySwapper(
  host: PolicyHost,
  cp: Pick<ControlPlane, "ops" | "reconciler">,
  logger: Logger,
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
    });
    return r;
  };
}
