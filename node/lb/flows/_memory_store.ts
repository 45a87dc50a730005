/**
 * An in-memory {@link FlowStore} for unit tests (not product surface: tests import this file
 * directly).
 *
 * @module
 */

import { decodeFlowValue, encodeFlowValue } from "./schema.ts";
import { fieldFrontend } from "./field.ts";
import type { FlowBackend } from "../../bpf/flow.ts";
import {
  type FlowChange,
  type FlowStore,
  type LearnOptions,
  type PurgeScope,
  type StoredFlow,
  StoreUnavailableError,
} from "./store.ts";

interface MemoryVip {
  flows: Map<string, string>;
  seen: Map<string, number>;
  events: FlowChange[];
  lockUntil: number;
}

/**
 * An in-memory {@link FlowStore} with the same semantics as the Redis one, for unit tests.
 * `available = false` makes every call throw {@link StoreUnavailableError}; `restart()` empties
 * it and changes its instance ID, as a Redis restart without persistence does; `reconnected()`
 * tells subscribers the connection came back (as `RedisConnection` does after a restart).
 */
export class MemoryFlowStore implements FlowStore {
  /** When false, every call fails as if Redis were down. */
  available = true;
  /** Flows written by `learn` (for assertions). */
  storedCount = 0;
  /** Flows of those announced on a stream (for assertions). */
  announcedCount = 0;
  #vips = new Map<string, MemoryVip>();
  #instance = 1;
  #seq = 0;
  #waiters = new Set<() => void>();
  #reconnect = new Set<() => void>();
  readonly #clockMs: () => number;

  /** `clockMs`: the clock of expiry locks (default `Date.now`; tests pass the agents' clock). */
  constructor(options: { clockMs?: () => number } = {}) {
    this.#clockMs = options.clockMs ?? Date.now;
  }

