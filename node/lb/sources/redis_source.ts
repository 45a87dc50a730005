/**
 * The Redis source: an agent follows the LB model the controller publishes (`controller/model/`).
 * 1. Snapshot: revision, epoch, last stream id and every entry, read consistently; the source's
 *    rows become exactly the snapshot's (a diff: unchanged entries write nothing). The first
 *    snapshot completes the source's initializer, so the BPF-maps reconciler prunes nothing
 *    before the model is back (a restarted agent keeps serving from its pinned maps).
 * 2. Follow: blocking reads of the change stream after the snapshot's last id, applied in
 *    revision order, one write transaction per batch.
 * 3. Re-read (step 1 again, logged `model re-read` with `why`): a revision gap (the stream was
 *    trimmed past what the agent saw), a new epoch (Redis lost the model and the controller
 *    republished it), or a reconnection. While Redis is unreachable, or holds no model, the rows
 *    stay as they are and the datapath keeps serving; retries follow `lib/backoff.ts`.
 *
 * An entry that is not valid JSON or that the file format's checks refuse (`configFromValue`) is
 * logged with its service and skipped; the rest applies.
 *
 * The policy module (`hf:model:{m}:policy`): when a snapshot or a `policy` change names a module
 * not seen yet, it is read, checked against its SHA-256 and handed to `onPolicy` (the agent swaps
 * its PolicyHost and rebuilds its Maglev tables: `node/lb/policy_swap.ts`). Settings
 * (`controller/model/settings.ts`) go to `onSettings`. A `nodeName` the settings' `lbNodes` leave
 * out is not an LB node: its rows leave the tables (and maps) until it is selected again; `view`
 * stays the model's (flow sync purges nothing).
 *
 * @module
 */

import { Backoff, type BackoffOptions, sleep } from "../../../lib/backoff.ts";
import { log, type Logger } from "../../../lib/log.ts";
import type { SourceWriter } from "../tables/source_writer.ts";
import type { Writer } from "../tables/writer.ts";
import type { ModelChange, ModelSnapshot, ModelStore } from "../../../controller/model/store.ts";
import { type ModelPolicy, sha256Hex } from "../../../controller/model/schema.ts";
import {
  type ModelSettings,
  parseSettings,
  selectsNode,
} from "../../../controller/model/settings.ts";
import type { WriteTxn } from "../../../lib/statedb/mod.ts";
import { configFromValue, type FileConfig } from "./file_source.ts";

type ServiceConfig = FileConfig["services"][number];

/** Options of {@linkcode RedisModelSource}. */
export interface RedisModelSourceOptions {
  /** Source name (default `redis`). */
  source?: string;
  /** Register as an initializer of the LB tables (default true). */
  initializer?: boolean;
  /** Logger (default: the process logger with `component: "model-source"`). */
  logger?: Logger;
  /** Retry schedule while Redis is unreachable (default 100 ms .. 5 s with jitter). */
  retry?: BackoffOptions;
  /** Longest blocking read of the change stream, ms (default 1000). */
  blockMs?: number;
  /** Most changes applied per transaction (default 1000). */
  count?: number;
  /** How often an idle follower checks the epoch, ms (default 5000). */
  epochCheckMs?: number;
  /**
   * How often Redis is polled while it is reachable but holds no model yet (a fresh install, or
   * Redis restarted empty), ms (default 100): the model shows up within this, not after a backoff.
   * Between polls the source waits on the change stream, so the first write wakes it at once.
   */
  emptyPollMs?: number;
  /**
   * Called after every applied snapshot or batch with the model before and after (null before
   * the first), one call at a time: the agent follows LB IPs and its flow trust boundary with it.
   */
  onApplied?: (prev: FileConfig | null, next: FileConfig) => void | Promise<void>;
  /**
   * Called with the model's policy module when it differs from the last one handed over (at
   * the first snapshot if the model has one, then on each `policy` change), one call at a time
   * with `onApplied`: the agent validates it and swaps its PolicyHost. The SHA-256 is checked
   * against the bytes first; a mismatch is logged and not handed over.
   */
  onPolicy?: (policy: ModelPolicy) => void | Promise<void>;
  /** This node's name: the settings' `lbNodes` decide whether it serves (absent: it always does). */
  nodeName?: string;
  /** Gets the settings and whether this node serves, at the first snapshot and on change. */
  onSettings?: (settings: ModelSettings, serving: boolean) => void | Promise<void>;
}

