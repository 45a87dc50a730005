/**
 * The LB model in Redis: keys, the entry format and the Lua scripts that keep the hash, the
 * revision and the change stream moving together. All keys share one hash tag, so a Redis
 * Cluster keeps them on one shard and the scripts may touch them all.
 *
 * - `hf:model:{m}:services` — hash: field `namespace/name` → JSON {@linkcode ModelEntry}
 * - `hf:model:{m}:rev` — integer, incremented by every change
 * - `hf:model:{m}:changes` — stream (MAXLEN ~ {@linkcode STREAM_MAXLEN}), fields `rev`, `epoch`,
 *   `op` (`upsert` | `delete` | `policy` | `settings`), `service` (`""` for `policy` and `settings`), `entry` (the JSON,
 *   upserts only) and `sha256` (policy only)
 * - `hf:model:{m}:policy` — hash: `sha256` (hex) and `wasm` (the module, base64) of the WASM
 *   policy module the controller accepted; absent until it accepted one
 * - `hf:model:{m}:epoch` — random token set when the model is first written; a new token means
 *   Redis lost the model and readers must re-read it
 * - `hf:model:{m}:settings` — string: the model-level settings' canonical JSON
 *   (`settings.ts`: `encapPort`, `lbNodes`); absent until the controller wrote some. A change is
 *   stream op `settings` with field `settings` (the JSON). Agents from before it read that op as
 *   an upsert of service `""` without an entry, which changes nothing.
 * - `hf:model:{m}:reports` — stream the other way, agents → controller: LB nodes' health verdict
 *   changes and policy rejections, relayed as Kubernetes Events (`reports.ts`)
 *
 * @module
 */

import type { BackendInput, ServiceInput } from "../../node/lb/tables/writer.ts";

/** One service of the model: the service with its frontends, and its backends. */
export interface ModelEntry {
  readonly service: ServiceInput;
  readonly backends: readonly BackendInput[];
}

/** The model's Redis keys. */
export interface ModelKeys {
  readonly services: string;
  readonly rev: string;
  readonly changes: string;
  readonly epoch: string;
  readonly policy: string;
  readonly settings: string;
}

/**
 * Version of the model in Redis (keys, entry JSON, stream fields and ops, the scripts;
 * docs/contracts.md "Format versions"). v1 is the first. Readers skip (log) an entry they refuse
 * and read a stream op they do not know as a change without an entry (only `rev` advances).
 */
export const MODEL_VERSION = 1;

/** Approximate length the change stream is trimmed to. */
export const STREAM_MAXLEN = 10_000;

/** The keys of the model under `prefix` (default `hf`). */
export function modelKeys(prefix = "hf"): ModelKeys {
  const base = `${prefix}:model:{m}`;
  return {
    services: `${base}:services`,
    rev: `${base}:rev`,
    changes: `${base}:changes`,
    epoch: `${base}:epoch`,
    policy: `${base}:policy`,
    settings: `${base}:settings`,
  };
}

/**
 * The canonical JSON of an entry: fixed key order, backends and frontends sorted, defaults
 * spelled out, so equal models encode to equal strings (the publisher writes only what differs).
 */
