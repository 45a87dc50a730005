/**
 * Purging flows whose owner no longer serves (docs/anycast.md "A node that leaves takes its flows
 * along" and "A node that dies"): the flows go from the store and, through its stream, from every
 * node's flow map — as a backend removed from an LB service (node/lb/flows/purge.ts) — so a client
 * reusing one of their 5-tuples reaches a node that serves instead of being encapsulated to one
 * that does not.
 *
 * - **Departed** (this node): when it has no pod left of an address's services, or — on the first
 *   state — has none at start (the pod went while no agent ran).
 * - **Lapsed** (another node): its liveness record lapsed and this agent claimed the purge
 *   (node/anycast/liveness.ts).
 *
 * @module
 */

import { parseAddr } from "../lb/tables/address.ts";
import type { Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import { purgeBackendFlows } from "../lb/flows/purge.ts";
import type { FlowStore } from "../lb/flows/store.ts";
import { redirectAddress, type RedirectConfig } from "./redirect_config.ts";

/** The purger's metric, on `registry` (lib/metrics.ts: registered per instance). */
const purgedCounter = (registry: Registry) =>
  registry.counter(
    "holdfast_anycast_owner_flows_purged_total",
    "Flows of an owner that no longer serves, purged by this agent (reason: departed, lapsed).",
    { labelNames: ["owner", "reason"] },
  );

/**
 * Which redirected addresses this node must purge its flows of, and the addresses it owns now.
 * `owned`: the addresses it has a local pod for (serving or terminating); `before`: those it
 * owned at the previous state, undefined at the first. An address owned before and not now
 * departed; at the first state every address not owned did (its pod went while no agent ran, or
 * it never had one: nothing is stored then). `pending` (changed in place) keeps departures not
 * purged yet and drops those owned again or no longer redirected.
 *
 * @example
 * ```ts
 * import { departures } from "./redirect_purge.ts";
 * const pending = new Set<string>();
 * const owned = departures(["10.0.100.10", "10.0.100.11"], new Set(["10.0.100.10"]), undefined, pending);
 * if (!owned.has("10.0.100.10") || !pending.has("10.0.100.11")) throw new Error();
 * ```
 */
export function departures(
  vips: readonly string[],
  owned: ReadonlySet<string>,
  before: ReadonlySet<string> | undefined,
  pending: Set<string>,
): Set<string> {
  for (const vip of vips) {
    if (owned.has(vip)) pending.delete(vip);
    else if (before === undefined || before.has(vip)) pending.add(vip);
  }
  for (const vip of [...pending]) if (!vips.includes(vip)) pending.delete(vip);
  return new Set(vips.filter((a) => owned.has(a)));
}

/** Purges flows of owners that no longer serve; one per node, fed each state. */
export class OwnerPurger {
  readonly #store: FlowStore;
  readonly #node: string;
  readonly #self: string;
  readonly #log: Logger;
  #config?: RedirectConfig;
  #owned?: Set<string>;
  readonly #pending = new Set<string>();
  readonly #purged: ReturnType<typeof purgedCounter>;

  /** `registry`: where its metric goes (default the process registry, served at `/metrics`). */
  constructor(
    o: { store: FlowStore; node: string; self: string; log: Logger; registry?: Registry },
  ) {
    this.#purged = purgedCounter(o.registry ?? processRegistry);
    this.#store = o.store;
    this.#node = o.node;
    this.#self = o.self;
    this.#log = o.log;
  }

  /**
   * The new state: this node's departures (see {@linkcode departures}) are purged now; one that
   * fails (the store down) is tried again with the next state.
   */
  async update(c: RedirectConfig, present: ReadonlySet<string>): Promise<void> {
    this.#config = c;
    const owned = new Set([...present].map(redirectAddress));
    const first = this.#owned === undefined;
    this.#owned = departures(
      c.vips,
      new Set([...owned].filter((a): a is string => a !== undefined)),
      this.#owned,
      this.#pending,
    );
    for (const vip of [...this.#pending]) {
      try {
        const flows = await this.#purge(this.#self, vip);
        this.#pending.delete(vip);
        if (flows === 0 && first) continue; // nothing stale at start: nothing to say
        this.#purged.inc({ owner: this.#self, reason: "departed" }, flows);
        this.#log.info("flows of a departed owner purged", {
          vip,
          owner: this.#self,
          flows,
          why: first
            ? "no local pod of the address's services at start"
            : "no local pod of the address's services left",
        });
      } catch (error) {
        this.#log.warn("cannot purge this node's flows yet; tried again with the next state", {
          vip,
          error,
        });
      }
    }
  }

  /**
   * Purges every flow `owner` (another node, whose liveness lapsed) has on the redirected
   * addresses; throws when the store fails or no state was applied yet (the caller retries).
   */
  async lapsed(owner: string, ttlMs: number): Promise<number> {
    const c = this.#config;
    if (!c) throw new Error(`Cannot purge the flows of "${owner}" before a state is applied`);
    let flows = 0;
    for (const vip of c.vips) flows += await this.#purge(owner, vip);
    this.#purged.inc({ owner, reason: "lapsed" }, flows);
    this.#log.info("flows of a lapsed owner purged", {
      owner,
      flows,
      vips: c.vips,
      why: `liveness record not refreshed for ${ttlMs} ms`,
    });
    return flows;
  }

  /** Purges `owner`'s flows of every frontend on `vip`; returns how many. */
  async #purge(owner: string, vip: string): Promise<number> {
    const frontends = this.#config!.datapath.services.flatMap((s) =>
      s.frontends.map((f) => f.address)
    ).filter((f) => parseAddr(f).ip === vip);
    let flows = 0;
    for (const f of frontends) {
      flows += await purgeBackendFlows(f, owner, { store: this.#store, node: this.#node });
    }
    return flows;
  }
}
