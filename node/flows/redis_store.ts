/**
 * {@link FlowStore} over Redis (schema in `schema.ts`); connections in `lib/redis_connection.ts`.
 * Authentication: `redis://user:password@host:port` or the `username`/`password` options (Redis
 * ACL users or `requirepass`). TLS: a `rediss://` URL or `tls: {}`, with an optional CA. A Redis
 * Cluster: `redis+cluster://host:port,…`; every key of one LB IP shares its hash tag (one slot),
 * so scripts work unchanged, and the stream reads are split per LB IP (see `read`).
 *
 * @module
 */

import {
  decodeBackend,
  decodeStreamFlows,
  EXPIRE_SCRIPT,
  FLOW_RECORDS_VERSION,
  KEY_TTL_FACTOR,
  LEARN_SCRIPT,
  PURGE_SCRIPT,
  STREAM_MAXLEN,
  vipKeys,
} from "./schema.ts";
import type { FlowChange, FlowStore, PurgeScope, StoredFlow } from "./store.ts";
import { backendHex } from "./field.ts";
import type { FlowBackend } from "../bpf/flow.ts";
import { RedisConnection, type RedisStoreOptions } from "../../lib/redis_connection.ts";
import { log } from "../../lib/log.ts";

export { redact, type RedisStoreOptions } from "../../lib/redis_connection.ts";

/**
 * To a Redis Cluster, an agent following several LB IPs polls their streams this often (ms) when
 * they had nothing new (one XREAD cannot span slots; see {@link RedisFlowStore.read}).
 */
export const CLUSTER_POLL_MS = 20;

function hex16(n: number): string {
  return (n & 0xffff).toString(16).padStart(4, "0");
}

/** Stream items this version could not read (a later version's forms), for the rate of warnings. */
let unreadable = 0;

function parseStreamFlows(vip: string, id: string, op: string, raw: string): StoredFlow[] {
  // An op this version does not know (a later version's) carries nothing it can apply.
  const known = op === "add" || op === "del";
  const { flows, skipped } = known ? decodeStreamFlows(op, raw) : { flows: [], skipped: 1 };
  if (skipped > 0 && unreadable++ % 1000 === 0) {
    log.warn("stream entry items skipped: not a form this version reads", {
      vip,
      id,
      op,
      skipped,
      version: FLOW_RECORDS_VERSION,
      total: unreadable,
    });
  }
  return flows;
}

/** The Redis-backed flow store. Create with {@link connectRedisStore}. */
export class RedisFlowStore implements FlowStore {
  readonly #redis: RedisConnection;
  readonly #prefix: string;

  constructor(readonly options: RedisStoreOptions) {
    this.#prefix = options.prefix ?? "hf";
    this.#redis = new RedisConnection(options);
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
    const tokens = await Promise.all(vips.map(async (vip) => {
      const key = vipKeys(vip, this.#prefix).instance;
      await this.#redis.command(["SET", key, crypto.randomUUID(), "NX"]);
      return String(await this.#redis.command(["GET", key]));
    }));
    return tokens.join(",");
  }

  async learn(
    vip: string,
    flows: readonly StoredFlow[],
    options: { node: string; nowMs: number; idleTimeoutMs: number },
  ): Promise<void> {
    if (flows.length === 0) return;
    const k = vipKeys(vip, this.#prefix);
    const ttl = String(Math.max(1000, options.idleTimeoutMs * KEY_TTL_FACTOR));
    const args = [options.node, ttl, String(STREAM_MAXLEN)];
    const suffix = `:${Math.round(options.nowMs)}`;
    // Few distinct backends per batch: build each value string once.
    const values = new Map<FlowBackend, string>();
    for (const f of flows) {
      let value = values.get(f.backend);
      if (value === undefined) values.set(f.backend, value = `${backendHex(f.backend)}${suffix}`);
      args.push(f.field, value);
    }
    await this.#redis.eval(LEARN_SCRIPT, [k.flows, k.events], args);
  }

  async touch(
    vip: string,
    seen: readonly { field: string; lastSeenMs: number }[],
    options: { idleTimeoutMs: number },
  ): Promise<void> {
    if (seen.length === 0) return;
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

  async read(
    positions: ReadonlyMap<string, string>,
    options: { blockMs: number; count: number },
  ): Promise<FlowChange[]> {
    if (positions.size === 0) {
      await new Promise((r) => setTimeout(r, options.blockMs));
      return [];
    }
    const byKey = new Map<string, string>();
    const keys: string[] = [];
    const ids: string[] = [];
    for (const [vip, id] of positions) {
      const k = vipKeys(vip, this.#prefix).events;
      byKey.set(k, vip);
      keys.push(k);
      ids.push(id);
    }
    type Reply = [string, [string, string[]][]][] | null;
    let replies: Reply[];
    if (this.#redis.cluster && keys.length > 1) {
      // A cluster refuses one XREAD over several slots, and a blocking read holds its node's
      // connection: one non-blocking XREAD per LB IP (node-redis pipelines those going to the
      // same master), then a short pause when none had news.
      replies = await Promise.all(
        keys.map((k, i) =>
          this.#redis.command(["XREAD", "COUNT", String(options.count), "STREAMS", k, ids[i]!])
        ),
      ) as Reply[];
      if (replies.every((r) => r === null || r.length === 0)) {
        await new Promise((r) => setTimeout(r, Math.min(options.blockMs, CLUSTER_POLL_MS)));
      }
    } else {
      replies = [
        await this.#redis.blocking([
          "XREAD",
          "COUNT",
          String(options.count),
          "BLOCK",
          String(options.blockMs),
          "STREAMS",
          ...keys,
          ...ids,
        ]) as Reply,
      ];
    }
    const out: FlowChange[] = [];
    for (const [key, entries] of replies.flatMap((r) => r ?? [])) {
      const vip = byKey.get(key)!;
      for (const [id, kv] of entries) {
        const f: Record<string, string> = {};
        for (let i = 0; i + 1 < kv.length; i += 2) f[kv[i]!] = kv[i + 1]!;
        const op = f.op === "del" ? "del" : "add";
        const raw = f.flows ?? "", rawOp = f.op ?? "";
        let flows: StoredFlow[] | null = null;
        out.push({
          vip,
          id,
          node: f.node ?? "",
          op,
          ...(f.reason ? { reason: f.reason } : {}),
          // Parsed on first use: an agent skips its own additions without parsing them.
          get flows(): StoredFlow[] {
            return flows ??= parseStreamFlows(vip, id, rawOp, raw);
          },
        });
      }
    }
    return out;
  }

  /** Closes the connections. */
  close(): Promise<void> {
    return this.#redis.close();
  }
}

/** Creates a {@link RedisFlowStore}; it connects in the background (see `ready`). */
export function connectRedisStore(options: RedisStoreOptions): RedisFlowStore {
  return new RedisFlowStore(options);
}
