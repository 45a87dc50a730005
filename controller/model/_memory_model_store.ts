/**
 * An in-memory {@linkcode ModelStore} for unit tests, with the Redis store's semantics (epoch
 * check, revision, a trimmed change stream) and switches for outages (`available`), trimming
 * (`trim`) and losing everything (`restartEmpty`).
 *
 * @module
 */

import { StoreUnavailableError } from "../../lib/redis_connection.ts";
import {
  type ModelChange,
  ModelEpochError,
  type ModelSnapshot,
  type ModelStore,
  type ModelWrite,
} from "./store.ts";
import type { ModelPolicy } from "./schema.ts";

/** The model in memory. */
export class MemoryModelStore implements ModelStore {
  /** False: every call throws `StoreUnavailableError`. */
  available = true;
  entries = new Map<string, string>();
  rev = 0;
  epochToken = "";
  stream: ModelChange[] = [];
  /** The policy module in the model. */
  policy: ModelPolicy | null = null;
  /** The settings JSON in the model ("" none). */
  settings = "";
  /** Writes applied, policy writes included (for "nothing was written" assertions). */
  writes = 0;
  #seq = 0;
  #waiters = new Set<() => void>();

  #check(): void {
    if (!this.available) throw new StoreUnavailableError("Cannot reach model store: it is down");
  }

  snapshot(): Promise<ModelSnapshot> {
    this.#check();
    return Promise.resolve({
      epoch: this.epochToken,
      rev: this.rev,
      lastId: this.stream.at(-1)?.id ?? "0-0",
      entries: new Map(this.entries),
      policySha: this.policy?.sha256 ?? "",
      settings: this.settings,
    });
  }

  epoch(): Promise<string> {
    this.#check();
    return Promise.resolve(this.epochToken);
  }

  initEpoch(token: string): Promise<string> {
    this.#check();
    if (this.epochToken === "") this.epochToken = token;
    return Promise.resolve(this.epochToken);
  }

  write(epoch: string, w: ModelWrite): Promise<number> {
    this.#checkEpoch(epoch, `service "${w.service}"`);
    if (w.op === "upsert") this.entries.set(w.service, w.entry);
    else this.entries.delete(w.service);
    return this.#append({
      epoch,
      op: w.op,
      service: w.service,
      ...(w.op === "upsert" ? { entry: w.entry } : {}),
    });
  }

  writePolicy(epoch: string, policy: ModelPolicy): Promise<number> {
    this.#checkEpoch(epoch, "the policy module");
    if (this.policy?.sha256 === policy.sha256) return Promise.resolve(0);
    this.policy = { sha256: policy.sha256, wasm: policy.wasm.slice() };
    return this.#append({ epoch, op: "policy", service: "", sha256: policy.sha256 });
  }

  writeSettings(epoch: string, json: string): Promise<number> {
    this.#checkEpoch(epoch, "the settings");
    if (this.settings === json) return Promise.resolve(0);
    this.settings = json;
    return this.#append({ epoch, op: "settings", service: "", settings: json });
  }

  /** Throws unless the store is up and `epoch` is the stored one; `what` names the write. */
  #checkEpoch(epoch: string, what: string): void {
    this.#check();
    if (epoch !== this.epochToken) {
      throw new ModelEpochError(`Cannot write ${what}: epoch is "${this.epochToken}"`);
    }
  }

  /** Records one change at the next revision and wakes blocked readers; the revision. */
  #append(change: Omit<ModelChange, "id" | "rev">): Promise<number> {
    this.rev++;
    this.writes++;
    this.stream.push({ id: `${++this.#seq}-0`, rev: this.rev, ...change });
    for (const wake of this.#waiters) wake();
    return Promise.resolve(this.rev);
  }

  readPolicy(): Promise<ModelPolicy | null> {
    this.#check();
    return Promise.resolve(this.policy);
  }

  async read(after: string, options: { count: number; blockMs: number }): Promise<ModelChange[]> {
    this.#check();
    const seq = after === "$" ? Infinity : Number(after.split("-")[0]);
    let out = this.stream.filter((c) => Number(c.id.split("-")[0]) > seq);
    if (out.length === 0 && options.blockMs > 0) {
      let wake = () => {};
      const woke = new Promise<void>((r) => this.#waiters.add(wake = r));
      const timer = setTimeout(wake, options.blockMs);
      await woke;
      clearTimeout(timer);
      this.#waiters.delete(wake);
      this.#check();
      out = this.stream.filter((c) => Number(c.id.split("-")[0]) > seq);
    }
    return out.slice(0, options.count);
  }

  /** Keeps only the last `n` stream entries. */
  trim(n: number): void {
    this.stream = this.stream.slice(-n);
  }

  /** Loses everything, like a Redis restarted without persistence (stream ids keep growing). */
  restartEmpty(): void {
    this.entries = new Map();
    this.rev = 0;
    this.epochToken = "";
    this.stream = [];
    this.policy = null;
    this.settings = "";
  }

  close(): Promise<void> {
    for (const wake of this.#waiters) wake();
    return Promise.resolve();
  }
}