/** Follows the model in a {@linkcode ModelStore} as one Writer source. */
export class RedisModelSource {
  readonly src: SourceWriter;
  readonly #store: ModelStore;
  readonly #log: Logger;
  readonly #opts: RedisModelSourceOptions;
  #initDone: ((txn: WriteTxn) => void) | null = null;
  /** service → [JSON applied, its validated form]. */
  readonly #rows = new Map<string, { json: string; svc: ServiceConfig }>();
  #view: FileConfig | null = null;
  #epoch = "";
  #rev = 0;
  #lastId = "0-0";
  /** SHA-256 of the policy module last handed to `onPolicy` (or found invalid). */
  #policySha = "";
  /** Settings JSON last applied (null: none yet), and whether the rows are in the tables. */
  #settingsJson: string | null = null;
  #serving = true;
  #ac = new AbortController();
  #running: Promise<void> | null = null;
  #notify: Promise<void> = Promise.resolve();
  #markReady = () => {};
  readonly #ready = new Promise<void>((r) => this.#markReady = r);

  /** Registers the initializer (construct before the control plane starts); `start()` follows. */
  constructor(writer: Writer, store: ModelStore, options: RedisModelSourceOptions = {}) {
    this.src = writer.source(options.source ?? "redis");
    this.#store = store;
    this.#opts = options;
    this.#log = options.logger ?? log.with({ component: "model-source" });
    if (options.initializer ?? true) {
      const txn = this.src.txn();
      this.#initDone = this.src.registerInitializer(txn);
      txn.commit();
    }
  }

  /** Epoch of the model applied ("" before the first snapshot). */
  get epoch(): string {
    return this.#epoch;
  }

  /** Revision of the model applied. */
  get rev(): number {
    return this.#rev;
  }

  /** The model applied, in the file format (null before the first snapshot). */
  get view(): FileConfig | null {
    return this.#view;
  }

  /** Whether this node serves the model (false: `lbNodes` leave it out; its rows are withdrawn). */
  get serving(): boolean {
    return this.#serving;
  }

  /** Resolves once the first snapshot is applied. */
  ready(): Promise<void> {
    return this.#ready;
  }

  /** Starts following in the background. */
  start(): void {
    this.#running ??= this.#run();
  }

  /** Stops following; the rows stay. */
  async stop(): Promise<void> {
    this.#ac.abort();
    await this.#running;
    await this.#notify;
  }

