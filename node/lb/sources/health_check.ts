/**
 * A service's active health check as the data sources describe it: what the LB nodes probe
 * (TCP connect, or HTTP GET of a path expecting a status), how often, and the rise/fall and
 * backoff settings handed to the WASM policy's `health_step`. Parsed from the services file's
 * `healthCheck` mapping ({@linkcode parseHealthCheck}) and from Service annotations
 * ({@linkcode healthCheckFromAnnotations}); the probing itself is `node/lb/health/`.
 *
 * @module
 */

/** A validated health check (every field filled in). */
export interface HealthCheck {
  /** `tcp`: a connect succeeds; `http`: `GET path` answers `expectStatus`. */
  readonly kind: "tcp" | "http";
  /** Port probed on the backend's IP (0: the backend's own port). */
  readonly port: number;
  /** HTTP path (kind `http`). */
  readonly path: string;
  /** Expected HTTP status (kind `http`). */
  readonly expectStatus: number;
  /** Time between two probes of one backend. */
  readonly intervalMs: number;
  /** A probe not finished in this time failed (`timeout`); at most `intervalMs`. */
  readonly timeoutMs: number;
  /** Consecutive successes that bring a backend (back) into the Maglev tables. */
  readonly rise: number;
  /** Consecutive failures that take it out. */
  readonly fall: number;
  /** Hold out of the tables after the first quarantine; doubles per repeat (flapping). */
  readonly backoffBaseMs: number;
  /** Cap of that hold. */
  readonly backoffMaxMs: number;
}

/** Defaults of every field but `kind` (HAProxy-like: 2 s, rise 2, fall 3). */
export const HEALTH_CHECK_DEFAULTS: Omit<HealthCheck, "kind"> = Object.freeze({
  port: 0,
  path: "/",
  expectStatus: 200,
  intervalMs: 2000,
  timeoutMs: 1000,
  rise: 2,
  fall: 3,
  backoffBaseMs: 1000,
  backoffMaxMs: 30_000,
});

/** Annotation turning the health check on: `tcp` or `http`. */
export const HEALTH_CHECK_ANNOTATION = "holdfast.io/health-check";
/** Prefix of the other health-check annotations (`holdfast.io/health-check-interval-ms` …). */
const PREFIX = `${HEALTH_CHECK_ANNOTATION}-`;

/** The file keys (and annotation suffixes) of each numeric field, with its bounds. */
const NUMBERS = [
  ["port", "port", 0, 65535],
  ["expectStatus", "expect-status", 100, 599],
  ["intervalMs", "interval-ms", 10, 3_600_000],
  ["timeoutMs", "timeout-ms", 1, 3_600_000],
  ["rise", "rise", 1, 1000],
  ["fall", "fall", 1, 1000],
  ["backoffBaseMs", "backoff-base-ms", 0, 86_400_000],
  ["backoffMaxMs", "backoff-max-ms", 0, 86_400_000],
] as const;

/** Thrown for an invalid health check; the message names the field. */
export class HealthCheckError extends Error {
  override name = "HealthCheckError";
}

type Raw = Record<string, unknown>;

function build(kind: unknown, get: (key: string) => unknown, field: (k: string) => string) {
  if (kind !== "tcp" && kind !== "http") {
    throw new HealthCheckError(`${field("kind")}: ${JSON.stringify(kind)} is not tcp or http`);
  }
  const out: Record<string, unknown> = { ...HEALTH_CHECK_DEFAULTS, kind };
  for (const [key, , min, max] of NUMBERS) {
    const v = get(key);
    if (v === undefined) continue;
    const n = typeof v === "string" && /^\s*\d+\s*$/.test(v) ? Number(v) : v;
    if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max) {
      throw new HealthCheckError(
        `${field(key)}: ${JSON.stringify(v)} is not an integer in ${min}..${max}`,
      );
    }
    out[key] = n;
  }
  const path = get("path");
  if (path !== undefined) {
    if (typeof path !== "string" || !path.startsWith("/") || /[\s]/.test(path)) {
      throw new HealthCheckError(
        `${field("path")}: ${JSON.stringify(path)} is not a path starting with "/"`,
      );
    }
    out.path = path;
  }
  const hc = out as unknown as HealthCheck;
  if (hc.timeoutMs > hc.intervalMs) {
    throw new HealthCheckError(
      `${field("timeoutMs")}: ${hc.timeoutMs} exceeds the interval ${hc.intervalMs}`,
    );
  }
  if (hc.backoffMaxMs < hc.backoffBaseMs) {
    throw new HealthCheckError(
      `${field("backoffMaxMs")}: ${hc.backoffMaxMs} is below backoffBaseMs ${hc.backoffBaseMs}`,
    );
  }
  return hc;
}

