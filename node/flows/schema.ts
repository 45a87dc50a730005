/**
 * The Redis schema of shared flow state. Everything of one LB IP shares the hash tag `{<LB IP>}`,
 * so it lives in one Redis Cluster slot and the Lua scripts below may touch all of it at once.
 *
 * | key                        | type       | content                                             |
 * |----------------------------|------------|-----------------------------------------------------|
 * | `hf:{10.0.100.1}:flows`    | hash       | flow field → `<backend hex8>:<epoch>`               |
 * | `hf:{10.0.100.1}:seen`     | sorted set | flow field, score = last seen (Unix ms)             |
 * | `hf:{10.0.100.1}:instance` | string     | random token; missing after Redis lost its data     |
 * | `hf:{10.0.100.1}:events`   | stream     | `node`, `op`, `reason`, `flows` (batched)     |
 *
 * A flow field is {@link flowField}: 18 hex digits of saddr, sport, dport, proto (sport 0 in
 * client-ip mode, which makes one field per client address and port). The first writer of a flow
 * wins (HSETNX); only winners are announced on the stream, so every node converges on the stored
 * backend. Expiry is by last seen: a flow whose score is older than the idle timeout is removed
 * from the hash and the set and announced as `del`. (Redis 7.0 has no per-field TTL; the scripts
 * also keep a whole-key TTL of {@link KEY_TTL_FACTOR} idle timeouts so an abandoned LB IP
 * disappears.)
 *
 * Stream entries: `add` → `flows` = `field=value,field=value…`; `del` → `flows` = `field,field…`
 * and `reason` = `idle` or `purge`.
 * The stream is capped (approximately) at {@link STREAM_MAXLEN} entries; a node that fell further
 * behind (or saw Redis restart) restores from the hash instead.
 *
 * @module
 */

/** Keys of one LB IP. */
export interface VipKeys {
  readonly instance: string;
  readonly flows: string;
  readonly seen: string;
  readonly events: string;
}

/** Redis key names for LB IP `vip` (dotted), with an optional deployment prefix. */
export function vipKeys(vip: string, prefix = "hf"): VipKeys {
  const tag = `${prefix}:{${vip}}`;
  return {
    instance: `${tag}:instance`,
    flows: `${tag}:flows`,
    seen: `${tag}:seen`,
    events: `${tag}:events`,
  };
}

/** Approximate cap of each LB IP's stream, in entries (each entry is a batch of flows). */
export const STREAM_MAXLEN = 100_000;

/** Whole-key TTL in idle timeouts: keys of an LB IP nobody writes to vanish after this long. */
export const KEY_TTL_FACTOR = 4;

/** The stored value of a flow: backend (host-order u32) and epoch. */
export function encodeFlowValue(backend: number, epoch: number): string {
  return `${(backend >>> 0).toString(16).padStart(8, "0")}:${epoch}`;
}

/** Inverse of {@link encodeFlowValue}. */
export function decodeFlowValue(text: string): { backend: number; epoch: number } {
  const backend = parseInt(text.slice(0, 8), 16);
  const epoch = Number(text.slice(9));
  if (text[8] !== ":" || Number.isNaN(backend) || !Number.isInteger(epoch)) {
    throw new TypeError(`Cannot decode flow value "${text}": expected "<hex8>:<epoch>"`);
  }
  return { backend, epoch };
}

/**
 * Learn a batch: KEYS flows, seen, events; ARGV node, now_ms, maxlen, ttl_ms, then field/value
 * pairs. HSETNX each (first writer wins), set last seen (GT), announce winners in one stream
 * entry. Returns `{field, stored_value, …}` of flows stored with a different backend.
 */
export const LEARN_SCRIPT = `
local added, conflicts = {}, {}
for i = 5, #ARGV, 2 do
  local f, v = ARGV[i], ARGV[i + 1]
  if redis.call('HSETNX', KEYS[1], f, v) == 1 then
    added[#added + 1] = f .. '=' .. v
  else
    local cur = redis.call('HGET', KEYS[1], f)
    if string.sub(cur, 1, 8) ~= string.sub(v, 1, 8) then
      conflicts[#conflicts + 1] = f
      conflicts[#conflicts + 1] = cur
    end
  end
  redis.call('ZADD', KEYS[2], 'GT', ARGV[2], f)
end
if #added > 0 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'node', ARGV[1], 'op', 'add',
    'flows', table.concat(added, ','))
end
for k = 1, 3 do redis.call('PEXPIRE', KEYS[k], ARGV[4]) end
return conflicts
`;

/**
 * Expire idle flows: KEYS flows, seen, events; ARGV node, cutoff_ms, limit, maxlen. Removes up
 * to `limit` flows last seen at or before the cutoff and announces them. Returns their fields.
 */
export const EXPIRE_SCRIPT = `
local gone = redis.call('ZRANGE', KEYS[2], '-inf', ARGV[2], 'BYSCORE', 'LIMIT', 0, ARGV[3])
if #gone == 0 then return gone end
for i = 1, #gone, 500 do
  local chunk = {}
  for j = i, math.min(i + 499, #gone) do chunk[#chunk + 1] = gone[j] end
  redis.call('ZREM', KEYS[2], unpack(chunk))
  redis.call('HDEL', KEYS[1], unpack(chunk))
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'node', ARGV[1], 'op', 'del',
  'reason', 'idle', 'flows', table.concat(gone, ','))
return gone
`;

/**
 * Remove flows of a backend: KEYS flows, seen, events; ARGV node, backend hex8, maxlen, then
 * candidate fields. Deletes those still stored with that backend (a flow re-learned meanwhile
 * with another backend stays) and announces them. Returns the deleted fields.
 */
export const PURGE_SCRIPT = `
local gone = {}
for i = 4, #ARGV do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if cur and string.sub(cur, 1, 8) == ARGV[2] then
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
