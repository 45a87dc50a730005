/**
 * {@link FlowStore} over Redis (schema in `schema.ts`); connections in `lib/redis_connection.ts`.
 * Authentication: `redis://user:password@host:port` or the `username`/`password` options (Redis
 * ACL users or `requirepass`). TLS: a `rediss://` URL or `tls: {}`, with an optional CA. A Redis
 * Cluster: `redis+cluster://host:port,…`; every key of one LB IP's bucket shares its hash tag (one
 * slot), so scripts work unchanged, and the stream reads are split per tag (see `read`). With
 * `buckets` > 1 an LB IP's flows spread over that many tags (`buckets.ts`), so over several
 * masters: every call fans out to the buckets its flows fall in.
 *
 * @module
 */

import {
  decodeBackend,
  encodeFlowValue,
  EXPIRE_SCRIPT,
  KEY_TTL_FACTOR,
  LEARN_SCRIPT,
  PURGE_SCRIPT,
  STORE_SCRIPT,
  STREAM_MAXLEN,
  vipKeys,
} from "./schema.ts";
import type { FlowChange, FlowStore, LearnOptions, PurgeScope, StoredFlow } from "./store.ts";
import { backendHex } from "./field.ts";
import type { FlowBackend } from "../../bpf/flow.ts";
import { RedisConnection, type RedisStoreOptions } from "../../../lib/redis_connection.ts";
import { readStreams } from "./_stream_read.ts";

export { CLUSTER_POLL_MS } from "./_stream_read.ts";
import { bucketTags, checkFlowBuckets, groupByBucket, joinPositions } from "./buckets.ts";

export { redact, type RedisStoreOptions } from "../../../lib/redis_connection.ts";

function hex16(n: number): string {
  return (n & 0xffff).toString(16).padStart(4, "0");
}

/** {@link RedisStoreOptions} and the flow layout. */
export interface FlowStoreOptions extends RedisStoreOptions {
  /** Hash tags per LB IP (`buckets.ts`; default 1, the layout every version reads). */
  readonly buckets?: number;
}

/** The Redis-backed flow store. Create with {@link connectRedisStore}. */
export class RedisFlowStore implements FlowStore {
  readonly #redis: RedisConnection;
  readonly #prefix: string;
  readonly #buckets: number;

  constructor(readonly options: FlowStoreOptions) {
    this.#prefix = options.prefix ?? "hf";
    this.#buckets = checkFlowBuckets(options.buckets ?? 1);
    this.#redis = new RedisConnection(options);
  }

  /** Hash tags per LB IP. */
  get buckets(): number {
    return this.#buckets;
  }

  /** The tags of `vip`'s buckets (just `vip` with one bucket). */
  #tags(vip: string): string[] {
    return bucketTags(vip, this.#buckets);
  }

  /** Whether the command connection is up. */
  get ready(): boolean {
    return this.#redis.ready;
  }

  onReconnect(listener: () => void): () => void {
    return this.#redis.onRestored(listener);
  }

  #keys(vip: string): string[] {
    const k = vipKeys(vip, this.#prefix);
    return [k.flows, k.seen, k.events];
  }

