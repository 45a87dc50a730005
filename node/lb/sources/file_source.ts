/**
 * The file data source: services, their frontends and backends, and local-redirect overrides
 * from YAML or JSON, written as source `file`. Loading a new version replaces the previous one
 * (what disappeared is removed). {@linkcode DEFAULT_CONFIG_YAML} is the embedded demo config.
 *
 * Format:
 * ```yaml
 * services:
 *   - name: default/echo            # namespace/name
 *     flowKeyMode: five-tuple       # or client-ip
 *     maglevSize: 16381             # optional: a prime in 251..131071 (default 16381)
 *     draining: false               # optional: true = no new TCP connections (Service.draining)
 *     healthCheck:                  # optional: LB nodes probe backends (node/lb/sources/health_check.ts)
 *       { kind: http, path: /healthz, expectStatus: 200, port: 8081, intervalMs: 2000, fall: 3 }
 *     frontends:
 *       - { address: 10.0.100.1:80/TCP, portName: http }
 *     backends:                     # optional; may also name services defined elsewhere
 *       - { address: 10.1.0.1:8080/TCP, portName: http, weight: 100, state: active, zone: a }
 *                                   # weight: 0..65535 (default 100; 0 = no new flows)
 * redirects:
 *   - { service: default/echo, target: default/echo-local }
 * ```
 *
 * @module
 */

import { parse as parseYaml } from "yaml";
import { parseAddr } from "../tables/address.ts";
import { DEFAULT_WEIGHT } from "../tables/backend.ts";
import type { SourceWriter } from "../tables/source_writer.ts";
import type { BackendInput, FrontendInput, ServiceInput, Writer } from "../tables/writer.ts";
import { MAGLEV_M_DEFAULT } from "../../../policy-as/host/abi.ts";
import {
  checkMaglevSize,
  checkMaglevWeights,
  MAGLEV_WEIGHT_MAX,
} from "../../../policy-as/host/maglev_input.ts";
import type { WriteTxn } from "../../../lib/statedb/mod.ts";
import { type HealthCheck, HealthCheckError, parseHealthCheck } from "./health_check.ts";

/** A validated file configuration. */
export interface FileConfig {
  readonly services: readonly (ServiceInput & {
    readonly backends: readonly BackendInput[];
    /** Probes the LB nodes run against the backends (`node/lb/health/`); none when absent. */
    readonly healthCheck?: HealthCheck;
  })[];
  readonly redirects: readonly { readonly service: string; readonly target: string }[];
}

/** Thrown when a config file is malformed; the message names the offending path. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** The demo's default configuration (one service, two backends). */
export const DEFAULT_CONFIG_YAML =
  `# Holdfast demo: one TCP service on 10.0.100.1:80 with two backends.
services:
  - name: default/demo
    flowKeyMode: five-tuple
    frontends:
      - address: 10.0.100.1:80/TCP
        portName: http
    backends:
      - address: 10.0.1.1:8080/TCP
        portName: http
      - address: 10.0.1.2:8080/TCP
        portName: http
`;

function fail(path: string, why: string, cause?: unknown): never {
  throw new ConfigError(`Invalid config at ${path}: ${why}`, { cause });
}

function str(v: unknown, path: string): string {
  if (typeof v !== "string" || v === "") {
    fail(path, `expected a non-empty string, got ${JSON.stringify(v)}`);
  }
  return v;
}

function addr(v: unknown, path: string): string {
  const s = str(v, path);
  try {
    parseAddr(s);
  } catch (e) {
    fail(path, (e as Error).message, e);
  }
  return s;
}

/**
 * Refuses, at load time, backends the Maglev builder would refuse for this service (more than M
 * of them, or weights too uneven for the build budget: docs/maglev.md) — counted over what this
 * entry lists, at the service's M or the default. The reconciler checks again with all sources'
 * backends and writes a refusal into the frontend's status.
 */
