/**
 * The Redis lease of a floating address, with an epoch as fencing token. One lease key per
 * address holds `HOLDER EPOCH` with a millisecond TTL (PX); the epoch is an INCR of a per-address
 * counter, so every acquisition gets a larger one than all before it. Acquire succeeds only on a
 * free key (expired or released); renew and release only for the exact holder and epoch, so a
 * stale holder (its lease expired and someone else took it) can never extend or drop the new
 * owner's lease. Every step is one Lua script: atomic on the server.
 *
 * A Redis that lost its data (restarted without persistence) has neither leases nor counters:
 * a holder may still be inside its fencing window while the key looks free. The first acquire
 * after that seeds the counter from the server's clock in milliseconds (epochs keep growing
 * across the loss) and reports `fresh`; the ownership then waits one ttl before using the
 * address, by which time any earlier holder has forfeited.
 *
 * Keys (one hash slot per EgressNAT, `{…}` is the cluster hash tag):
 * `hf:egress:{NS/NAME}:lease:ADDR` (the lease), `…:epoch:ADDR` (the counter), and
 * `…:want:ADDR`: the name of a pod whose acquire failed because someone else holds the lease
 * (ttl 2 × lease ttl). The holder's renew returns it: the ownership (`ownership.ts`) hands an
 * address over when the pod the assignment prefers asks for it, and only then, so a pod that
 * cannot reach Redis is never handed anything.
 *
 * @module
 */

import type { RedisConnection } from "../../lib/redis_connection.ts";

/** Who holds a lease. */
export interface LeaseState {
  /** Holder id (pod name and boot id, see `ownership.ts`). */
  readonly holder: string;
  /** Fencing epoch of this acquisition. */
  readonly epoch: number;
  /** Milliseconds until the lease expires. */
  readonly ttlMs: number;
}

/** Result of an acquire. */
export type AcquireResult =
  | {
    readonly acquired: true;
    readonly epoch: number;
    /** The epoch counter did not exist (first use, or Redis lost its data): wait a ttl. */
    readonly fresh?: boolean;
  }
  | { readonly acquired: false; readonly holder: string; readonly epoch: number };

/** Result of a renew: whether it was renewed, and who asked for the address meanwhile. */
export interface RenewResult {
  /** The lease was extended (holder and epoch matched). */
  readonly renewed: boolean;
  /** Pod name in the want key, if another pod asked for the address. */
  readonly wantedBy?: string;
}

/** The leases of one EgressNAT's addresses; Redis in production, a map in unit tests. */
export interface LeaseStore {
  /** Takes the free lease of `addr` for `ttlMs` with a new epoch; else says who holds it (and
   * records `wanter` as asking for it). A holder that already holds it renews it. */
  acquire(addr: string, holder: string, ttlMs: number, wanter?: string): Promise<AcquireResult>;
  /** Extends the lease if `holder` holds it with `epoch`. */
  renew(addr: string, holder: string, epoch: number, ttlMs: number): Promise<RenewResult>;
  /** Drops the lease if `holder` holds it with `epoch`; true when dropped. */
  release(addr: string, holder: string, epoch: number): Promise<boolean>;
  /** The lease now, or null when free. */
  read(addr: string): Promise<LeaseState | null>;
}

/**
 * Version of the leases in Redis (keys, the `HOLDER EPOCH` value, the scripts; docs/contracts.md
 * "Format versions"). v1 is the first. Every NAT pod of one EgressNAT runs the same scripts on the
 * same keys, so a change here must stay readable by the previous version's scripts.
 */
export const LEASE_VERSION = 1;

// KEYS: lease, epoch counter, want. ARGV: holder, ttl ms, wanter.
const ACQUIRE = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local sp = string.find(cur, ' ', 1, true)
  local holder = string.sub(cur, 1, sp - 1)
  local epoch = string.sub(cur, sp + 1)
  if holder == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, epoch}
  end
  if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3], 'PX', 2 * tonumber(ARGV[2])) end
  return {0, epoch, holder}
end
local fresh = 0
if redis.call('EXISTS', KEYS[2]) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[2], t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)))
  fresh = 1
end
local e = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. e, 'PX', ARGV[2])
redis.call('DEL', KEYS[3])
return {1, tostring(e), fresh}
`;

// KEYS: lease, want. ARGV: holder, epoch, ttl ms.
const RENEW = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] .. ' ' .. ARGV[2] then return {0, ''} end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, redis.call('GET', KEYS[2]) or ''}
`;