/** Whether two (optional) health checks are the same settings. */
export function sameHealthCheck(a?: HealthCheck, b?: HealthCheck): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  return (Object.keys(HEALTH_CHECK_DEFAULTS) as (keyof HealthCheck)[])
    .every((k) => a[k] === b[k]) && a.kind === b.kind;
}

const FILE_KEYS = new Set(["kind", "path", ...NUMBERS.map((n) => n[0])]);

/**
 * Validates a services-file `healthCheck` mapping found at `path` (e.g. `$.services[0]`); a
 * string is shorthand for `{ kind }`. Throws {@linkcode HealthCheckError} naming the field.
 *
 * @example
 * ```ts
 * import { parseHealthCheck } from "./health_check.ts";
 * const hc = parseHealthCheck({ kind: "http", path: "/healthz", intervalMs: 100 }, "$.hc");
 * if (hc.fall !== 3 || hc.timeoutMs !== 100) throw new Error(JSON.stringify(hc));
 * ```
 */
export function parseHealthCheck(raw: unknown, path: string): HealthCheck {
  const o: Raw = typeof raw === "string" ? { kind: raw } : raw as Raw;
  if (typeof o !== "object" || o === null || Array.isArray(o)) {
    throw new HealthCheckError(`${path}: expected a mapping or "tcp"/"http"`);
  }
  for (const k of Object.keys(o)) {
    if (!FILE_KEYS.has(k)) throw new HealthCheckError(`${path}.${k}: unknown key`);
  }
  const withDefaults = { ...o };
  // A timeout longer than a short interval it did not set itself is clamped, not refused.
  if (o.timeoutMs === undefined && typeof o.intervalMs === "number") {
    withDefaults.timeoutMs = Math.min(HEALTH_CHECK_DEFAULTS.timeoutMs, o.intervalMs);
  }
  return build(o.kind, (k) => withDefaults[k], (k) => `${path}.${k}`);
}

/**
 * The health check a Service's annotations ask for, or undefined without
 * `holdfast.io/health-check`. Other fields: `holdfast.io/health-check-{port,path,expect-status,
 * interval-ms,timeout-ms,rise,fall,backoff-base-ms,backoff-max-ms}`. Throws
 * {@linkcode HealthCheckError} naming the annotation.
 *
 * @example
 * ```ts
 * import { healthCheckFromAnnotations } from "./health_check.ts";
 * const hc = healthCheckFromAnnotations({
 *   "holdfast.io/health-check": "tcp",
 *   "holdfast.io/health-check-fall": "2",
 * });
 * if (hc?.fall !== 2) throw new Error(JSON.stringify(hc));
 * ```
 */
export function healthCheckFromAnnotations(
  annotations: Readonly<Record<string, string>>,
): HealthCheck | undefined {
  const kind = annotations[HEALTH_CHECK_ANNOTATION];
  if (kind === undefined) return undefined;
  const suffix = new Map<string, string>(NUMBERS.map((n) => [n[0], n[1]]));
  suffix.set("path", "path");
  const name = (k: string) => k === "kind" ? HEALTH_CHECK_ANNOTATION : PREFIX + suffix.get(k);
  for (const a of Object.keys(annotations)) {
    if (a.startsWith(PREFIX) && ![...suffix.values()].some((s) => PREFIX + s === a)) {
      throw new HealthCheckError(`annotation ${a}: unknown health-check setting`);
    }
  }
  const get = (k: string) => {
    const v = annotations[name(k)];
    if (k === "timeoutMs" && v === undefined) {
      const interval = Number(annotations[name("intervalMs")]);
      return Number.isInteger(interval) && interval > 0
        ? Math.min(HEALTH_CHECK_DEFAULTS.timeoutMs, interval)
        : undefined;
    }
    return v;
  };
  return build(kind.trim(), get, (k) => `annotation ${name(k)}`);
}
