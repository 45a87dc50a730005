/**
 * The model publisher: writes one {@linkcode ModelEntry} per service of a control plane's
 * tables to a {@linkcode ModelStore}, writing only what differs from what the store holds, so
 * a restarted publisher with the same inputs writes nothing and the agents see no change.
 *
 * @module
 */

import { Backoff, type BackoffOptions, sleep } from "../../lib/backoff.ts";
import { log, type Logger } from "../../lib/log.ts";
import { type Registry, registry as rootRegistry } from "../../lib/metrics.ts";
import type { LBTables } from "../../node/lb/tables/tables.ts";
import { type ChangeIterator, waitAny, type Watch } from "../../lib/statedb/mod.ts";
import { deriveAll, deriveEntry } from "./_derive.ts";
import { encodeEntry, type ModelEntry, type ModelPolicy } from "./schema.ts";
import { encodeSettings, type ModelSettings } from "./settings.ts";
import type { ModelStore, ModelWrite } from "./store.ts";

/** Options of {@linkcode ModelPublisher} and {@linkcode startModelPublisher}. */
export interface ModelPublisherOptions {
  /** Logger (default: the process logger with `component: "model-publisher"`). */
  logger?: Logger;
  /** Where `holdfast_model_rev` and `holdfast_model_publishes_total{op}` live (default: process). */
  registry?: Registry;
  /**
   * Fencing: checked right before every write; false skips the write with an error (a leader
   * that lost its lease stops writing at once). Default: always true.
   */
  canWrite?: () => boolean;
  /** Writes in flight at once during a full sync (default 256). */
  concurrency?: number;
}

/** What a full sync or a change wrote. */
export interface PublishResult {
  readonly upserts: number;
  readonly deletes: number;
}

/** Writes entries to a store, remembering what it holds so unchanged entries are not written. */
export class ModelPublisher {
  readonly #store: ModelStore;
  readonly #log: Logger;
  readonly #canWrite: () => boolean;
  readonly #concurrency: number;
  readonly #revGauge;
  readonly #publishes;
  /** service → JSON the store holds (as far as this publisher knows). */
  readonly #held = new Map<string, string>();
  #epoch = "";
  #rev = 0;
  /** SHA-256 of the policy module the store holds (as far as this publisher knows). */
  #heldPolicy = "";
  /** The policy module to publish (the controller's last accepted one). */
  #wantPolicy: ModelPolicy | null = null;
  #policyQueue: Promise<unknown> = Promise.resolve();
  /** Settings JSON the store holds (as far as this publisher knows), and the one to publish. */
  #heldSettings = "";
  #wantSettings: string | null = null;

