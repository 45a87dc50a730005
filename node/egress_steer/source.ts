/**
 * What the node agent's steering reads from Redis (docs/egress.md "Steering client pods"):
 *
 * - every EgressNAT's config hash `hf:egress:{NS/NAME}:config` (found by SCAN every
 *   `discoverMs`, its `rev` polled every `pollMs`; re-read when it changes): destinations,
 *   floating addresses and the `clients` field (controller/egress/clients.ts);
 * - the owners of their floating addresses: a snapshot (controller/egress/owners.ts, one script:
 *   the owners hash and the stream's last ID), then the owner-changes streams with one bounded
 *   `XREAD BLOCK` over all of them. A failed read backs off, then takes a new snapshot of every
 *   EgressNAT before reading on (whatever happened meanwhile is in it).
 *
 * One Redis (the blocking read spans every EgressNAT's stream; a Redis Cluster is not yet
 * supported here). Every loop is bounded by the stop signal and its timeouts.
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import { backoffDelay, sleep } from "../../lib/backoff.ts";
import type { RedisConnection } from "../../lib/redis_connection.ts";
import { egressConfigRev, readStoredEgressConfig } from "../../controller/egress/redis_config.ts";
import {
  decodeOwnerChange,
  type OwnerChange,
  type OwnerRecord,
  ownersKeys,
  readOwnersSnapshot,
} from "../../controller/egress/owners.ts";
import type { EgressConfig } from "../../controller/egress/config.ts";
import type { EgressClient } from "../../controller/egress/clients.ts";

/** One EgressNAT as steering needs it. */
export interface SteerEgress {
  readonly name: string;
  readonly rev: number;
  readonly config: EgressConfig;
  readonly clients: readonly EgressClient[];
}

/** What the source calls. */
export interface SteerSink {
  /** The EgressNATs now (after a discovery or a changed revision). */
  egresses(list: readonly SteerEgress[]): void;
  /** Owners of `egress`'s addresses as a snapshot says (start, new EgressNAT, reconnect). */
  owners(egress: string, owners: ReadonlyMap<string, OwnerRecord>): void;
  /** One change from a stream; `lagMs` is now minus the entry's Redis time. */
  change(egress: string, c: OwnerChange, lagMs: number): void;
}

/** Options of {@linkcode SteerSource}. */
export interface SteerSourceOptions {
  readonly redis: RedisConnection;
  readonly sink: SteerSink;
  readonly log: Logger;
  /** SCAN for config keys every this long, ms (default 5,000). */
  readonly discoverMs?: number;
  /** Poll known configs' revisions every this long, ms (default 1,000). */
  readonly pollMs?: number;
  /** XREAD BLOCK timeout, ms (default 1,000; new EgressNATs join the read after it). */
  readonly blockMs?: number;
}

const SCAN_ROUNDS = 1_000;

/** Follows configs and owners; see the module doc. */
export class SteerSource {
  readonly #o: SteerSourceOptions;
  readonly #known = new Map<string, SteerEgress>();
  /** Stream position per EgressNAT (set once its snapshot was read). */
  readonly #ids = new Map<string, string>();
  readonly #stop = new AbortController();
  #loops: Promise<void>[] = [];
  #lastDiscover = -Infinity;

  constructor(o: SteerSourceOptions) {
    this.#o = o;
  }

  /** First read (configs and owners), then follows in the background. */
  async start(): Promise<void> {
    await this.#refresh(true);
    this.#loops = [this.#configLoop(), this.#ownerLoop()];
  }

  /** Stops both loops (the blocking read ends within its timeout). */
  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.allSettled(this.#loops);
  }

