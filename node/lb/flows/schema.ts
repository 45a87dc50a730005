/**
 * The Redis schema of shared flow state. Everything of one LB IP shares the hash tag `{<LB IP>}`,
 * so it lives in one Redis Cluster slot and a transaction or script may touch all of it at once.
 *
 * | key                        | type       | content                                             |
 * |----------------------------|------------|-----------------------------------------------------|
 * | `hf:{10.0.100.1}:flows`    | hash       | flow field → `<backend hex>:<learned ms>`           |
 * | `hf:{10.0.100.1}:seen`     | sorted set | flow field, score = last activity (Unix ms)         |
 * | `hf:{10.0.100.1}:events`   | stream     | `node`, `op`, `reason`, `flows` (batched)           |
 * | `hf:{10.0.100.1}:instance` | string     | random token; missing after Redis lost its data     |
 * | `hf:{10.0.100.1}:sweeper`  | string     | node holding this round of expiry (PX lock)         |
 *
 * An IPv6 LB IP's keys name it in RFC 5952 text: `hf:{2001:db8:100::1}:flows`.
 *
 * A flow field is {@link flowField}: hex digits of saddr, sport (4), dport (4), proto (2) —
 * 18 for an IPv4 LB IP (saddr 8), 42 for an IPv6 one (saddr 32: its 16 bytes). Sport is 0 in
 * client-ip mode, which makes one field per client address and port. Either form ends in the
 * frontend's dport and proto (what a purge selects on).
 *
 * The backend is hex of its address in network order: 8 digits for an IPv4 backend (whatever
 * the LB IP's family: an IPv6 frontend may have IPv4 backends), 32 for an IPv6 one. The IPv4 form
 * is the one every earlier version wrote. Values written before the epoch was dropped
 * (`<backend hex8>:<epoch>:<learned ms>`) are still read: the backend is the hex before the first
 * colon and the learn time follows the last colon.
 *
 * Learning is one script call per batch (LEARN_SCRIPT): variadic HSET + one stream entry. Hash
 * and stream change in the same order, and every node applies every addition whose backend
 * differs from its own entry (its own additions are no-ops), so all nodes converge on the stored
 * value even when two nodes learn the same flow at once (last writer wins).
 *
 * Exceptions-only sharing (`--flow-sharing exceptions`): a flow that is no exception is stored
 * with STORE_SCRIPT (the same HSET, no stream entry); its value carries the version of the table
 * that placed it in the epoch slot. Exceptions go through LEARN_SCRIPT as above.
 *
 * Activity: a flow's last activity is its learn time, raised by the agents' periodic activity
 * report into `seen`. Expiry: one node per round (the `sweeper` lock) walks the hash and removes
 * flows whose last activity is older than the idle timeout, announcing them as `del`. Redis 7.0
 * has no per-field TTL; every write also sets a whole-key TTL of {@link KEY_TTL_FACTOR} idle
 * timeouts so an abandoned LB IP disappears.
 *
 * Stream entries: `add` → `flows` = `field=value,field=value…`; `del` → `flows` = `field,field…`
 * and `reason` = `idle` or `purge`. The stream is capped (approximately) at
 * {@link STREAM_MAXLEN} entries (each a batch); a node that fell further behind, or saw Redis
 * lose its data, restores from the hash instead.
 *
 * @module
 */

import type { FlowBackend } from "../../bpf/flow.ts";
import type { StoredFlow } from "./store.ts";
import { backendHex, FIELD4_LENGTH, FIELD6_LENGTH, hexAt, ipv6FromHex } from "./field.ts";

/** Keys of one LB IP. */
export interface VipKeys {
  readonly instance: string;
  readonly sweeper: string;
  readonly flows: string;
  readonly seen: string;
  readonly events: string;
}

/**
 * Redis key names for LB IP `vip` (dotted IPv4 or RFC 5952 IPv6 text), with an optional
 * deployment prefix.
 */