  constructor(store: ModelStore, options: ModelPublisherOptions = {}) {
    this.#store = store;
    this.#log = options.logger ?? log.with({ component: "model-publisher" });
    this.#canWrite = options.canWrite ?? (() => true);
    this.#concurrency = options.concurrency ?? 256;
    const reg = options.registry ?? rootRegistry;
    this.#revGauge = reg.gauge("holdfast_model_rev", "Revision of the LB model last written.");
    this.#publishes = reg.counter(
      "holdfast_model_publishes_total",
      "Writes to the LB model, by op (upsert, delete, policy, settings).",
      { labelNames: ["op"] },
    );
  }

  /** The epoch of the model written to ("" before the first full sync). */
  get epoch(): string {
    return this.#epoch;
  }

  /** Revision of the last write (or of the store at the last full sync). */
  get rev(): number {
    return this.#rev;
  }

  /**
   * Full sync: reads the store, upserts entries that differ, deletes those not in `entries`.
   * Creates the model's epoch when there is none.
   */
  async replaceAll(entries: ReadonlyMap<string, ModelEntry>): Promise<PublishResult> {
    const snap = await this.#store.snapshot();
    if (snap.epoch === "" && !this.#canWrite()) {
      throw new Error("Cannot create the model's epoch: not allowed to write");
    }
    this.#epoch = snap.epoch || await this.#store.initEpoch(crypto.randomUUID());
    this.#rev = snap.rev;
    this.#revGauge.set(undefined, this.#rev);
    this.#held.clear();
    for (const [k, v] of snap.entries) this.#held.set(k, v);
    this.#heldPolicy = snap.policySha ?? "";
    this.#heldSettings = snap.settings ?? "";
    const writes: ModelWrite[] = [];
    for (const [name, e] of entries) {
      const entry = encodeEntry(e);
      if (this.#held.get(name) !== entry) writes.push({ op: "upsert", service: name, entry });
    }
    for (const name of snap.entries.keys()) {
      if (!entries.has(name)) writes.push({ op: "delete", service: name });
    }
    await this.#writeAll(writes);
    const r = {
      upserts: writes.filter((w) => w.op === "upsert").length,
      deletes: writes.filter((w) => w.op === "delete").length,
    };
    this.#log.info("model synced", { ...r, services: entries.size, rev: this.#rev });
    await this.flushPolicy();
    return r;
  }

  /**
   * Makes `settings` the ones to publish and writes them now if a full sync was done and the
   * store holds other ones (else the next full sync writes them); true if written. Serialized
   * with the policy writes.
   */
  setSettings(settings: ModelSettings): Promise<boolean> {
    this.#wantSettings = encodeSettings(settings);
    return this.flushPolicy();
  }

  async #flushSettings(): Promise<boolean> {
    const json = this.#wantSettings;
    if (json === null || json === this.#heldSettings || this.#epoch === "") return false;
    if (!this.#canWrite()) {
      throw new Error(`Cannot write settings ${json} to the model: not allowed to write`);
    }
    const rev = await this.#store.writeSettings(this.#epoch, json);
    this.#heldSettings = json;
    if (rev === 0) return false;
    if (rev > this.#rev) {
      this.#rev = rev;
      this.#revGauge.set(undefined, rev);
    }
    this.#publishes.inc({ op: "settings" });
    // BGP peers' passwords (validated: no quotes or backslashes) stay out of the log.
    const logged = json.replace(/"password":"[^"]*"/g, '"password":"<redacted>"');
    this.#log.info("model published", { op: "settings", settings: logged, rev });
    return true;
  }

  /**
   * Makes `policy` the module to publish (the controller accepted it) and writes it now if a
   * full sync was done; true if written. A module the store holds already is not written again.
   */
  setPolicy(policy: ModelPolicy): Promise<boolean> {
    this.#wantPolicy = policy;
    return this.flushPolicy();
  }

  /**
   * Writes the module of {@linkcode setPolicy} and the settings of {@linkcode setSettings} unless
   * the store holds them (or no full sync was done yet: the next one writes them); true if
   * either was written. Serialized.
   */
  flushPolicy(): Promise<boolean> {
    const run = this.#policyQueue.then(async () => {
      const settings = await this.#flushSettings();
      return await this.#flushPolicy() || settings;
    });
    this.#policyQueue = run.catch(() => undefined);
    return run;
  }

  async #flushPolicy(): Promise<boolean> {
    const p = this.#wantPolicy;
    if (p === null || p.sha256 === this.#heldPolicy || this.#epoch === "") return false;
    const sha = p.sha256.slice(0, 16);
    if (!this.#canWrite()) {
      throw new Error(`Cannot write policy module ${sha} to the model: not allowed to write`);
    }
    const rev = await this.#store.writePolicy(this.#epoch, p);
    this.#heldPolicy = p.sha256;
    if (rev === 0) return false;
    if (rev > this.#rev) {
      this.#rev = rev;
      this.#revGauge.set(undefined, rev);
    }
    this.#publishes.inc({ op: "policy" });
    this.#log.info("model published", { op: "policy", sha256: p.sha256, rev });
    return true;
  }

  /** Writes `entry` for service `name` unless the store holds it already; true if written. */
  async upsert(name: string, entry: ModelEntry): Promise<boolean> {
    const json = encodeEntry(entry);
    if (this.#held.get(name) === json) return false;
    await this.#write({ op: "upsert", service: name, entry: json });
    return true;
  }

  /** Deletes service `name` from the model if it is there; true if written. */
  async delete(name: string): Promise<boolean> {
    if (!this.#held.has(name)) return false;
    await this.#write({ op: "delete", service: name });
    return true;
  }

  /** Whether the store's epoch is still the one written to (false: Redis lost the model). */
  async checkEpoch(): Promise<boolean> {
    return (await this.#store.epoch()) === this.#epoch;
  }

  async #writeAll(writes: readonly ModelWrite[]): Promise<void> {
    for (let i = 0; i < writes.length; i += this.#concurrency) {
      await Promise.all(writes.slice(i, i + this.#concurrency).map((w) => this.#write(w)));
    }
  }

  async #write(w: ModelWrite): Promise<void> {
    if (this.#epoch === "") {
      throw new Error(`Cannot write service "${w.service}" to the model: no full sync yet`);
    }
    if (!this.#canWrite()) {
      throw new Error(`Cannot write service "${w.service}" to the model: not allowed to write`);
    }
    const rev = await this.#store.write(this.#epoch, w);
    if (w.op === "upsert") this.#held.set(w.service, w.entry);
    else this.#held.delete(w.service);
    if (rev > this.#rev) {
      this.#rev = rev;
      this.#revGauge.set(undefined, rev);
    }
    this.#publishes.inc({ op: w.op });
    this.#log.info("model published", { service: w.service, op: w.op, rev });
  }
}

/** A running publisher; dispose (or `stop()`) to end it. */
export interface RunningModelPublisher extends AsyncDisposable {
  readonly publisher: ModelPublisher;
  /**
   * Publishes `policy` (an accepted module) once synced; a failed write is retried at the next
   * pass or idle check.
   */
  setPolicy(policy: ModelPolicy): void;
  /** Publishes `settings` once synced; a failed write is retried like the policy's. */
  setSettings(settings: ModelSettings): void;
  /** Resolves after the first full sync. */
  synced(): Promise<void>;
  stop(): Promise<void>;
}

/** Options of {@linkcode startModelPublisher}. */
export interface StartModelPublisherOptions extends ModelPublisherOptions {
  /** How often an idle publisher checks that Redis still holds its model, ms (default 5000). */
  epochCheckMs?: number;
  /** Retry schedule after a failed write (default 100 ms .. 5 s with jitter). */
  retry?: BackoffOptions;
}

/**
 * Publishes the model of `cp`'s tables to `store`: once the tables are initialized (every
 * source's initializer done, e.g. K8sSource synced), a full sync (`replaceAll`: a restart with
 * the same inputs writes nothing); then each change of the services, frontends or backends
 * tables re-derives the services it touches and writes those that differ. A failed write, or a
 * store that lost the model (new epoch), leads to a full sync again after a backoff.
 */
export function startModelPublisher(
  cp: { readonly tables: LBTables },
  store: ModelStore,
  options: StartModelPublisherOptions = {},
): RunningModelPublisher {
  const t = cp.tables;
  const logger = options.logger ?? log.with({ component: "model-publisher" });
  const publisher = new ModelPublisher(store, { ...options, logger });
  const ac = new AbortController();
  const backoff = new Backoff(options.retry ?? { minMs: 100, maxMs: 5_000 });
  const epochCheckMs = options.epochCheckMs ?? 5_000;
  const its: ChangeIterator<unknown>[] = [
    t.services.changes(),
    t.frontends.changes(),
    t.backends
      .changes(),
  ] as ChangeIterator<unknown>[];
  /** Backend address → services its row had instances for when last seen. */
  const backendServices = new Map<string, readonly string[]>();
  let markSynced = () => {};
  const synced = new Promise<void>((r) => markSynced = r);

  const touchedIn = (txn: ReturnType<typeof t.db.readTxn>): [Set<string>, Watch[]] => {
    const names = new Set<string>();
    const watches: Watch[] = [];
    for (const it of its) {
      const [changes, w] = it.next(txn);
      watches.push(w);
      for (const c of changes) {
        const row = c.row as {
          name?: string;
          address?: string;
          serviceName?: string;
          instances?: readonly { serviceName: string }[];
        };
        if (row.instances === undefined) {
          names.add(row.serviceName ?? row.name!);
          continue;
        }
        // The services of its instances now, and those it had (an instance removed).
        for (const n of backendServices.get(row.address!) ?? []) names.add(n);
        const now = row.instances.map((i) => i.serviceName);
        for (const n of now) names.add(n);
        if (c.deleted) backendServices.delete(row.address!);
        else backendServices.set(row.address!, now);
      }
    }
    return [names, watches];
  };

  const run = async () => {
    let full = true;
    while (!ac.signal.aborted) {
      try {
        const txn = t.db.readTxn();
        const [init, initWatch] = t.services.initialized(txn);
        if (!init) {
          await waitAny([initWatch], { signal: ac.signal });
          continue;
        }
        const [names, watches] = touchedIn(txn);
        if (full) {
          await publisher.replaceAll(deriveAll(t, txn));
          full = false;
          markSynced();
        } else {
          await Promise.all([...names].map((name) => {
            const e = deriveEntry(t, txn, name);
            return e ? publisher.upsert(name, e) : publisher.delete(name);
          }));
        }
        await publisher.flushPolicy();
        backoff.reset();
        const why = await waitAny(watches, { timeoutMs: epochCheckMs, signal: ac.signal });
        if (why === "timeout" && !(await publisher.checkEpoch())) {
          logger.warn("model lost from the store: republishing", { epoch: publisher.epoch });
          full = true;
        }
      } catch (err) {
        if (ac.signal.aborted) break;
        full = true;
        const delay = backoff.next();
        logger.warn("model publish failed", { err: (err as Error).message, retryInMs: delay });
        await sleep(delay, ac.signal).catch(() => {});
      }
    }
  };
  const done = run();
  const stop = async () => {
    ac.abort();
    await done;
    for (const it of its) it.close();
  };
  const setPolicy = (policy: ModelPolicy) => {
    publisher.setPolicy(policy).catch((err) =>
      logger.warn("policy publish failed: retrying", { err: (err as Error).message })
    );
  };
  const setSettings = (settings: ModelSettings) => {
    publisher.setSettings(settings).catch((err) =>
      logger.warn("settings publish failed: retrying", { err: (err as Error).message })
    );
  };
  return {
    publisher,
    setPolicy,
    setSettings,
    synced: () => synced,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