export function encodeEntry(e: ModelEntry): string {
  const s = e.service;
  const frontends = s.frontends
    .map((f) => ({ address: f.address, portName: f.portName ?? "" }))
    .sort((a, b) => cmp(a.address, b.address) || cmp(a.portName, b.portName));
  const backends = e.backends
    .map((b) => ({
      address: b.address,
      portName: b.portName ?? "",
      state: b.state ?? "active",
      ...(b.weight !== undefined ? { weight: b.weight } : {}),
      ...(b.zone ? { zone: b.zone } : {}),
    }))
    .sort((a, b) => cmp(a.address, b.address) || cmp(a.portName, b.portName));
  return JSON.stringify({
    service: {
      name: s.name,
      flowKeyMode: s.flowKeyMode ?? "five-tuple",
      ...(s.maglevSize ? { maglevSize: s.maglevSize } : {}),
      ...(s.healthCheck ? { healthCheck: s.healthCheck } : {}),
      frontends,
    },
    backends,
  });
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * One change, atomically: checks the epoch (`ARGV[1]`; a mismatch returns `EPOCH` and changes
 * nothing), sets or deletes the field, increments the revision and appends to the stream.
 * KEYS: services, rev, changes, epoch. ARGV: epoch, op, service, entry, maxlen. Returns the rev.
 */
export const WRITE_SCRIPT = `
local e = redis.call('GET', KEYS[4])
if e ~= ARGV[1] then return redis.error_reply('EPOCH model epoch is ' .. tostring(e)) end
if ARGV[2] == 'upsert' then
  redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
else
  redis.call('HDEL', KEYS[1], ARGV[3])
end
local rev = redis.call('INCR', KEYS[2])
if ARGV[2] == 'upsert' then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'rev', rev, 'epoch', ARGV[1],
    'op', 'upsert', 'service', ARGV[3], 'entry', ARGV[4])
else
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'rev', rev, 'epoch', ARGV[1],
    'op', 'delete', 'service', ARGV[3])
end
return rev
`;

/**
 * Sets the policy module, atomically with the revision and the stream, unless it is the one
 * stored: checks the epoch like {@linkcode WRITE_SCRIPT}; returns 0 when `sha256` is already
 * stored (nothing written), else the new rev.
 * KEYS: services, rev, changes, epoch, policy. ARGV: epoch, sha256, wasm (base64), maxlen.
 */
export const POLICY_SCRIPT = `
local e = redis.call('GET', KEYS[4])
if e ~= ARGV[1] then return redis.error_reply('EPOCH model epoch is ' .. tostring(e)) end
if redis.call('HGET', KEYS[5], 'sha256') == ARGV[2] then return 0 end
redis.call('HSET', KEYS[5], 'sha256', ARGV[2], 'wasm', ARGV[3])
local rev = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'rev', rev, 'epoch', ARGV[1],
  'op', 'policy', 'service', '', 'sha256', ARGV[2])
return rev
`;

/**
 * Sets the model's settings (canonical JSON), atomically with the revision and the stream,
 * unless they are the ones stored: checks the epoch like {@linkcode WRITE_SCRIPT}; returns 0
 * when equal (nothing written), else the new rev.
 * KEYS: services, rev, changes, epoch, policy, settings. ARGV: epoch, json, maxlen.
 */
export const SETTINGS_SCRIPT = `
local e = redis.call('GET', KEYS[4])
if e ~= ARGV[1] then return redis.error_reply('EPOCH model epoch is ' .. tostring(e)) end
if redis.call('GET', KEYS[6]) == ARGV[2] then return 0 end
redis.call('SET', KEYS[6], ARGV[2])
local rev = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'rev', rev, 'epoch', ARGV[1],
  'op', 'settings', 'service', '', 'settings', ARGV[2])
return rev
`;

/**
 * A consistent snapshot: `{epoch or "", rev, last stream id or "0-0", HGETALL..., policy
 * sha256 or "", settings JSON or ""}`. KEYS: services, rev, changes, epoch, policy, settings.
 */
export const SNAPSHOT_SCRIPT = `
local e = redis.call('GET', KEYS[4]) or ''
local rev = redis.call('GET', KEYS[2]) or '0'
local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
local id = '0-0'
if #last > 0 then id = last[1][1] end
local p = redis.call('HGET', KEYS[5], 'sha256') or ''
local s = redis.call('GET', KEYS[6]) or ''
return {e, rev, id, redis.call('HGETALL', KEYS[1]), p, s}
`;

/** The policy module as stored in the model. */
export interface ModelPolicy {
  /** SHA-256 of the module, hex. */
  readonly sha256: string;
  readonly wasm: Uint8Array;
}

/** `bytes` as base64 (the policy hash's `wasm` field). */
export function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

/** The bytes of base64 `text`. */
export function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** SHA-256 of `bytes`, lower-case hex. */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
