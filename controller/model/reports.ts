/**
 * What LB nodes report back to the controller through Redis: each health verdict change and
 * each policy module an agent rejected, appended to the bounded stream
 * `hf:model:{m}:reports` (MAXLEN ~ {@linkcode REPORTS_MAXLEN}, in the model's keyspace and hash
 * tag, beside `schema.ts`'s keys). Agents cannot write Kubernetes Events (no API access); the
 * leading controller follows this stream and writes them (`controller/k8s/reports.ts`).
 *
 * Stream fields: `kind` (`health` | `policy`), `node`, and for `health`: `service`
 * (`namespace/name`), `backend` (`IP:PORT`), `state` (`unhealthy` | `healthy`), `reason`; for
 * `policy`: `sha256`, `reason`.
 *
 * @module
 */

import type { RedisConnection } from "../../lib/redis_connection.ts";

/**
 * Version of the reports stream's entries ({@link encodeReport}; docs/contracts.md "Format
 * versions"). v1 is the first. The controller skips (logs) an entry of a kind it does not know.
 */
export const REPORTS_VERSION = 1;

/** Approximate length the reports stream is trimmed to. */
export const REPORTS_MAXLEN = 10_000;

/** The reports stream's key under `prefix` (default `hf`). */
export function reportsKey(prefix = "hf"): string {
  return `${prefix}:model:{m}:reports`;
}

/** A backend's verdict changed on one LB node. */
export interface HealthReport {
  readonly kind: "health";
  readonly node: string;
  /** `namespace/name` of the service in the model. */
  readonly service: string;
  /** `IP:PORT` probed. */
  readonly backend: string;
  readonly state: "unhealthy" | "healthy";
  /** Why, for a person: `3 failed probes (connect refused)`. */
  readonly reason: string;
}

/** An LB node rejected a policy module (the old one keeps serving there). */
export interface PolicyReport {
  readonly kind: "policy";
  readonly node: string;
  /** SHA-256 of the rejected module, hex. */
  readonly sha256: string;
  readonly reason: string;
}

/** One entry of the reports stream. */
export type Report = HealthReport | PolicyReport;

/** A report with its stream id. */
export interface StoredReport {
  readonly id: string;
  readonly report: Report;
}

/** The stream fields of `r` (flat `field, value, …`). */
export function encodeReport(r: Report): string[] {
  return Object.entries(r).flatMap(([k, v]) => [k, String(v)]);
}

/** The report of stream fields `flat`, or undefined when they are not one (logged by callers). */
export function decodeReport(flat: readonly string[]): Report | undefined {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) f.set(flat[i]!, flat[i + 1]!);
  const node = f.get("node"), reason = f.get("reason") ?? "";
  if (!node) return undefined;
  if (f.get("kind") === "health") {
    const service = f.get("service"), backend = f.get("backend"), state = f.get("state");
    if (!service || !backend || (state !== "unhealthy" && state !== "healthy")) return undefined;
    return { kind: "health", node, service, backend, state, reason };
  }
  if (f.get("kind") === "policy") {
    const sha256 = f.get("sha256");
    return sha256 ? { kind: "policy", node, sha256, reason } : undefined;
  }
  return undefined;
}

/** Appends `report` to the stream (XADD MAXLEN ~); throws what the connection throws. */
export async function appendReport(
  redis: Pick<RedisConnection, "command">,
  report: Report,
  options: { prefix?: string; maxlen?: number } = {},
): Promise<string> {
  const maxlen = String(options.maxlen ?? REPORTS_MAXLEN);
  const key = reportsKey(options.prefix);
  return String(
    await redis.command(["XADD", key, "MAXLEN", "~", maxlen, "*", ...encodeReport(report)]),
  );
}

/** The id of the stream's last entry (`0-0` when empty): where a follower starts. */
export async function reportsTail(
  redis: Pick<RedisConnection, "command">,
  prefix?: string,
): Promise<string> {
  const last = await redis.command(["XREVRANGE", reportsKey(prefix), "+", "-", "COUNT", "1"]);
  return (last as [string, string[]][] | null)?.[0]?.[0] ?? "0-0";
}

/**
 * Reports after stream id `after` (XREAD, blocking up to `blockMs` on the blocking connection);
 * entries that are not reports come back with `report` undefined so the caller moves past them.
 */
export async function readReports(
  redis: Pick<RedisConnection, "blocking">,
  after: string,
  options: { count: number; blockMs: number; prefix?: string },
): Promise<{ id: string; report: Report | undefined }[]> {
  const reply = await redis.blocking([
    "XREAD",
    "COUNT",
    String(options.count),
    "BLOCK",
    String(options.blockMs),
    "STREAMS",
    reportsKey(options.prefix),
    after,
  ]) as [string, [string, string[]][]][] | null;
  const entries = reply?.[0]?.[1] ?? [];
  return entries.map(([id, flat]) => ({ id, report: decodeReport(flat) }));
}