// KEYS: lease. ARGV: holder, epoch.
const RELEASE = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] .. ' ' .. ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`;

// KEYS: lease.
const READ = `
local cur = redis.call('GET', KEYS[1])
if not cur then return {} end
return {cur, redis.call('PTTL', KEYS[1])}
`;

/** The lease scripts (tests/hygiene's golden holds them: they are the format's encoder). */
export const LEASE_SCRIPTS: Readonly<Record<string, string>> = { ACQUIRE, RENEW, RELEASE, READ };

function checkTtl(ttlMs: number): string {
  if (!Number.isInteger(ttlMs) || ttlMs < 1) {
    throw new RangeError(`Cannot lease an address for "${ttlMs}" ms: must be a positive integer`);
  }
  return String(ttlMs);
}

function checkHolder(holder: string): string {
  if (holder === "" || /\s/.test(holder)) {
    throw new RangeError(`Cannot use lease holder "${holder}": must be non-empty, no spaces`);
  }
  return holder;
}

/** {@link LeaseStore} on Redis through the shared {@link RedisConnection}. */
export class RedisLeaseStore implements LeaseStore {
  readonly #redis: RedisConnection;
  readonly #base: string;

  /** Leases of EgressNAT `egressName` (`namespace/name`); keys under `prefix` (default `hf`). */
  constructor(redis: RedisConnection, egressName: string, options: { prefix?: string } = {}) {
    if (egressName === "" || /[{}\s]/.test(egressName)) {
      throw new RangeError(
        `Cannot keep leases for EgressNAT "${egressName}": the name must be non-empty, without braces or spaces`,
      );
    }
    this.#redis = redis;
    this.#base = `${options.prefix ?? "hf"}:egress:{${egressName}}`;
  }

  /** The Redis keys of `addr`'s lease, epoch counter and want marker. */
  keys(addr: string): { lease: string; epoch: string; want: string } {
    return {
      lease: `${this.#base}:lease:${addr}`,
      epoch: `${this.#base}:epoch:${addr}`,
      want: `${this.#base}:want:${addr}`,
    };
  }

  async acquire(
    addr: string,
    holder: string,
    ttlMs: number,
    wanter = "",
  ): Promise<AcquireResult> {
    const k = this.keys(addr);
    const r = await this.#redis.eval(ACQUIRE, [k.lease, k.epoch, k.want], [
      checkHolder(holder),
      checkTtl(ttlMs),
      wanter,
    ]) as [number, string, (string | number)?];
    if (r[0] === 1) {
      return r[2] === 1 ? { acquired: true, epoch: Number(r[1]), fresh: true } : {
        acquired: true,
        epoch: Number(r[1]),
      };
    }
    return { acquired: false, epoch: Number(r[1]), holder: String(r[2]) };
  }

  async renew(addr: string, holder: string, epoch: number, ttlMs: number): Promise<RenewResult> {
    const k = this.keys(addr);
    const r = await this.#redis.eval(RENEW, [k.lease, k.want], [
      checkHolder(holder),
      String(epoch),
      checkTtl(ttlMs),
    ]) as [number, string];
    if (r[0] !== 1) return { renewed: false };
    return r[1] ? { renewed: true, wantedBy: r[1] } : { renewed: true };
  }

  async release(addr: string, holder: string, epoch: number): Promise<boolean> {
    const r = await this.#redis.eval(RELEASE, [this.keys(addr).lease], [
      checkHolder(holder),
      String(epoch),
    ]);
    return r === 1;
  }

  async read(addr: string): Promise<LeaseState | null> {
    const r = await this.#redis.eval(READ, [this.keys(addr).lease], []) as [string, number] | [];
    if (r.length === 0) return null;
    const [value, pttl] = r as [string, number];
    const sp = value.indexOf(" ");
    return { holder: value.slice(0, sp), epoch: Number(value.slice(sp + 1)), ttlMs: Number(pttl) };
  }
}

/** In-memory {@link LeaseStore} with the same rules, on a clock you pass (unit tests, demos). */
export class MemoryLeaseStore implements LeaseStore {
  readonly #leases = new Map<string, { holder: string; epoch: number; expiresAt: number }>();
  readonly #epochs = new Map<string, number>();
  readonly #wants = new Map<string, { pod: string; expiresAt: number }>();
  /** When set, every call rejects with it (a Redis outage). */
  failWith: Error | null = null;
  /** Report `fresh` on an address's first acquire, as Redis does (default false). */
  freshOnFirstUse = false;

  constructor(readonly now: () => number = () => performance.now()) {}

  #live(addr: string) {
    const l = this.#leases.get(addr);
    if (l && l.expiresAt <= this.now()) {
      this.#leases.delete(addr);
      return undefined;
    }
    return l;
  }

  #check(): void {
    if (this.failWith) throw this.failWith;
  }

  acquire(addr: string, holder: string, ttlMs: number, wanter = ""): Promise<AcquireResult> {
    return Promise.resolve().then(() => {
      this.#check();
      checkTtl(ttlMs);
      const l = this.#live(addr);
      if (l && l.holder === holder) {
        l.expiresAt = this.now() + ttlMs;
        return { acquired: true as const, epoch: l.epoch };
      }
      if (l) {
        if (wanter) this.#wants.set(addr, { pod: wanter, expiresAt: this.now() + 2 * ttlMs });
        return { acquired: false as const, epoch: l.epoch, holder: l.holder };
      }
      const last = this.#epochs.get(addr);
      const epoch = (last ?? 0) + 1;
      this.#epochs.set(addr, epoch);
      this.#leases.set(addr, { holder, epoch, expiresAt: this.now() + ttlMs });
      this.#wants.delete(addr);
      return last === undefined && this.freshOnFirstUse
        ? { acquired: true as const, epoch, fresh: true }
        : { acquired: true as const, epoch };
    });
  }

  renew(addr: string, holder: string, epoch: number, ttlMs: number): Promise<RenewResult> {
    return Promise.resolve().then(() => {
      this.#check();
      const l = this.#live(addr);
      if (!l || l.holder !== holder || l.epoch !== epoch) return { renewed: false };
      l.expiresAt = this.now() + ttlMs;
      const w = this.#wants.get(addr);
      return w && w.expiresAt > this.now() ? { renewed: true, wantedBy: w.pod } : { renewed: true };
    });
  }

  release(addr: string, holder: string, epoch: number): Promise<boolean> {
    return Promise.resolve().then(() => {
      this.#check();
      const l = this.#live(addr);
      if (!l || l.holder !== holder || l.epoch !== epoch) return false;
      this.#leases.delete(addr);
      return true;
    });
  }

  read(addr: string): Promise<LeaseState | null> {
    return Promise.resolve().then(() => {
      this.#check();
      const l = this.#live(addr);
      return l ? { holder: l.holder, epoch: l.epoch, ttlMs: l.expiresAt - this.now() } : null;
    });
  }
}
