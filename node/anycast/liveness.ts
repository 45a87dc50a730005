/**
 * Liveness of the anycast nodes under `--redirect` (docs/anycast.md "A node that dies"): each
 * agent keeps a record of its own in the flow store, refreshed every second with a TTL
 * ({@linkcode DEFAULT_LIVENESS}), and watches the other owners' records. When a record it saw
 * lapses — the node died, lost its links, or its agent stopped refreshing for longer than the TTL
 * — one surviving agent claims the lapse and purges the owner's flows everywhere (`onLapse`:
 * node/anycast/redirect_purge.ts), so a client reusing one of their 5-tuples reaches a node that
 * serves instead of being encapsulated to the dead one.
 *
 * | key                               | type   | content                                        |
 * |-----------------------------------|--------|------------------------------------------------|
 * | `hf:{anycast}:alive:<owner addr>` | string | node name; PX TTL, refreshed every interval     |
 * | `hf:{anycast}:owners`             | hash   | owner addr → node name; removed by the claimer, |
 * |                                   |        | or by the owner's agent on a deliberate stop   |
 *
 * First start vs lapse: an agent purges only for an owner whose record *it* saw alive and then
 * missing. An owner that has not started yet (or was already gone when this agent started) was
 * never seen, so nothing is purged for it: a cluster-wide restart purges nothing. The claim is an
 * `HDEL` of the owner's field in `owners` (written with each refresh): exactly one watcher gets 1
 * per lapse, and after Redis lost its data (every record gone at once) nobody does.
 *
 * @module
 */