function checkBuildable(
  name: string,
  path: string,
  backends: readonly BackendInput[],
  maglevSize: number | undefined,
): void {
  const m = maglevSize ?? MAGLEV_M_DEFAULT;
  if (backends.length > m) {
    fail(path, `service "${name}": ${backends.length} backends exceed its Maglev table size ${m}`);
  }
  try {
    checkMaglevWeights(backends.map((b) => b.weight ?? DEFAULT_WEIGHT), m);
  } catch (e) {
    fail(path, `service "${name}": ${(e as Error).message}`, e);
  }
}

/** Parses and validates a config; `format` defaults to YAML (a superset of JSON). */
export function parseConfig(text: string, options: { format?: "yaml" | "json" } = {}): FileConfig {
  let raw: unknown;
  try {
    raw = options.format === "json" ? JSON.parse(text) : parseYaml(text);
  } catch (e) {
    throw new ConfigError(`Cannot parse config: ${(e as Error).message}`, { cause: e });
  }
  return configFromValue(raw);
}

/**
 * Validates a config already parsed into plain values ({@linkcode parseConfig} after parsing;
 * the model in Redis, whose entries are JSON parsed once).
 */
export function configFromValue(raw: unknown): FileConfig {
  raw ??= {};
  if (typeof raw !== "object" || Array.isArray(raw)) {
    fail("$", "expected a mapping with services/redirects");
  }
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) {
    if (k !== "services" && k !== "redirects") fail(`$.${k}`, "unknown key");
  }
  const services: FileConfig["services"][number][] = [];
  const list = (v: unknown, path: string): unknown[] => {
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) fail(path, "expected a list");
    return v;
  };
  list(r.services, "$.services").forEach((s, i) => {
    const p = `$.services[${i}]`;
    if (typeof s !== "object" || s === null) fail(p, "expected a mapping");
    const o = s as Record<string, unknown>;
    const name = str(o.name, `${p}.name`);
    if (!/^[^/]+\/[^/]+$/.test(name)) fail(`${p}.name`, `"${name}" is not namespace/name`);
    const flowKeyMode = o.flowKeyMode ?? "five-tuple";
    if (flowKeyMode !== "five-tuple" && flowKeyMode !== "client-ip") {
      fail(`${p}.flowKeyMode`, `"${flowKeyMode}" is not five-tuple or client-ip`);
    }
    if (o.draining !== undefined && typeof o.draining !== "boolean") {
      fail(`${p}.draining`, `${JSON.stringify(o.draining)} is not true or false`);
    }
    let maglevSize: number | undefined;
    if (o.maglevSize !== undefined) {
      maglevSize = Number(o.maglevSize);
      try {
        checkMaglevSize(maglevSize);
      } catch (e) {
        fail(`${p}.maglevSize`, `service "${name}": ${(e as Error).message}`, e);
      }
    }
    const frontends: FrontendInput[] = list(o.frontends, `${p}.frontends`).map((f, j) => {
      const fp = `${p}.frontends[${j}]`;
      const fo = (typeof f === "string" ? { address: f } : f) as Record<string, unknown>;
      return {
        address: addr(fo.address, `${fp}.address`),
        portName: (fo.portName as string | undefined) ?? "",
      };
    });
    const backends: BackendInput[] = list(o.backends, `${p}.backends`).map((b, j) => {
      const bp = `${p}.backends[${j}]`;
      const bo = (typeof b === "string" ? { address: b } : b) as Record<string, unknown>;
      const state = bo.state ?? "active";
      if (state !== "active" && state !== "terminating" && state !== "quarantined") {
        fail(`${bp}.state`, `"${state}" is not active, terminating or quarantined`);
      }
      const weight = bo.weight === undefined ? undefined : Number(bo.weight);
      if (
        weight !== undefined &&
        (!Number.isInteger(weight) || weight < 0 || weight > MAGLEV_WEIGHT_MAX)
      ) {
        fail(
          `${bp}.weight`,
          `service "${name}": ${
            JSON.stringify(bo.weight)
          } is not an integer in 0..${MAGLEV_WEIGHT_MAX}`,
        );
      }
      return {
        address: addr(bo.address, `${bp}.address`),
        portName: (bo.portName as string | undefined) ?? "",
        state,
        weight,
        zone: bo.zone as string | undefined,
      };
    });
    // An entry with only backends adds to a service defined elsewhere, whose M is unknown here.
    if (frontends.length > 0 || maglevSize !== undefined) {
      checkBuildable(name, `${p}.backends`, backends, maglevSize);
    }
    let healthCheck: HealthCheck | undefined;
    if (o.healthCheck !== undefined) {
      try {
        healthCheck = parseHealthCheck(o.healthCheck, `${p}.healthCheck`);
      } catch (e) {
        if (!(e instanceof HealthCheckError)) throw e;
        throw new ConfigError(`Invalid config at ${e.message} (service "${name}")`, { cause: e });
      }
    }
    services.push({
      name,
      flowKeyMode,
      maglevSize,
      frontends,
      backends,
      ...(healthCheck ? { healthCheck } : {}),
      ...(o.draining === true ? { draining: true } : {}),
    });
  });
  const redirects = list(r.redirects, "$.redirects").map((x, i) => {
    const o = x as Record<string, unknown>;
    return {
      service: str(o?.service, `$.redirects[${i}].service`),
      target: str(o?.target, `$.redirects[${i}].target`),
    };
  });
  return { services, redirects };
}

