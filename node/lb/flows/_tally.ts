/**
 * The flow agent's routine per-flow work (flows learned here, flows installed from peers) is
 * logged as one summary line per LB IP every {@link TALLY_INTERVAL_MS} at info, not a line per
 * flow: at thousands of new flows per second a line per flow cost the agent more CPU than the
 * work it logs (bench:agent-cost). Each flow is still logged at debug. Decisions that are not
 * routine (rejections, removals, replaced flows) keep their own lines.
 *
 * @module
 */

import type { Logger } from "../../../lib/log.ts";

/** How often the summary lines are written (while flows come). */
export const TALLY_INTERVAL_MS = 10_000;

interface Counts {
  flows: number;
  batches: number;
  /** Installed only: flows by the peer that learned them. */
  peers?: Map<string, number>;
}

/** Counts learned and installed flows per LB IP and logs them as summary lines. */
export class FlowTally {
  readonly #log: Logger;
  readonly #learned = new Map<string, Counts>();
  readonly #installed = new Map<string, Counts>();
  #since = performance.now();
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(log: Logger) {
    this.#log = log;
  }

  /** `flows` flows of LB IP `vip` were stored in one batch. */
  learned(vip: string, flows: number): void {
    this.#count(this.#learned, vip, flows);
  }

  /** `flows` flows of LB IP `vip` learned by `peer` were installed in one batch. */
  installed(vip: string, peer: string, flows: number): void {
    const c = this.#count(this.#installed, vip, flows);
    c.peers ??= new Map();
    c.peers.set(peer, (c.peers.get(peer) ?? 0) + flows);
  }

  #count(m: Map<string, Counts>, vip: string, flows: number): Counts {
    let c = m.get(vip);
    if (!c) m.set(vip, c = { flows: 0, batches: 0 });
    c.flows += flows;
    c.batches++;
    this.#timer ??= setTimeout(() => this.flush(), TALLY_INTERVAL_MS);
    return c;
  }

  /** Writes the summary lines of what was counted since the last ones (and stops the timer). */
  flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const now = performance.now();
    const seconds = Math.round((now - this.#since) / 100) / 10;
    this.#since = now;
    for (const [vip, c] of this.#learned) {
      this.#log.info("flows learned", { vip, flows: c.flows, batches: c.batches, seconds });
    }
    for (const [vip, c] of this.#installed) {
      this.#log.info("flows installed from peers", {
        vip,
        flows: c.flows,
        batches: c.batches,
        peers: Object.fromEntries(c.peers ?? []),
        seconds,
      });
    }
    this.#learned.clear();
    this.#installed.clear();
  }
}