  #check(): void {
    if (!this.available) throw new StoreUnavailableError("Cannot reach flow store: it is down");
  }

  #vip(vip: string): MemoryVip {
    let v = this.#vips.get(vip);
    if (!v) {
      this.#vips.set(vip, v = { flows: new Map(), seen: new Map(), events: [], lockUntil: 0 });
    }
    return v;
  }

  #announce(
    vip: string,
    node: string,
    op: "add" | "del",
    flows: StoredFlow[],
    reason?: string,
  ): void {
    if (flows.length === 0) return;
    const id = `${++this.#seq}-0`;
    this.#vip(vip).events.push({ vip, id, node, op, flows, ...(reason ? { reason } : {}) });
    for (const w of this.#waiters) w();
  }

  onReconnect(listener: () => void): () => void {
    this.#reconnect.add(listener);
    return () => this.#reconnect.delete(listener);
  }

  /** Calls the {@link onReconnect} listeners, as a connection that came back does. */
  reconnected(): void {
    for (const listener of this.#reconnect) listener();
  }

  /** Empties the store and changes its instance ID. */
  restart(): void {
    this.#vips.clear();
    this.#seq = 0;
    this.#instance++;
  }

  /** The stored value of a flow (for assertions). */
  stored(vip: string, field: string): StoredFlow | undefined {
    const v = this.#vips.get(vip)?.flows.get(field);
    if (v === undefined) return undefined;
    return { field, backend: decodeFlowValue(v).backend };
  }

  /** Number of flows stored for `vip`. */
  count(vip: string): number {
    return this.#vips.get(vip)?.flows.size ?? 0;
  }

  /** Last seen of a flow (for assertions). */
  lastSeen(vip: string, field: string): number | undefined {
    return this.#vips.get(vip)?.seen.get(field);
  }

  instanceId(_vips: readonly string[]): Promise<string> {
    this.#check();
    return Promise.resolve(`memory-${this.#instance}`);
  }

  learn(vip: string, flows: readonly StoredFlow[], options: LearnOptions): Promise<void> {
    this.#check();
    const v = this.#vip(vip);
    for (const f of flows) {
      v.flows.set(f.field, encodeFlowValue(f.backend, options.nowMs, f.version ?? 0));
    }
    this.storedCount += flows.length;
    if (options.announce === false) return Promise.resolve();
    this.announcedCount += flows.length;
    this.#announce(vip, options.node, "add", [...flows]);
    return Promise.resolve();
  }

  touch(vip: string, seen: readonly { field: string; lastSeenMs: number }[]): Promise<void> {
    this.#check();
    const v = this.#vip(vip);
    for (const s of seen) v.seen.set(s.field, Math.max(v.seen.get(s.field) ?? 0, s.lastSeenMs));
    return Promise.resolve();
  }

  expire(vip: string, cutoffMs: number, options: { node: string; lockMs: number }) {
    this.#check();
    const v = this.#vip(vip);
    const now = this.#clockMs();
    if (v.lockUntil > now) return Promise.resolve([]);
    v.lockUntil = now + options.lockMs;
    const gone: string[] = [];
    for (const [field, value] of v.flows) {
      const last = Math.max(decodeFlowValue(value).learnedMs, v.seen.get(field) ?? 0);
      if (last <= cutoffMs) gone.push(field);
    }
    for (const f of gone) {
      v.seen.delete(f);
      v.flows.delete(f);
    }
    for (const [field, ms] of v.seen) if (ms <= cutoffMs) v.seen.delete(field);
    const flows = gone.map((field) => ({ field, backend: 0 }));
    this.#announce(vip, options.node, "del", flows, "idle");
    return Promise.resolve(gone);
  }

  exists(vip: string, fields: readonly string[]): Promise<boolean[]> {
    this.#check();
    const v = this.#vip(vip);
    return Promise.resolve(fields.map((f) => v.flows.has(f)));
  }

  async *scan(vip: string, options: { pageSize?: number } = {}): AsyncIterable<StoredFlow[]> {
    this.#check();
    const all = [...this.#vip(vip).flows].map(([field, value]) => ({
      field,
      backend: decodeFlowValue(value).backend,
    }));
    const size = options.pageSize ?? 1000;
    for (let i = 0; i < all.length; i += size) {
      await Promise.resolve();
      this.#check();
      yield all.slice(i, i + size);
    }
  }

  purgeBackend(
    scope: PurgeScope,
    backend: FlowBackend,
    options: { node: string },
  ): Promise<string[]> {
    this.#check();
    const vip = scope.vip;
    const v = this.#vip(vip);
    const gone: string[] = [];
    for (const [field, value] of v.flows) {
      const frontend = fieldFrontend(field);
      if (frontend.port !== scope.port || frontend.proto !== scope.proto) continue;
      if (decodeFlowValue(value).backend === backend) gone.push(field);
    }
    for (const f of gone) {
      v.flows.delete(f);
      v.seen.delete(f);
    }
    const flows = gone.map((field) => ({ field, backend: 0 }));
    this.#announce(vip, options.node, "del", flows, "purge");
    return Promise.resolve(gone);
  }

  streamTail(vip: string): Promise<string> {
    this.#check();
    return Promise.resolve(this.#vip(vip).events.at(-1)?.id ?? "0-0");
  }

  async read(
    positions: ReadonlyMap<string, string>,
    options: { blockMs: number; count: number },
  ): Promise<FlowChange[]> {
    const collect = () => {
      this.#check();
      const out: FlowChange[] = [];
      for (const [vip, after] of positions) {
        const seq = Number(after.split("-")[0]);
        for (const e of this.#vip(vip).events) {
          if (Number(e.id.split("-")[0]) > seq && out.length < options.count) out.push(e);
        }
      }
      return out;
    };
    const now = collect();
    if (now.length > 0 || options.blockMs <= 0) return now;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, options.blockMs);
      this.#waiters.add(done);
    });
    return collect();
  }

  close(): Promise<void> {
    for (const w of this.#waiters) w();
    return Promise.resolve();
  }
}