/** Writes file configs as one source, replacing the previously loaded one. */
export class FileSource {
  readonly src: SourceWriter;
  #previous: FileConfig = { services: [], redirects: [] };
  #initDone: ((txn: WriteTxn) => void) | null = null;

  /**
   * Registers the source as an initializer of the LB tables (unless `initializer: false`):
   * the reconciler will not prune the maps until the first config has loaded, so a restarted
   * agent whose config is unreadable keeps serving what the maps hold. Construct it before
   * starting the control plane.
   */
  constructor(writer: Writer, options: { source?: string; initializer?: boolean } = {}) {
    this.src = writer.source(options.source ?? "file");
    if (options.initializer ?? true) {
      const txn = this.src.txn();
      this.#initDone = this.src.registerInitializer(txn);
      txn.commit();
    }
  }

  /** Parses `text` and applies it in one transaction. */
  load(text: string, options: { format?: "yaml" | "json" } = {}): FileConfig {
    const cfg = parseConfig(text, options);
    const txn = this.src.txn();
    try {
      this.applyIn(txn, cfg);
      this.#initDone?.(txn);
      this.#initDone = null;
      txn.commit();
    } finally {
      txn.abort();
    }
    return cfg;
  }

  /** Reads a file (JSON if it ends in `.json`, else YAML) and applies it. */
  async loadFile(path: string): Promise<FileConfig> {
    const text = await Deno.readTextFile(path);
    return this.load(text, { format: path.endsWith(".json") ? "json" : "yaml" });
  }

  /** Applies `cfg` inside `txn`, removing what the previous config had and this one lacks. */
  applyIn(txn: WriteTxn, cfg: FileConfig): void {
    const names = new Set(cfg.services.map((s) => s.name));
    for (const s of this.#previous.services) {
      if (!names.has(s.name)) {
        this.src.deleteService(txn, s.name);
        this.src.setBackends(txn, { service: s.name, backends: [] });
      }
    }
    const redirected = new Set(cfg.redirects.map((r) => r.service));
    for (const r of this.#previous.redirects) {
      if (!redirected.has(r.service)) this.src.removeLocalRedirect(txn, r.service);
    }
    for (const r of cfg.redirects) this.src.setLocalRedirect(txn, r);
    for (const s of cfg.services) {
      if (s.frontends.length > 0 || !this.#backendsOnly(s)) this.src.upsertService(txn, s);
      this.src.setBackends(txn, { service: s.name, backends: s.backends });
    }
    this.#previous = cfg;
  }

  #backendsOnly(s: FileConfig["services"][number]): boolean {
    // A service entry with only backends contributes backends to a service defined elsewhere.
    return s.frontends.length === 0 && s.backends.length > 0;
  }
}
