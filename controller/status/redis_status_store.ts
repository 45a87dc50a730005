/**
 * {@linkcode StatusStore} over Redis, read-only, on the shared connection of
 * `lib/redis_connection.ts`. What it reads (every layout is its writer's, see the links):
 *
 * - the LB model: `hf:model:{m}:*` in one script call (`controller/model/schema.ts`);
 * - flows per LB IP: keys `hf:{IP}:flows` (with flow buckets `hf:{IP#b}:flows`, summed per LB IP)
 *   found by SCAN — on every master of a Redis Cluster — HLEN each; a hash of at most
 *   {@linkcode WALK_LIMIT} flows is walked (HSCAN) to count flows per backend — the value starts
 *   with the backend's hex, 8 digits for IPv4 and 32 for IPv6 (docs/contracts.md "Flow map
 *   entry", `node/lb/flows/schema.ts`);
 * - egress: every EgressNAT's config `hf:egress:{NS/NAME}:config` (its addresses) and the leases
 *   `…:lease:ADDR` (`HOLDER EPOCH`, `controller/egress/lease.ts`), so a free address shows too;
 * - the last {@linkcode REPORTS_READ} entries of the LB nodes' reports stream
 *   (`controller/model/reports.ts`), for health verdicts of nodes whose `/metrics` is not given.
 *
 * Every SCAN loop is bounded ({@linkcode SCAN_ROUNDS} rounds).
 *
 * @module
 */

import { RedisConnection, type RedisStoreOptions } from "../../lib/redis_connection.ts";
import { formatIpv4 } from "../../lib/ipv4.ts";
import { formatIpv6 } from "../../lib/ipv6.ts";
import { modelKeys, SNAPSHOT_SCRIPT } from "../model/schema.ts";
import { decodeReport, reportsKey } from "../model/reports.ts";
import type {
  EgressLeaseRow,
  LbIpFlows,
  StatusStore,
  StoredHealthReport,
  StoredModel,
  StoredState,
} from "./model.ts";

/** Largest flows hash walked to count flows per backend (bigger ones: the total only). */
export const WALK_LIMIT = 50_000;
/** Reports read from the end of the stream. */
export const REPORTS_READ = 500;
/** Most SCAN rounds per pattern (COUNT 1000 each). */
export const SCAN_ROUNDS = 1_000;

type Conn = Pick<RedisConnection, "command" | "eval" | "close" | "scan">;

