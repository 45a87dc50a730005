/**
 * {@linkcode ModelStore} over Redis (keys and scripts in `schema.ts`), on the shared connection
 * of `lib/redis_connection.ts`: authentication (`redis://user:password@…` or the
 * `username`/`password` options), TLS (`rediss://` or `tls: {}`), reconnection with backoff;
 * while Redis is down calls throw `StoreUnavailableError`.
 *
 * @module
 */

import { RedisConnection, type RedisStoreOptions } from "../../lib/redis_connection.ts";
import {
  fromBase64,
  type ModelKeys,
  modelKeys,
  type ModelPolicy,
  POLICY_SCRIPT,
  SETTINGS_SCRIPT,
  SNAPSHOT_SCRIPT,
  STREAM_MAXLEN,
  toBase64,
  WRITE_SCRIPT,
} from "./schema.ts";
import {
  type ModelChange,
  ModelEpochError,
  type ModelSnapshot,
  type ModelStore,
  type ModelWrite,
} from "./store.ts";

export type { RedisStoreOptions } from "../../lib/redis_connection.ts";

/** The model in Redis. Connects in the background; see {@linkcode connectModelStore}. */
export class RedisModelStore implements ModelStore {
  readonly #redis: RedisConnection;
  readonly #keys: ModelKeys;
  readonly #maxlen: number;

  constructor(options: RedisStoreOptions & { streamMaxlen?: number }) {
    this.#redis = new RedisConnection({ logComponent: "model-store", ...options });
    this.#keys = modelKeys(options.prefix);
    this.#maxlen = options.streamMaxlen ?? STREAM_MAXLEN;
  }

  get #keyList(): string[] {
    const k = this.#keys;
    return [k.services, k.rev, k.changes, k.epoch, k.policy, k.settings];
  }

  async snapshot(): Promise<ModelSnapshot> {
    const [epoch, rev, lastId, flat, policySha, settings] = await this.#redis.eval(
      SNAPSHOT_SCRIPT,
      this.#keyList,
      [],
    ) as [string, string, string, string[], string, string];
    const entries = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) entries.set(flat[i]!, flat[i + 1]!);
    return {
      epoch,
      rev: Number(rev),
      lastId,
      entries,
      policySha: policySha ?? "",
      settings: settings ?? "",
    };
  }

  async epoch(): Promise<string> {
    return String(await this.#redis.command(["GET", this.#keys.epoch]) ?? "");
  }

  async initEpoch(token: string): Promise<string> {
    await this.#redis.command(["SET", this.#keys.epoch, token, "NX"]);
    return await this.epoch();
  }

  async write(epoch: string, w: ModelWrite): Promise<number> {
    try {
      return Number(
        await this.#redis.eval(WRITE_SCRIPT, this.#keyList, [
          epoch,
          w.op,
          w.service,
          w.op === "upsert" ? w.entry : "",
          String(this.#maxlen),
        ]),
      );
    } catch (err) {
      if (err instanceof Error && /EPOCH/.test(err.message)) {
        throw new ModelEpochError(
          `Cannot write service "${w.service}" to the model: ${err.message}, not "${epoch}"`,
          { cause: err },
        );
      }
      throw err;
    }
  }

  async writePolicy(epoch: string, policy: ModelPolicy): Promise<number> {
    try {
      return Number(
        await this.#redis.eval(POLICY_SCRIPT, this.#keyList, [
          epoch,
          policy.sha256,
          toBase64(policy.wasm),
          String(this.#maxlen),
        ]),
      );
    } catch (err) {
      if (err instanceof Error && /EPOCH/.test(err.message)) {
        throw new ModelEpochError(
          `Cannot write policy module ${
            policy.sha256.slice(0, 16)
          } to the model: ${err.message}, not "${epoch}"`,
          { cause: err },
        );
      }
      throw err;
    }
  }

  async writeSettings(epoch: string, json: string): Promise<number> {
    try {
      return Number(
        await this.#redis.eval(SETTINGS_SCRIPT, this.#keyList, [epoch, json, String(this.#maxlen)]),
      );
    } catch (err) {
      if (err instanceof Error && /EPOCH/.test(err.message)) {
        throw new ModelEpochError(
          `Cannot write settings ${json} to the model: ${err.message}, not "${epoch}"`,
          { cause: err },
        );
      }
      throw err;
    }
  }

  async readPolicy(): Promise<ModelPolicy | null> {
    const [sha256, wasm] = await this.#redis.command(
      ["HMGET", this.#keys.policy, "sha256", "wasm"],
    ) as [string | null, string | null];
    if (!sha256 || !wasm) return null;
    return { sha256, wasm: fromBase64(wasm) };
  }

  async read(after: string, options: { count: number; blockMs: number }): Promise<ModelChange[]> {
    const args = ["XREAD", "COUNT", String(options.count)];
    if (options.blockMs > 0) args.push("BLOCK", String(options.blockMs));
    args.push("STREAMS", this.#keys.changes, after);
    const send = options.blockMs > 0 ? this.#redis.blocking(args) : this.#redis.command(args);
    const reply = await send as [string, [string, string[]][]][] | null;
    const out: ModelChange[] = [];
    for (const [, entries] of reply ?? []) {
      for (const [id, kv] of entries) {
        const f: Record<string, string> = {};
        for (let i = 0; i + 1 < kv.length; i += 2) f[kv[i]!] = kv[i + 1]!;
        out.push({
          id,
          rev: Number(f.rev),
          epoch: f.epoch ?? "",
          op: f.op === "delete" || f.op === "policy" || f.op === "settings" ? f.op : "upsert",
          service: f.service ?? "",
          ...(f.entry !== undefined ? { entry: f.entry } : {}),
          ...(f.sha256 !== undefined ? { sha256: f.sha256 } : {}),
          ...(f.settings !== undefined ? { settings: f.settings } : {}),
        });
      }
    }
    return out;
  }

  close(): Promise<void> {
    return this.#redis.close();
  }
}

/** A {@linkcode RedisModelStore} (connecting in the background). */
export function connectModelStore(
  options: RedisStoreOptions & { streamMaxlen?: number },
): RedisModelStore {
  return new RedisModelStore(options);
}