  async #run(): Promise<void> {
    const signal = this.#ac.signal;
    const backoff = new Backoff(this.#opts.retry ?? { minMs: 100, maxMs: 5_000 });
    const epochCheckMs = this.#opts.epochCheckMs ?? 5_000;
    let need: string | null = "start";
    let lastCheck = Date.now();
    let empty = false;
    while (!signal.aborted) {
      try {
        if (need !== null) {
          const snap = await this.#store.snapshot();
          if (snap.epoch === "") {
            if (!empty) {
              this.#log.warn("model not in Redis: keeping the rows applied", {
                why: need,
                services: this.#rows.size,
              });
            }
            empty = true;
            // Woken by the model's first change (the publisher's first write), else polled.
            await this.#store.read("$", { count: 1, blockMs: this.#opts.emptyPollMs ?? 100 });
            continue;
          }
          empty = false;
          if (need !== "start") {
            this.#log.info("model re-read", { why: need, rev: snap.rev, epoch: snap.epoch });
          }
          this.#applySnapshot(snap);
          await this.#followPolicy(snap.policySha ?? "");
          need = null;
          backoff.reset();
          lastCheck = Date.now();
          continue;
        }
        const changes = await this.#store.read(this.#lastId, {
          count: this.#opts.count ?? 1000,
          blockMs: this.#opts.blockMs ?? 1000,
        });
        if (signal.aborted) break;
        if (changes.length === 0) {
          if (Date.now() - lastCheck >= epochCheckMs) {
            lastCheck = Date.now();
            const epoch = await this.#store.epoch();
            if (epoch !== this.#epoch) need = epoch === "" ? "model gone" : "epoch changed";
          }
          continue;
        }
        need = this.#applyChanges(changes);
        const policy = changes.findLast((c) => c.op === "policy" && c.epoch === this.#epoch);
        if (policy !== undefined) await this.#followPolicy(policy.sha256 ?? "");
        backoff.reset();
      } catch (err) {
        if (signal.aborted) break;
        const delay = backoff.next();
        this.#log.warn("model unreachable: serving the rows applied", {
          err: (err as Error).message,
          retryInMs: delay,
        });
        need = "reconnected";
        await sleep(delay, signal).catch(() => {});
      }
    }
  }

  /** Makes the rows the snapshot's, writing only entries that differ. */
  #applySnapshot(snap: ModelSnapshot): void {
    const prev = this.#view;
    const txn = this.src.txn();
    let changed = 0;
    try {
      for (const name of [...this.#rows.keys()]) {
        if (!snap.entries.has(name)) {
          this.#delete(txn, name);
          changed++;
        }
      }
      for (const [name, json] of snap.entries) {
        if (this.#rows.get(name)?.json !== json && this.#upsert(txn, name, json)) changed++;
      }
      this.#applySettings(txn, snap.settings ?? "");
      this.#initDone?.(txn);
      this.#initDone = null;
      txn.commit();
    } finally {
      txn.abort();
    }
    this.#epoch = snap.epoch;
    this.#rev = snap.rev;
    this.#lastId = snap.lastId;
    this.#log.info("model applied", {
      rev: snap.rev,
      services: this.#rows.size,
      changed,
      snapshot: true,
    });
    this.#changed(prev, changed > 0 || prev === null);
    this.#markReady();
  }

  /** Applies changes in revision order; returns why to re-read instead, or null. */
  #applyChanges(changes: readonly ModelChange[]): string | null {
    const prev = this.#view;
    const txn = this.src.txn();
    let why: string | null = null;
    const names = new Set<string>();
    try {
      for (const c of changes) {
        if (c.epoch !== this.#epoch) {
          why = "epoch changed";
          break;
        }
        if (c.rev <= this.#rev) { // already in the snapshot
          this.#lastId = c.id;
          continue;
        }
        if (c.rev !== this.#rev + 1) {
          why = `gap: rev ${this.#rev + 1}..${c.rev - 1} missed`;
          break;
        }
        if (c.op === "policy") {
          // The module itself is read after the batch (#followPolicy).
        } else if (c.op === "settings") {
          this.#applySettings(txn, c.settings ?? "");
        } else if (c.op === "delete") {
          if (this.#rows.has(c.service)) this.#delete(txn, c.service);
        } else if (c.entry !== undefined && this.#rows.get(c.service)?.json !== c.entry) {
          this.#upsert(txn, c.service, c.entry);
        }
        if (c.op !== "policy" && c.op !== "settings") names.add(c.service);
        this.#rev = c.rev;
        this.#lastId = c.id;
      }
      txn.commit();
    } finally {
      txn.abort();
    }
    if (names.size > 0) {
      this.#log.info("model applied", { rev: this.#rev, services: names.size });
      this.#changed(prev, true);
    }
    return why;
  }

  /**
   * Reads the model's policy module if its SHA-256 `sha` is not the one last handed over, and
   * queues it for `onPolicy`. Throws when the store cannot be read (the caller retries).
   */
  async #followPolicy(sha: string): Promise<void> {
    const fn = this.#opts.onPolicy;
    if (fn === undefined || sha === "" || sha === this.#policySha) return;
    const p = await this.#store.readPolicy();
    if (p === null || p.sha256 === this.#policySha) return;
    this.#policySha = p.sha256;
    const actual = await sha256Hex(p.wasm);
    if (actual !== p.sha256) {
      this.#log.error("policy module in the model is corrupt, ignored", {
        sha256: p.sha256,
        actual,
      });
      return;
    }
    this.#notify = this.#notify.then(() => fn(p)).catch((err) =>
      this.#log.warn("policy follower failed", { err: (err as Error).message })
    );
  }

  /**
   * Takes the settings `json` if they differ from the last: withdraws the rows from the tables
   * (or writes them back) when this node stops (or starts) serving, and queues `onSettings`.
   */
  #applySettings(txn: WriteTxn, json: string): void {
    if (json === this.#settingsJson) return;
    this.#settingsJson = json;
    const { settings, problems } = parseSettings(json);
    if (problems.length > 0) this.#log.error("model settings partly invalid", { problems });
    const serving = selectsNode(settings, this.#opts.nodeName);
    if (serving !== this.#serving) {
      this.#serving = serving;
      for (const [name, r] of this.#rows) {
        if (serving) this.#write(txn, r.svc);
        else this.#withdraw(txn, name);
      }
    }
    const fn = this.#opts.onSettings;
    if (fn === undefined) return;
    this.#notify = this.#notify.then(() => fn(settings, serving)).catch((err) =>
      this.#log.warn("settings follower failed", { err: (err as Error).message })
    );
  }

  /** Validates and writes one entry; false (logged, nothing written) when it is invalid. */
  #upsert(txn: WriteTxn, name: string, json: string): boolean {
    let svc: ServiceConfig;
    try {
      const raw = JSON.parse(json) as { service?: Record<string, unknown>; backends?: unknown };
      if (typeof raw !== "object" || raw === null || typeof raw.service !== "object") {
        throw new Error("expected {service, backends}");
      }
      const cfg = configFromValue({ services: [{ ...raw.service, backends: raw.backends ?? [] }] });
      svc = cfg.services[0]!;
      if (svc.name !== name) throw new Error(`entry names service "${svc.name}"`);
    } catch (err) {
      this.#log.error("model entry rejected, skipped", {
        service: name,
        err: (err as Error).message,
      });
      return false;
    }
    if (this.#serving) this.#write(txn, svc);
    this.#rows.set(name, { json, svc });
    return true;
  }

  #write(txn: WriteTxn, svc: ServiceConfig): void {
    this.src.upsertService(txn, svc);
    this.src.setBackends(txn, { service: svc.name, backends: svc.backends });
  }

  #withdraw(txn: WriteTxn, name: string): void {
    this.src.deleteService(txn, name);
    this.src.setBackends(txn, { service: name, backends: [] });
  }

  #delete(txn: WriteTxn, name: string): void {
    if (this.#serving) this.#withdraw(txn, name);
    this.#rows.delete(name);
  }

  /** Rebuilds the view and, if it changed, tells `onApplied` (one call at a time). */
  #changed(prev: FileConfig | null, changed: boolean): void {
    if (!changed) return;
    const next: FileConfig = {
      services: [...this.#rows.values()].map((r) => r.svc),
      redirects: [],
    };
    this.#view = next;
    const fn = this.#opts.onApplied;
    if (fn === undefined) return;
    this.#notify = this.#notify.then(() => fn(prev, next)).catch((err) =>
      this.#log.warn("model follower failed", { err: (err as Error).message })
    );
  }
}
