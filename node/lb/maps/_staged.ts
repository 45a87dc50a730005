/**
 * Staged Maglev installs for the BPF reconciler (`maps/reconciler.ts`): within a reconciler
 * batch, each frontend's new table is built whole and staged (`LBMaps.stageMaglev`), and the
 * batch's tables go in together (`LBMaps.commitMaglev`: one map update for all of them, where
 * the BPF maps wait an RCU grace period per update of their map of maps). Only once a table is
 * installed is the rest of its frontend's update done (old-only backends released, service
 * entry written): a service entry never names a table that is not in yet.
 *
 * @module
 */

import type { Frontend } from "../tables/frontend.ts";
import type { LBMaps, ServiceEntry, ServiceKey } from "./lbmaps.ts";
import type { BatchFailure } from "../reconciler/mod.ts";

/** A frontend whose new Maglev table is staged: what completes it once the table is in. */
export interface StagedInstall {
  readonly row: Frontend;
  readonly serviceId: number;
  /** Backend IDs only the previous table used: released once the new one is in. */
  readonly oldOnly: readonly number[];
  /** The new table's backend IDs, ascending. */
  readonly now: readonly number[];
  readonly key: ServiceKey;
  readonly entry: ServiceEntry;
  /** `tableDigest` of the new table. */
  readonly digest: number;
}

/** The staged installs of one batch, and the failures of its commits until the batch ends. */
export class StagedInstalls {
  readonly #maps: LBMaps;
  readonly #maxStaged: number;
  /** Completes a frontend whose table is in (throws: that frontend failed). */
  readonly #installed: (st: StagedInstall) => Promise<void>;
  /** Within a batch over maps that stage tables. */
  #batching = false;
  /** Frontend address → its staged install. */
  readonly #staged = new Map<string, StagedInstall>();
  /** Frontend address → the failure of its last commit, until `end` reports it. */
  readonly #failures = new Map<string, BatchFailure<Frontend>>();

  /** `maxStaged`: a batch commits early once that many tables are staged (bounds memory). */
  constructor(
    maps: LBMaps,
    maxStaged: number,
    installed: (st: StagedInstall) => Promise<void>,
  ) {
    this.#maps = maps;
    this.#maxStaged = Math.max(1, maxStaged);
    this.#installed = installed;
  }

  /** Whether updates stage their tables now (in a batch, over maps that can). */
  get batching(): boolean {
    return this.#batching;
  }

  /** Whether `address` has a staged install not committed yet. */
  has(address: string): boolean {
    return this.#staged.has(address);
  }

  /** Starts a batch (staging only if the maps implement it). */
  begin(): void {
    this.#batching = this.#maps.stageMaglev !== undefined &&
      this.#maps.commitMaglev !== undefined;
  }

  /** Stages `st`'s table; commits early when `maxStaged` tables wait. */
  async stage(st: StagedInstall, table: Uint32Array): Promise<void> {
    await this.#maps.stageMaglev!(st.serviceId, table);
    this.#staged.set(st.row.address, st);
    if (this.#staged.size >= this.#maxStaged) await this.commit();
  }

  /** Ends the batch: commits, and returns the frontends that failed in its commits. */
  async end(): Promise<BatchFailure<Frontend>[]> {
    this.#batching = false;
    await this.commit();
    const failures = [...this.#failures.values()];
    this.#failures.clear();
    return failures;
  }

  /**
   * Installs every staged table (one `commitMaglev`), then completes each installed frontend in
   * staging order. A frontend whose table or completion failed is recorded for `end`; its state
   * keeps holding old ∪ new backends, as after a failed immediate write.
   */
  async commit(): Promise<void> {
    if (this.#staged.size === 0) return;
    const staged = [...this.#staged.values()];
    this.#staged.clear();
    let failed: ReadonlyMap<number, Error>;
    try {
      failed = await this.#maps.commitMaglev!();
    } catch (e) {
      failed = new Map(staged.map((st) => [st.serviceId, e as Error]));
    }
    for (const st of staged) {
      const address = st.row.address, err = failed.get(st.serviceId);
      try {
        if (err !== undefined) {
          throw new Error(
            `Cannot install the Maglev table of frontend "${address}" (service ID ${st.serviceId}): ${err.message}`,
            { cause: err },
          );
        }
        await this.#installed(st);
        this.#failures.delete(address); // a later install of it succeeded
      } catch (error) {
        this.#failures.set(address, { row: st.row, error });
      }
    }
  }
}