/** The backend IP of a stored flow value (`<hex8|hex32>:<ms>`), or undefined. */
export function flowValueBackend(value: string): string | undefined {
  const colon = value.indexOf(":");
  const hex = value.slice(0, colon);
  if (!/^[0-9a-f]+$/i.test(hex)) return undefined;
  if (colon === 8) return formatIpv4(parseInt(hex, 16) >>> 0);
  if (colon !== 32) return undefined;
  const bytes = new Uint8Array(16);
  for (let i = 0; i < 16; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return formatIpv6(bytes);
}

/** The stored state in Redis; see the module doc. */
export class RedisStatusStore implements StatusStore {
  readonly #options: RedisStoreOptions;
  #conn: Conn | undefined;
  readonly #prefix: string;

  /** Connects at the first read (a controller nobody asks for its dashboard opens none). */
  constructor(options: RedisStoreOptions, connection?: Conn) {
    this.#options = options;
    this.#conn = connection;
    this.#prefix = options.prefix ?? "hf";
  }

  get #redis(): Conn {
    return this.#conn ??= new RedisConnection({
      logComponent: "status",
      ...this.#options,
      connectTimeoutMs: 1_000,
    });
  }

  async read(): Promise<StoredState> {
    const [model, flows, egress, reports] = await Promise.all([
      this.#model(),
      this.#flows(),
      this.#egress(),
      this.#reports(),
    ]);
    return { model, flows, egress, reports };
  }

  async close(): Promise<void> {
    await this.#conn?.close();
  }

  /** Every key matching `pattern`, on every master of a Redis Cluster. */
  #scan(pattern: string): Promise<string[]> {
    return this.#redis.scan(pattern, SCAN_ROUNDS);
  }

  async #model(): Promise<StoredModel> {
    const k = modelKeys(this.#prefix);
    const keys = [k.services, k.rev, k.changes, k.epoch, k.policy, k.settings];
    const [epoch, rev, , flat, policySha] = await this.#redis.eval(SNAPSHOT_SCRIPT, keys, []) as [
      string,
      string,
      string,
      string[],
      string,
    ];
    const entries = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) entries.set(flat[i]!, flat[i + 1]!);
    return { epoch: epoch ?? "", rev: Number(rev), entries, policySha: policySha ?? "" };
  }

  async #flows(): Promise<LbIpFlows[]> {
    const head = `${this.#prefix}:{`;
    const keys = await this.#scan(`${this.#prefix}:{*}:flows`);
    const perKey = await Promise.all(keys.map(async (key): Promise<LbIpFlows> => {
      // `{IP}` or, with flow buckets (node/lb/flows/buckets.ts), `{IP#b}`: one row per LB IP.
      const lbIp = key.slice(head.length, key.length - "}:flows".length).split("#")[0]!;
      const total = Number(await this.#redis.command(["HLEN", key]));
      const byBackend: Record<string, number> = {};
      if (total > WALK_LIMIT) return { lbIp, total, byBackend };
      let cursor = "0";
      for (let round = 0; round < SCAN_ROUNDS; round++) {
        const [next, flat] = await this.#redis.command(
          ["HSCAN", key, cursor, "COUNT", "1000"],
        ) as [string, string[]];
        for (let i = 1; i < flat.length; i += 2) {
          const ip = flowValueBackend(flat[i]!);
          if (ip !== undefined) byBackend[ip] = (byBackend[ip] ?? 0) + 1;
        }
        cursor = String(next);
        if (cursor === "0") break;
      }
      return { lbIp, total, byBackend };
    }));
    const byIp = new Map<string, LbIpFlows>();
    for (const f of perKey) {
      const sum = byIp.get(f.lbIp);
      if (!sum) {
        byIp.set(f.lbIp, { ...f, byBackend: { ...f.byBackend } });
        continue;
      }
      const byBackend = { ...sum.byBackend };
      for (const [ip, n] of Object.entries(f.byBackend)) byBackend[ip] = (byBackend[ip] ?? 0) + n;
      byIp.set(f.lbIp, { lbIp: f.lbIp, total: sum.total + f.total, byBackend });
    }
    return [...byIp.values()];
  }

  async #egress(): Promise<EgressLeaseRow[]> {
    const base = `${this.#prefix}:egress:{`;
    const wanted = new Map<string, { egress: string; address: string }>();
    const nameOf = (key: string) => key.slice(base.length, key.indexOf("}:", base.length));
    for (const key of await this.#scan(`${base}*}:config`)) {
      const json = await this.#redis.command(["HGET", key, "json"]);
      try {
        const doc = JSON.parse(String(json)) as { addresses?: { address?: unknown }[] };
        for (const a of doc.addresses ?? []) {
          if (typeof a.address !== "string") continue;
          const egress = nameOf(key);
          wanted.set(`${egress}|${a.address}`, { egress, address: a.address });
        }
      } catch {
        // a config the controller could not have written: its NAT pods log it; show the leases
      }
    }
    for (const key of await this.#scan(`${base}*}:lease:*`)) {
      const egress = nameOf(key);
      const address = key.slice(key.lastIndexOf(":lease:") + ":lease:".length);
      wanted.set(`${egress}|${address}`, { egress, address });
    }
    return await Promise.all([...wanted.values()].map(async ({ egress, address }) => {
      const key = `${base}${egress}}:lease:${address}`;
      const [value, pttl] = await Promise.all([
        this.#redis.command(["GET", key]),
        this.#redis.command(["PTTL", key]),
      ]);
      const text = value === null || value === undefined ? "" : String(value);
      const sp = text.indexOf(" ");
      if (sp < 0) return { egress, address, holder: null, epoch: null, ttlMs: null };
      return {
        egress,
        address,
        holder: text.slice(0, sp),
        epoch: Number(text.slice(sp + 1)),
        ttlMs: Number(pttl),
      };
    }));
  }

  async #reports(): Promise<StoredHealthReport[]> {
    const last = await this.#redis.command(
      ["XREVRANGE", reportsKey(this.#prefix), "+", "-", "COUNT", String(REPORTS_READ)],
    ) as [string, string[]][] | null;
    const out: StoredHealthReport[] = [];
    for (const [, flat] of (last ?? []).reverse()) {
      const r = decodeReport(flat);
      if (r?.kind === "health") {
        out.push({ node: r.node, service: r.service, backend: r.backend, state: r.state });
      }
    }
    return out;
  }
}