export function vipKeys(vip: string, prefix = "hf"): VipKeys {
  const tag = `${prefix}:{${vip}}`;
  return {
    instance: `${tag}:instance`,
    sweeper: `${tag}:sweeper`,
    flows: `${tag}:flows`,
    seen: `${tag}:seen`,
    events: `${tag}:events`,
  };
}

/**
 * Version of the Redis flow records (keys, fields, values, stream entries and the scripts that
 * write them; docs/contracts.md "Format versions"). v1: values `<hex8>:<epoch>:<learned ms>`;
 * v2: `<backend hex8 or hex32>:<learned ms>` and the IPv6 forms. Readers take v1 and v2 values
 * ({@link decodeFlowValue}, the scripts match on the backend prefix and the last colon); a value
 * of neither form is skipped and logged. Bump it with tests/hygiene's golden and CHANGELOG.md.
 */
export const FLOW_RECORDS_VERSION = 2;

/** Approximate cap of each LB IP's stream, in entries (each entry is a batch of flows). */
export const STREAM_MAXLEN = 100_000;

/** Whole-key TTL in idle timeouts: keys of an LB IP nobody writes to vanish after this long. */
export const KEY_TTL_FACTOR = 4;

/**
 * The stored value of a flow: backend (u32 IPv4 or IPv6 text) and learn time (Unix ms). With a
 * table `version` (exceptions-only sharing, node/lb/flows/exceptions.ts: the version of the Maglev
 * table that placed it) it takes the v1 form's spare epoch slot, `<backend hex>:<version>:<learned
 * ms>`, which every reader of v1 and v2 values reads (the epoch is skipped).
 */
export function encodeFlowValue(backend: FlowBackend, learnedMs: number, version = 0): string {
  const v = version > 0 ? `:${version >>> 0}` : "";
  return `${backendHex(backend)}${v}:${Math.round(learnedMs)}`;
}

/** The table version a stored value carries in its epoch slot (0 when none). */
export function flowValueVersion(text: string): number {
  const first = text.indexOf(":"), last = text.lastIndexOf(":");
  if (first < 0 || first === last) return 0;
  const v = Number(text.slice(first + 1, last));
  return Number.isInteger(v) && v >= 0 ? v : 0;
}

/**
 * The backend of a stored value: 8 hex digits then a colon → IPv4 (u32), 32 → IPv6 (text);
 * undefined when neither.
 */
export function decodeBackend(text: string): FlowBackend | undefined {
  if (text.charCodeAt(8) === 58) {
    const n = hexAt(text, 0, 8);
    return n < 0 ? undefined : n;
  }
  return text.charCodeAt(32) === 58 ? ipv6FromHex(text, 0) : undefined;
}

/**
 * Inverse of {@link encodeFlowValue}. Also reads the older `<hex8>:<epoch>:<learned ms>` form
 * (the epoch, always 0, was dropped): the learn time is what follows the last colon.
 */
export function decodeFlowValue(text: string): { backend: FlowBackend; learnedMs: number } {
  const backend = decodeBackend(text);
  const colon = text.lastIndexOf(":");
  const learnedMs = Number(text.slice(colon + 1));
  if (backend === undefined || colon === text.length - 1 || !Number.isFinite(learnedMs)) {
    throw new TypeError(
      `Cannot decode flow value "${text}": expected "<hex8 or hex32>:<learned ms>"`,
    );
  }
  return { backend, learnedMs };
}

/**
 * The flows of a stream entry's `flows` field: `add` → `field=value,…` (values of v1 or v2),
 * `del` → `field,…` (backend 0). An item this version cannot read — a field not of 18 or 42 hex
 * digits, a value of neither form (a later version's) — is skipped and counted, never thrown: the
 * entry's other flows still apply and the follower moves on.
 */
