/**
 * Who owns each floating address of an EgressNAT, as the NAT pods publish it for the node agents
 * that steer client pods to the owner (node/egress_steer/, docs/egress.md "Steering client
 * pods"). Two keys under the EgressNAT's hash tag (the slot of its config and leases):
 *
 * - `hf:egress:{NS/NAME}:owners` — a hash, field = floating address, value = JSON
 *   `{"pod","ip","epoch"}` of the latest owner that assumed it (written only when its epoch is at
 *   least the stored one, so a late write of an older owner never wins);
 * - `hf:egress:{NS/NAME}:owner-changes` — a stream (MAXLEN ~ 1,000) of every change, fields
 *   `event` (`assumed` | `forfeited`), `address`, `pod`, `ip`, `epoch`.
 *
 * Both are written by one script, so a reader that takes the stream's last ID and the hash in one
 * script ({@linkcode OWNERS_SNAPSHOT_SCRIPT}) and then reads the stream after that ID misses
 * nothing. Epochs are the leases' fencing epochs (controller/egress/lease.ts): larger is newer.
 *
 * @module
 */

import type { RedisConnection } from "../../lib/redis_connection.ts";

/** Version of the owner records (hash, stream, fields; docs/contracts.md "Format versions"). */
export const OWNERS_VERSION = 1;
/** Approximate length the stream is trimmed to. */
export const OWNERS_STREAM_MAXLEN = 1000;

/** One owner change. */
export interface OwnerChange {
  readonly event: "assumed" | "forfeited";
  /** The floating address. */
  readonly address: string;
  /** The NAT pod. */
  readonly pod: string;
  /** Its address on the pod network (the config's peer address). */
  readonly ip: string;
  /** The lease's fencing epoch. */
  readonly epoch: number;
}

/** The owner of an address as the hash holds it. */
export interface OwnerRecord {
  readonly pod: string;
  readonly ip: string;
  readonly epoch: number;
}

/** The keys of `egressName`'s owner records. */
export function ownersKeys(egressName: string, prefix = "hf"): { hash: string; stream: string } {
  const base = `${prefix}:egress:{${egressName}}`;
  return { hash: `${base}:owners`, stream: `${base}:owner-changes` };
}

// KEYS: hash, stream. ARGV: event, address, pod, ip, epoch, maxlen. Event 'load' writes nothing
// (it only gets the script cached on the server and the client before a takeover needs it).
const PUBLISH = `
if ARGV[1] == 'load' then return 0 end
if ARGV[1] == 'assumed' then
  local cur = redis.call('HGET', KEYS[1], ARGV[2])
  local e = cur and tonumber(string.match(cur, '"epoch":(%d+)')) or -1
  if tonumber(ARGV[5]) < e then return 0 end
  redis.call('HSET', KEYS[1], ARGV[2],
    '{"pod":' .. cjson.encode(ARGV[3]) .. ',"ip":' .. cjson.encode(ARGV[4]) .. ',"epoch":' .. ARGV[5] .. '}')
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'event', ARGV[1], 'address', ARGV[2],
  'pod', ARGV[3], 'ip', ARGV[4], 'epoch', ARGV[5])
return 1
`;

/** KEYS: hash, stream. Returns {last stream ID or '0-0', HGETALL of the hash}. */
export const OWNERS_SNAPSHOT_SCRIPT = `
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local id = '0-0'
if last[1] then id = last[1][1] end
return {id, redis.call('HGETALL', KEYS[1])}
`;

/** The scripts (the format's encoder). */
export const OWNERS_SCRIPTS: Readonly<Record<string, string>> = {
  PUBLISH,
  SNAPSHOT: OWNERS_SNAPSHOT_SCRIPT,
};

/** Publishes one change (a stale `assumed` — older epoch than the hash's — is not written). */
export async function publishOwnerChange(
  redis: RedisConnection,
  egressName: string,
  c: OwnerChange,
  prefix?: string,
): Promise<boolean> {
  const k = ownersKeys(egressName, prefix);
  const r = await redis.eval(PUBLISH, [k.hash, k.stream], [
    c.event,
    c.address,
    c.pod,
    c.ip,
    String(c.epoch),
    String(OWNERS_STREAM_MAXLEN),
  ]);
  return Number(r) === 1;
}

/**
 * Gets the publish script cached (on the server and in `redis`'s script table) so the first
 * change after a takeover costs one round trip; writes nothing.
 */
export async function loadOwnerScript(redis: RedisConnection, egressName: string): Promise<void> {
  const k = ownersKeys(egressName);
  await redis.eval(PUBLISH, [k.hash, k.stream], ["load", "", "", "", "0", "0"]);
}

/** Parses a hash value; null when it is not an owner record. */
export function decodeOwnerRecord(text: string): OwnerRecord | null {
  try {
    const r = JSON.parse(text) as Record<string, unknown>;
    if (typeof r.pod !== "string" || typeof r.ip !== "string" || typeof r.epoch !== "number") {
      return null;
    }
    return { pod: r.pod, ip: r.ip, epoch: r.epoch };
  } catch {
    return null;
  }
}

/** Parses a stream entry's flat field list; null when it is not an owner change. */
export function decodeOwnerChange(fields: readonly string[]): OwnerChange | null {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i]!, fields[i + 1]!);
  const event = f.get("event"), address = f.get("address"), pod = f.get("pod"), ip = f.get("ip");
  const epoch = Number(f.get("epoch"));
  if (
    (event !== "assumed" && event !== "forfeited") || !address || !pod || ip === undefined ||
    !Number.isFinite(epoch)
  ) return null;
  return { event, address, pod, ip, epoch };
}

/** The owners now and the stream ID to read changes after (one script: nothing in between). */
export async function readOwnersSnapshot(
  redis: RedisConnection,
  egressName: string,
  prefix?: string,
): Promise<{ lastId: string; owners: Map<string, OwnerRecord> }> {
  const k = ownersKeys(egressName, prefix);
  const [id, flat] = await redis.eval(OWNERS_SNAPSHOT_SCRIPT, [k.hash, k.stream], []) as [
    string,
    string[],
  ];
  const owners = new Map<string, OwnerRecord>();
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const r = decodeOwnerRecord(flat[i + 1]!);
    if (r) owners.set(flat[i]!, r);
  }
  return { lastId: String(id), owners };
}