  async instanceId(vips: readonly string[]): Promise<string> {
    // A token per LB IP rather than INFO's run_id: works for an ACL user without @dangerous,
    // and in a cluster it follows the shard that holds the LB IP.
    const tokens = await Promise.all(
      vips.flatMap((v) => this.#tags(v)).map(async (vip) => {
        const key = vipKeys(vip, this.#prefix).instance;
        await this.#redis.command(["SET", key, crypto.randomUUID(), "NX"]);
        return String(await this.#redis.command(["GET", key]));
      }),
    );
    return tokens.join(",");
  }

  async learn(vip: string, flows: readonly StoredFlow[], options: LearnOptions): Promise<void> {
    if (flows.length === 0) return;
    if (this.#buckets === 1) return await this.#learn(vip, flows, options);
    const tags = this.#tags(vip);
    const groups = groupByBucket(flows, (f) => f.field, this.#buckets);
    await Promise.all([...groups].map(([b, group]) => this.#learn(tags[b]!, group, options)));
  }

  async #learn(vip: string, flows: readonly StoredFlow[], options: LearnOptions): Promise<void> {
    const k = vipKeys(vip, this.#prefix);
    const ttl = String(Math.max(1000, options.idleTimeoutMs * KEY_TTL_FACTOR));
    const announce = options.announce ?? true;
    const args = announce ? [options.node, ttl, String(STREAM_MAXLEN)] : [ttl];
    const suffix = `:${Math.round(options.nowMs)}`;
    // Few distinct backends per batch: build each value string once.
    const values = new Map<FlowBackend, string>();
    for (const f of flows) {
      if (f.version) {
        args.push(f.field, encodeFlowValue(f.backend, options.nowMs, f.version));
        continue;
      }
      let value = values.get(f.backend);
      if (value === undefined) values.set(f.backend, value = `${backendHex(f.backend)}${suffix}`);
      args.push(f.field, value);
    }
    if (announce) await this.#redis.eval(LEARN_SCRIPT, [k.flows, k.events], args);
    else await this.#redis.eval(STORE_SCRIPT, [k.flows], args);
  }

  async touch(
    vip: string,
    seen: readonly { field: string; lastSeenMs: number }[],
    options: { idleTimeoutMs: number },
  ): Promise<void> {
    if (seen.length === 0) return;
    if (this.#buckets > 1) {
      const tags = this.#tags(vip);
      const groups = groupByBucket(seen, (s) => s.field, this.#buckets);
      await Promise.all([...groups].map(([b, group]) => this.#touch(tags[b]!, group, options)));
      return;
    }
    await this.#touch(vip, seen, options);
  }

  async #touch(
    vip: string,
    seen: readonly { field: string; lastSeenMs: number }[],
    options: { idleTimeoutMs: number },
  ): Promise<void> {
    const [flows, seenKey, events] = this.#keys(vip) as [string, string, string];
    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < seen.length; i += 1000) {
      const args = ["ZADD", seenKey, "GT"];
      for (const s of seen.slice(i, i + 1000)) args.push(String(Math.round(s.lastSeenMs)), s.field);
      sends.push(this.#redis.command(args));
    }
    const ttl = String(Math.max(1000, options.idleTimeoutMs * KEY_TTL_FACTOR));
    for (const k of [flows, seenKey, events]) {
      sends.push(this.#redis.command(["PEXPIRE", k, ttl]));
    }
    await Promise.all(sends);
  }

  async expire(
    vip: string,
    cutoffMs: number,
    options: { node: string; lockMs: number },
  ): Promise<string[]> {
    const gone: string[] = [];
    for (const tag of this.#tags(vip)) gone.push(...await this.#expire(tag, cutoffMs, options));
    return gone;
  }

  async #expire(
    vip: string,
    cutoffMs: number,
    options: { node: string; lockMs: number },
  ): Promise<string[]> {
    const k = vipKeys(vip, this.#prefix);
    const lock = await this.#redis.command([
      "SET",
      k.sweeper,
      options.node,
      "NX",
      "PX",
      String(Math.max(1, Math.round(options.lockMs))),
    ]);
    if (lock === null) return [];
    const gone: string[] = [];
    let cursor = "0";
    for (let step = 0; step < 100_000; step++) {
      const [next, fields] = await this.#redis.eval(EXPIRE_SCRIPT, this.#keys(vip), [
        options.node,
        String(Math.floor(cutoffMs)),
        cursor,
        "2000",
        String(STREAM_MAXLEN),
      ]) as [string, string[]];
      gone.push(...fields);
      cursor = next;
      if (cursor === "0") break;
    }
    return gone;
  }

  async exists(vip: string, fields: readonly string[]): Promise<boolean[]> {
    if (fields.length === 0) return [];
    if (this.#buckets > 1) {
      const tags = this.#tags(vip);
      const idx = fields.map((_, i) => i);
      const groups = groupByBucket(idx, (i) => fields[i]!, this.#buckets);
      const out = new Array<boolean>(fields.length);
      await Promise.all([...groups].map(async ([b, group]) => {
        const found = await this.#exists(tags[b]!, group.map((i) => fields[i]!));
        group.forEach((i, j) => out[i] = found[j]!);
      }));
      return out;
    }
    return await this.#exists(vip, fields);
  }

  async #exists(vip: string, fields: readonly string[]): Promise<boolean[]> {
    const key = vipKeys(vip, this.#prefix).flows;
    const out: boolean[] = [];
    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < fields.length; i += 1000) {
      sends.push(this.#redis.command(["HMGET", key, ...fields.slice(i, i + 1000)]));
    }
    for (const r of await Promise.all(sends)) {
      for (const v of r as (string | null)[]) out.push(v !== null);
    }
    return out;
  }

  async *scan(vip: string, options: { pageSize?: number } = {}): AsyncIterable<StoredFlow[]> {
    for (const tag of this.#tags(vip)) yield* this.#scan(tag, options);
  }

  async *#scan(vip: string, options: { pageSize?: number }): AsyncIterable<StoredFlow[]> {
    const key = vipKeys(vip, this.#prefix).flows;
    const count = String(options.pageSize ?? 10_000);
    type Page = [string, string[]];
    const hscan = (cursor: string) =>
      this.#redis.command(["HSCAN", key, cursor, "COUNT", count]) as Promise<Page>;
    // Prefetch: Redis produces the next page while this one is parsed and installed.
    let pending: Promise<Page> | null = hscan("0");
    while (pending) {
      const [next, items]: Page = await pending;
      pending = next === "0" ? null : hscan(next);
      const page: StoredFlow[] = new Array(items.length >> 1);
      for (let i = 0, j = 0; i + 1 < items.length; i += 2, j++) {
        // "<backend hex8 or hex32>:<learned ms>" (or the older "<hex8>:<epoch>:<learned ms>").
        page[j] = { field: items[i]!, backend: decodeBackend(items[i + 1]!) ?? -1 };
      }
      if (page.length > 0) yield page;
    }
  }

  async purgeBackend(
    scope: PurgeScope,
    backend: FlowBackend,
    options: { node: string },
  ): Promise<string[]> {
    const gone: string[] = [];
    for (const tag of this.#tags(scope.vip)) {
      gone.push(...await this.#purge({ ...scope, vip: tag }, backend, options));
    }
    return gone;
  }

  async #purge(
    scope: PurgeScope,
    backend: FlowBackend,
    options: { node: string },
  ): Promise<string[]> {
    const vip = scope.vip;
    const want = backendHex(backend);
    const prefix = `${want}:`;
    // The field ends in dport (4 hex) and proto (2 hex): only this frontend's flows.
    const frontend = hex16(scope.port) + (scope.proto & 255).toString(16).padStart(2, "0");
    const candidates: string[] = [];
    const key = vipKeys(vip, this.#prefix).flows;
    let cursor = "0";
    do {
      const [next, items] = await this.#redis.command([
        "HSCAN",
        key,
        cursor,
        "COUNT",
        "10000",
      ]) as [string, string[]];
      cursor = next;
      for (let i = 0; i + 1 < items.length; i += 2) {
        const field = items[i]!;
        if (items[i + 1]!.startsWith(prefix) && field.endsWith(frontend)) candidates.push(field);
      }
    } while (cursor !== "0");
    const gone: string[] = [];
    for (let i = 0; i < candidates.length; i += 1000) {
      const r = await this.#redis.eval(PURGE_SCRIPT, this.#keys(vip), [
        options.node,
        want,
        String(STREAM_MAXLEN),
        ...candidates.slice(i, i + 1000),
      ]) as string[];
      gone.push(...r);
    }
    return gone;
  }

  async streamTail(vip: string): Promise<string> {
    if (this.#buckets > 1) {
      return joinPositions(await Promise.all(this.#tags(vip).map((t) => this.#streamTail(t))));
    }
    return await this.#streamTail(vip);
  }

  async #streamTail(vip: string): Promise<string> {
    const r = await this.#redis.command([
      "XREVRANGE",
      vipKeys(vip, this.#prefix).events,
      "+",
      "-",
      "COUNT",
      "1",
    ]) as [string, string[]][];
    return r[0]?.[0] ?? "0-0";
  }

  read(
    positions: ReadonlyMap<string, string>,
    options: { blockMs: number; count: number },
  ): Promise<FlowChange[]> {
    return readStreams(this.#redis, positions, options, (vip) => ({
      tags: this.#tags(vip),
      events: (tag) => vipKeys(tag, this.#prefix).events,
    }));
  }

  /** Closes the connections. */
  close(): Promise<void> {
    return this.#redis.close();
  }
}

/** Creates a {@link RedisFlowStore}; it connects in the background (see `ready`). */
export function connectRedisStore(options: FlowStoreOptions): RedisFlowStore {
  return new RedisFlowStore(options);
}