  get #signal(): AbortSignal {
    return this.#stop.signal;
  }

  async #scan(): Promise<string[]> {
    const names = new Set<string>();
    let cursor = "0";
    for (let round = 0; round < SCAN_ROUNDS; round++) {
      const [next, batch] = await this.#o.redis.command(
        ["SCAN", cursor, "MATCH", "hf:egress:{*}:config", "COUNT", "1000"],
      ) as [string, string[]];
      for (const k of batch) names.add(k.slice("hf:egress:{".length, k.lastIndexOf("}:config")));
      cursor = String(next);
      if (cursor === "0") break;
    }
    return [...names].sort();
  }

  /** Re-reads the configs whose revision changed (and discovers keys when due). */
  async #refresh(discover: boolean): Promise<void> {
    const redis = this.#o.redis;
    let names = [...this.#known.keys()];
    if (discover) {
      names = await this.#scan();
      this.#lastDiscover = performance.now();
    }
    let changed = names.length !== this.#known.size || names.some((n) => !this.#known.has(n));
    const next = new Map<string, SteerEgress>();
    for (const name of names) {
      const had = this.#known.get(name);
      const rev = await egressConfigRev(redis, name);
      if (had && had.rev === rev) {
        next.set(name, had);
        continue;
      }
      try {
        const stored = await readStoredEgressConfig(redis, name);
        if (stored === null) continue;
        next.set(name, { name, rev: stored.rev, config: stored.config, clients: stored.clients });
        changed = true;
      } catch (err) {
        this.#o.log.warn("egress config unreadable; keeping the last one", { egress: name, err });
        if (had) next.set(name, had);
      }
    }
    if (!changed) return;
    this.#known.clear();
    for (const [k, v] of next) this.#known.set(k, v);
    for (const name of this.#ids.keys()) if (!next.has(name)) this.#ids.delete(name);
    // Owners first: a new client is steered with its owner known, never to none.
    for (const name of next.keys()) if (!this.#ids.has(name)) await this.#snapshot(name);
    this.#o.sink.egresses([...next.values()]);
  }

  async #snapshot(name: string): Promise<void> {
    const s = await readOwnersSnapshot(this.#o.redis, name);
    this.#ids.set(name, s.lastId);
    this.#o.sink.owners(name, s.owners);
  }

  async #configLoop(): Promise<void> {
    const pollMs = this.#o.pollMs ?? 1_000, discoverMs = this.#o.discoverMs ?? 5_000;
    while (!this.#signal.aborted) {
      try {
        await sleep(pollMs, this.#signal);
      } catch {
        return;
      }
      try {
        await this.#refresh(performance.now() - this.#lastDiscover >= discoverMs);
      } catch (err) {
        this.#o.log.warn("cannot read egress configs; keeping the last ones", { err: String(err) });
      }
    }
  }

  async #ownerLoop(): Promise<void> {
    const blockMs = this.#o.blockMs ?? 1_000;
    let failures = 0;
    while (!this.#signal.aborted) {
      const names = [...this.#ids.keys()];
      try {
        if (failures > 0) {
          for (const name of names) await this.#snapshot(name);
          this.#o.log.info("owner streams re-read", { egresses: names });
          failures = 0;
        }
        if (names.length === 0) {
          await sleep(blockMs, this.#signal).catch(() => {});
          continue;
        }
        const keys = names.map((n) => ownersKeys(n).stream);
        const reply = await this.#o.redis.blocking([
          "XREAD",
          "COUNT",
          "100",
          "BLOCK",
          String(blockMs),
          "STREAMS",
          ...keys,
          ...names.map((n) => this.#ids.get(n) ?? "0-0"),
        ]) as [string, [string, string[]][]][] | null;
        for (const [key, entries] of reply ?? []) {
          const name = names[keys.indexOf(key)];
          if (name === undefined || !this.#ids.has(name)) continue;
          for (const [id, fields] of entries) {
            this.#ids.set(name, id);
            const c = decodeOwnerChange(fields);
            if (c) this.#o.sink.change(name, c, Date.now() - Number(id.split("-")[0]));
          }
        }
      } catch (err) {
        if (this.#signal.aborted) return;
        failures++;
        this.#o.log.warn("owner stream read failed", { err: String(err), failures });
        await sleep(backoffDelay(failures, { minMs: 100, maxMs: 2_000 }), this.#signal).catch(
          () => {},
        );
      }
    }
  }
}
