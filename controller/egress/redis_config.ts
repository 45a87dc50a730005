/**
 * The Redis source of an egress NAT's config: the controller (`controller/k8s/egress.ts`) derives
 * it from the `EgressNAT` object and its NAT pods and publishes it; the NAT pods' agents
 * (`main.ts egress --egress NS/NAME`) read it and follow its changes.
 *
 * One hash per EgressNAT, `hf:egress:{NS/NAME}:config` (the `{…}` hash tag of the leases, so it
 * shares their slot): field `json` is the config (the document {@linkcode parseEgressConfig}
 * accepts), field `clients` the client pods its selectors pick (clients.ts; v2), field `rev`
 * grows by one each time `json` or `clients` changes. Publishing the same again changes nothing
 * (one Lua script, atomic on the server).
 *
 * @module
 */

import type { RedisConnection } from "../../lib/redis_connection.ts";
import { type EgressConfig, EgressConfigError, parseEgressConfig } from "./config.ts";
import { decodeEgressClients, type EgressClient, encodeEgressClients } from "./clients.ts";

/** A config as stored: the validated config, its revision and the key it came from. */
export interface StoredEgressConfig {
  readonly config: EgressConfig;
  readonly rev: number;
  readonly key: string;
  /** The selected client pods (field `clients`; none in a v1 hash). */
  readonly clients: readonly EgressClient[];
}

/**
 * Version of the stored egress config (key, `json`, `clients` and `rev` fields, the JSON
 * documents; docs/contracts.md "Format versions"). v1: `json` and `rev`. v2 (both optional, so a
 * v2 reader takes v1 documents): the `bgp` section of `json` (a document without it is exactly a
 * v1 one; a v1 agent refuses one with it), the `clients` field (the pods `spec.sources` selectors
 * pick; v1 readers never read it), and `json.sources` may be empty (a selector that picks no pod
 * yet; a v1 NAT agent refuses that document). A NAT agent refuses a document it cannot parse
 * (logged) and keeps the config it has.
 */
export const EGRESS_CONFIG_VERSION = 2;

// KEYS: config hash. ARGV: json, clients. Returns the revision now.
const PUBLISH = `
local now = redis.call('HMGET', KEYS[1], 'json', 'clients')
if now[1] == ARGV[1] and (now[2] or '{"pods":[]}') == ARGV[2] then
  return tonumber(redis.call('HGET', KEYS[1], 'rev') or '0')
end
redis.call('HSET', KEYS[1], 'json', ARGV[1], 'clients', ARGV[2])
return redis.call('HINCRBY', KEYS[1], 'rev', 1)
`;

/** The key of EgressNAT `egressName` (`namespace/name`) under `prefix` (default `hf`). */
export function egressConfigKey(egressName: string, prefix = "hf"): string {
  if (egressName === "" || /[{}\s]/.test(egressName)) {
    throw new RangeError(
      `Cannot name the config of EgressNAT "${egressName}": the name must be non-empty, without braces or spaces`,
    );
  }
  return `${prefix}:egress:{${egressName}}:config`;
}

/**
 * Publishes `config` (as JSON) and the selected `clients`; returns the revision (unchanged when
 * both documents are).
 */
export async function publishEgressConfig(
  redis: RedisConnection,
  config: EgressConfig,
  prefix?: string,
  clients: readonly EgressClient[] = [],
): Promise<number> {
  const key = egressConfigKey(config.name, prefix);
  return Number(
    await redis.eval(PUBLISH, [key], [JSON.stringify(config), encodeEgressClients(clients)]),
  );
}

/**
 * The command that publishes `config`, as `redis-cli` arguments (`EVAL` of the same script as
 * {@linkcode publishEgressConfig}): for a Redis only reachable from inside a lab namespace.
 */
export function publishEgressConfigArgs(
  config: EgressConfig,
  prefix?: string,
  clients: readonly EgressClient[] = [],
): string[] {
  return [
    "EVAL",
    PUBLISH,
    "1",
    egressConfigKey(config.name, prefix),
    JSON.stringify(config),
    encodeEgressClients(clients),
  ];
}

/** Removes the config of `egressName` (its EgressNAT was deleted); leases are left to expire. */
export async function deleteEgressConfig(
  redis: RedisConnection,
  egressName: string,
  prefix?: string,
): Promise<void> {
  await redis.command(["DEL", egressConfigKey(egressName, prefix)]);
}

/** The revision of `egressName`'s config, 0 when absent (a cheap poll). */
export async function egressConfigRev(
  redis: RedisConnection,
  egressName: string,
  prefix?: string,
): Promise<number> {
  const rev = await redis.command(["HGET", egressConfigKey(egressName, prefix), "rev"]);
  return rev === null || rev === undefined ? 0 : Number(rev);
}

/**
 * The config of `egressName`, validated, or null when the key does not exist. Errors name the key
 * (and the field, for a document that does not validate).
 */
export async function readStoredEgressConfig(
  redis: RedisConnection,
  egressName: string,
  prefix?: string,
): Promise<StoredEgressConfig | null> {
  const key = egressConfigKey(egressName, prefix);
  const r = await redis.command(["HMGET", key, "json", "rev", "clients"]) as (string | null)[];
  const [json, rev, clients] = [r?.[0] ?? null, r?.[1] ?? null, r?.[2] ?? null];
  if (json === null) return null;
  let doc: unknown;
  try {
    doc = JSON.parse(json);
  } catch (err) {
    throw new Error(`Cannot read egress config "${key}": ${(err as Error).message}`, {
      cause: err,
    });
  }
  try {
    return {
      config: parseEgressConfig(doc),
      rev: Number(rev ?? 0),
      key,
      clients: decodeEgressClients(clients),
    };
  } catch (err) {
    if (!(err instanceof EgressConfigError)) throw err;
    throw new EgressConfigError(err.field, `Cannot use egress config "${key}": ${err.message}`, {
      cause: err,
    });
  }
}