import { log as rootLog, type Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import { RedisConnection, type RedisStoreOptions } from "../../lib/redis_connection.ts";

/** Refresh interval and TTL of the record (docs/anycast.md says why these). */
export const DEFAULT_LIVENESS = { intervalMs: 1_000, ttlMs: 5_000 } as const;

/** The watcher's metrics, on `registry` (lib/metrics.ts: registered per instance). */
const livenessMetrics = (registry: Registry) => ({
  alive: registry.gauge(
    "holdfast_anycast_owners_alive",
    "Other anycast owners whose liveness record this agent saw at its last check.",
  ),
  lapses: registry.counter(
    "holdfast_anycast_owner_lapses_total",
    "Owners whose liveness record lapsed (claimed: this agent purges their flows, or another).",
    { labelNames: ["owner", "claimed"] },
  ),
  errors: registry.counter(
    "holdfast_anycast_liveness_errors_total",
    "Failed refreshes or checks of the liveness records (the store unreachable); retried.",
  ),
});

/** The liveness records as the watcher needs them; Redis below, an in-memory one in tests. */
export interface LivenessStore {
  /** Sets `owner`'s record (naming `node`) for `ttlMs` and registers it in the owners hash. */
  refresh(owner: string, node: string, ttlMs: number): Promise<void>;
  /** Whether each of `owners` has a record now. */
  alive(owners: readonly string[]): Promise<boolean[]>;
  /** Claims the purge of a lapsed `owner`: true for one caller per registration. */
  claim(owner: string): Promise<boolean>;
  /** Leaves the owners hash (a deliberate stop): the record's lapse is claimed by nobody. */
  deregister(owner: string): Promise<void>;
  close(): Promise<void>;
}

/** Key names of the liveness records, under a deployment prefix (default `hf`). */
export function livenessKeys(prefix = "hf"): { alive(owner: string): string; owners: string } {
  // One hash tag: every record in one Redis Cluster slot, so MGET reads them all.
  return {
    alive: (owner) => `${prefix}:{anycast}:alive:${owner}`,
    owners: `${prefix}:{anycast}:owners`,
  };
}

/** {@linkcode LivenessStore} over Redis: a connection of its own, so flow scans never delay it. */
export class RedisLivenessStore implements LivenessStore {
  readonly #redis: RedisConnection;
  readonly #keys: ReturnType<typeof livenessKeys>;

  constructor(options: RedisStoreOptions) {
    this.#redis = new RedisConnection({ ...options, logComponent: "anycast-liveness" });
    this.#keys = livenessKeys(options.prefix);
  }

  async refresh(owner: string, node: string, ttlMs: number): Promise<void> {
    await Promise.all([
      this.#redis.command(["SET", this.#keys.alive(owner), node, "PX", String(Math.round(ttlMs))]),
      this.#redis.command(["HSET", this.#keys.owners, owner, node]),
    ]);
  }

  async alive(owners: readonly string[]): Promise<boolean[]> {
    if (owners.length === 0) return [];
    const r = await this.#redis.command(["MGET", ...owners.map(this.#keys.alive)]);
    return (r as (string | null)[]).map((v) => v !== null);
  }

  async claim(owner: string): Promise<boolean> {
    return Number(await this.#redis.command(["HDEL", this.#keys.owners, owner])) === 1;
  }

  async deregister(owner: string): Promise<void> {
    await this.#redis.command(["HDEL", this.#keys.owners, owner]);
  }

  close(): Promise<void> {
    return this.#redis.close();
  }
}

/** Options of {@linkcode OwnerLiveness}. */
export interface OwnerLivenessOptions {
  /** This node's owner address (`--src-addr`) and name: its own record. */
  readonly self: string;
  readonly node: string;
  /** Every owner (`--owners`); this node's own address is left out of the watch. */
  readonly owners: readonly string[];
  readonly store: LivenessStore;
  /** Purges a lapsed owner's flows (this agent claimed the lapse); throws to be retried. */
  readonly onLapse: (owner: string) => Promise<void>;
  readonly intervalMs?: number;
  readonly ttlMs?: number;
  readonly log?: Logger;
  /** Where its metrics go (default the process registry, served at `/metrics`). */
  readonly registry?: Registry;
}

/**
 * Refreshes this node's record and watches the others'. One {@linkcode tick} per interval (the
 * next starts after the previous ended, so a slow store never piles them up).
 */
export class OwnerLiveness {
  readonly #o: OwnerLivenessOptions;
  readonly #log: Logger;
  readonly #watched: string[];
  readonly #metrics: ReturnType<typeof livenessMetrics>;
  /** Owners seen alive at the last successful check. */
  readonly #seen = new Set<string>();
  /** Lapses this agent claimed and has not purged yet (retried each tick). */
  readonly #claimed = new Set<string>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #ticking: Promise<void> = Promise.resolve();
  #stopped = false;
  #refreshed = false;
  #failing = false;

  constructor(o: OwnerLivenessOptions) {
    this.#o = o;
    this.#log = o.log ?? rootLog.with({ component: "anycast-liveness", node: o.node });
    this.#watched = [...new Set(o.owners)].filter((a) => a !== o.self);
    this.#metrics = livenessMetrics(o.registry ?? processRegistry);
  }

  get intervalMs(): number {
    return this.#o.intervalMs ?? DEFAULT_LIVENESS.intervalMs;
  }

  get ttlMs(): number {
    return this.#o.ttlMs ?? DEFAULT_LIVENESS.ttlMs;
  }

  /** Owners seen alive at the last check. */
  get seen(): ReadonlySet<string> {
    return this.#seen;
  }

  /** Ticks now and every interval until {@linkcode stop}. */
  start(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    const loop = () => {
      this.#ticking = this.tick().finally(() => {
        if (!this.#stopped) this.#timer = setTimeout(loop, this.intervalMs);
      });
    };
    this.#timer = setTimeout(loop, 0);
  }

  /**
   * Stops ticking and deregisters (when `deregister`, as a deliberate stop does): the record then
   * lapses after its TTL and nobody purges this node's flows — its datapath keeps delivering the
   * flows it owns (an agent restart, an upgrade) and the next agent takes them over, purging
   * those whose pod went meanwhile on its first state.
   */
  async stop(options: { deregister?: boolean } = {}): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#ticking;
    if (options.deregister && this.#refreshed) {
      await this.#o.store.deregister(this.#o.self).catch((error) =>
        this.#log.warn("cannot deregister the liveness record; its lapse may purge", { error })
      );
    }
    await this.#o.store.close();
  }

  /**
   * One round: refresh this node's record, read the others', claim the lapses seen (an owner
   * alive at the previous check and missing now), purge the claimed ones. A store failure is
   * logged once until it recovers; nothing lapses on this agent's own failure to read.
   */
  async tick(): Promise<void> {
    const { store, self, node } = this.#o;
    try {
      await store.refresh(self, node, this.ttlMs);
      if (!this.#refreshed) {
        this.#refreshed = true;
        this.#log.info("liveness record kept", {
          owner: self,
          intervalMs: this.intervalMs,
          ttlMs: this.ttlMs,
          watching: this.#watched,
        });
      }
      const alive = await store.alive(this.#watched);
      const lapsed: string[] = [];
      this.#watched.forEach((owner, i) => {
        if (alive[i]) this.#seen.add(owner);
        else if (this.#seen.delete(owner)) lapsed.push(owner);
      });
      this.#metrics.alive.set(undefined, this.#seen.size);
      for (const owner of lapsed) {
        const claimed = await store.claim(owner);
        this.#metrics.lapses.inc({ owner, claimed: String(claimed) });
        this.#log.warn("an owner's liveness record lapsed", {
          owner,
          ttlMs: this.ttlMs,
          // Unclaimed: another node purges, or the owner stopped deliberately (deregistered).
          claimed,
        });
        if (claimed) this.#claimed.add(owner);
      }
      if (this.#failing) this.#log.info("liveness records followed again", {});
      this.#failing = false;
    } catch (error) {
      this.#metrics.errors.inc();
      if (!this.#failing) {
        this.#log.warn("cannot keep or read the liveness records; retrying", { error });
      }
      this.#failing = true;
    }
    for (const owner of [...this.#claimed]) {
      // Came back meanwhile: its flows are its own again (its agent restores and shares them).
      if (this.#seen.has(owner)) {
        this.#claimed.delete(owner);
        continue;
      }
      try {
        await this.#o.onLapse(owner);
        this.#claimed.delete(owner);
      } catch (error) {
        this.#log.warn("cannot purge a lapsed owner's flows yet; retrying", { owner, error });
      }
    }
  }
}