export function decodeStreamFlows(
  op: "add" | "del",
  raw: string,
): { flows: StoredFlow[]; skipped: number } {
  const flows: StoredFlow[] = [];
  let skipped = 0;
  for (const item of raw.split(",")) {
    if (!item) continue;
    const eq = op === "add" ? item.indexOf("=") : item.length;
    const field = item.slice(0, eq);
    const backend = op === "add" ? decodeBackend(item.slice(eq + 1)) : 0;
    const fieldOk = (field.length === FIELD4_LENGTH || field.length === FIELD6_LENGTH) &&
      hexAt(field, 0, field.length) >= 0;
    if (eq < 0 || backend === undefined || !fieldOk) skipped++;
    else flows.push({ field, backend });
  }
  return { flows, skipped };
}

/**
 * Store and announce learned flows, atomically, in one command (a script needs no MULTI, which
 * the least-privilege ACL user lacks, and is one command to encode instead of six): KEYS flows,
 * events; ARGV node, key TTL ms, maxlen, then field, value pairs. Sets the fields, adds one
 * stream entry `node <node> op add flows <field>=<value>,…` (pairs in order), refreshes both keys'
 * TTL.
 */
export const LEARN_SCRIPT = `
local ann = {}
for i = 4, #ARGV - 1, 2 do ann[#ann + 1] = ARGV[i] .. '=' .. ARGV[i + 1] end
for i = 4, #ARGV, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'node', ARGV[1], 'op', 'add',
  'flows', table.concat(ann, ','))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return #ann
`;

/**
 * Store learned flows without announcing them (exceptions-only sharing: a flow every node's
 * table places alike): KEYS flows; ARGV key TTL ms, then field, value pairs. Sets the fields and
 * refreshes the key's TTL; returns the number of pairs.
 */
export const STORE_SCRIPT = `
for i = 2, #ARGV, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return (#ARGV - 1) / 2
`;

/**
 * One expiry step over the hash: KEYS flows, seen, events; ARGV node, cutoff_ms, cursor, count,
 * maxlen. Removes flows whose learn time and last activity are both at or before the cutoff,
 * announces them, and after the last step drops stale activity entries. Returns
 * `{next_cursor, {field…}}`.
 */
export const EXPIRE_SCRIPT = `
local r = redis.call('HSCAN', KEYS[1], ARGV[3], 'COUNT', ARGV[4])
local items, gone, cutoff = r[2], {}, tonumber(ARGV[2])
for i = 1, #items, 2 do
  local learned = tonumber(string.match(items[i + 1], ':(%d+)$'))
  if learned == nil or learned <= cutoff then
    local s = redis.call('ZSCORE', KEYS[2], items[i])
    if s == false or s == nil or tonumber(s) <= cutoff then gone[#gone + 1] = items[i] end
  end
end
for i = 1, #gone, 500 do
  local chunk = {}
  for j = i, math.min(i + 499, #gone) do chunk[#chunk + 1] = gone[j] end
  redis.call('ZREM', KEYS[2], unpack(chunk))
  redis.call('HDEL', KEYS[1], unpack(chunk))
end
if #gone > 0 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'node', ARGV[1], 'op', 'del',
    'reason', 'idle', 'flows', table.concat(gone, ','))
end
if r[1] == '0' then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2]) end
return {r[1], gone}
`;

/**
 * Remove flows of a backend: KEYS flows, seen, events; ARGV node, backend hex (8 or 32 digits),
 * maxlen, then candidate fields (the caller picked those of one frontend: field ends in its dport
 * and proto). Deletes those still stored with that backend — the value starts with its hex and a
 * colon — (a flow re-learned meanwhile with another backend stays) and announces them. Returns
 * the deleted fields.
 */
export const PURGE_SCRIPT = `
local gone = {}
local want = ARGV[2] .. ':'
for i = 4, #ARGV do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if cur and string.sub(cur, 1, #want) == want then
    redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[2], ARGV[i])
    gone[#gone + 1] = ARGV[i]
  end
end
if #gone > 0 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'node', ARGV[1], 'op', 'del',
    'reason', 'purge', 'flows', table.concat(gone, ','))
end
return gone
`;
