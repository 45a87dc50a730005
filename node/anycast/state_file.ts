/**
 * The anycast file source: services and pods from a YAML or JSON file the agent watches (the
 * stand-in for the Kubernetes watch, as node/lb/sources/file_source.ts is for services).
 * A file that fails to parse is refused whole and the previous state stays: a typo must not
 * withdraw every address.
 *
 * ```yaml
 * services:
 *   - name: default/web                 # namespace/name
 *     mode: anycast                     # anycast (default) | stateful: stateful ones are skipped
 *     addresses: [10.0.100.10]
 *     ports: [80/TCP]                   # optional, informational
 *     selector: { app: web }            # Service.spec.selector
 *     podSelector:                      # optional metav1.LabelSelector, ANDed
 *       matchExpressions: [{ key: track, operator: NotIn, values: [canary] }]
 * pods:
 *   - { name: default/web-1, node: node1, labels: { app: web }, ready: true, terminating: false }
 * ```
 *
 * @module
 */

import { parse as parseYaml } from "yaml";
import { isIpv4 } from "../../lib/ipv4.ts";
import { formatIpv6, ipv6Bytes, isIpv6 } from "../../lib/ipv6.ts";
import { compileLabelSelector, type LabelSelector } from "../../lib/label_selector.ts";
import type { AnycastService, LocalPod } from "./model.ts";

/** Services (anycast mode only) and pods from one file. */
export interface AnycastState {
  readonly services: readonly AnycastService[];
  readonly pods: readonly LocalPod[];
}

/** Thrown for a malformed state file; the message names the offending path. */
export class AnycastStateError extends Error {
  override name = "AnycastStateError";
}

function fail(path: string, why: string, cause?: unknown): never {
  throw new AnycastStateError(`Invalid anycast state at ${path}: ${why}`, { cause });
}

function name(v: unknown, path: string): string {
  if (typeof v !== "string" || !/^[a-z0-9.-]+\/[a-z0-9.-]+$/.test(v)) {
    fail(path, `expected "namespace/name", got ${JSON.stringify(v)}`);
  }
  return v;
}

function labels(v: unknown, path: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (typeof v !== "object" || Array.isArray(v)) fail(path, "expected a map of strings");
  for (const [k, x] of Object.entries(v)) {
    if (typeof x !== "string") fail(`${path}.${k}`, `expected a string, got ${JSON.stringify(x)}`);
  }
  return v as Record<string, string>;
}

function list(v: unknown, path: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) fail(path, "expected a list");
  return v;
}

function service(raw: unknown, p: string): AnycastService | null {
  const o = (raw ?? {}) as Record<string, unknown>;
  const n = name(o.name, `${p}.name`);
  const mode = String(o.mode ?? "anycast").toLowerCase();
  if (mode !== "anycast" && mode !== "stateful") {
    fail(`${p}.mode`, `${JSON.stringify(o.mode)} is not anycast or stateful`);
  }
  const addresses = list(o.addresses, `${p}.addresses`).map((a, i) => {
    if (typeof a === "string" && isIpv4(a)) return a;
    // IPv6 as `ip` lists it on lo (RFC 5952), so a held address matches its service's.
    if (typeof a === "string" && a.includes(":") && isIpv6(a)) return formatIpv6(ipv6Bytes(a));
    fail(`${p}.addresses[${i}]`, `${JSON.stringify(a)} is not an IPv4 or IPv6 address`);
  });
  let podSelector: LabelSelector | undefined;
  if (o.podSelector !== undefined) {
    podSelector = o.podSelector as LabelSelector;
    try {
      compileLabelSelector(podSelector);
    } catch (e) {
      fail(`${p}.podSelector`, (e as Error).message, e);
    }
  }
  if (mode !== "anycast") return null;
  return {
    name: n,
    addresses,
    selector: labels(o.selector, `${p}.selector`),
    ...(podSelector ? { podSelector } : {}),
    ports: list(o.ports, `${p}.ports`).map(String),
  };
}

function pod(raw: unknown, p: string): LocalPod {
  const o = (raw ?? {}) as Record<string, unknown>;
  for (const flag of ["ready", "terminating"]) {
    if (o[flag] !== undefined && typeof o[flag] !== "boolean") {
      fail(`${p}.${flag}`, `expected true or false, got ${JSON.stringify(o[flag])}`);
    }
  }
  if (typeof o.node !== "string" || o.node === "") {
    fail(`${p}.node`, `expected a node name, got ${JSON.stringify(o.node)}`);
  }
  return {
    name: name(o.name, `${p}.name`),
    node: o.node,
    labels: labels(o.labels, `${p}.labels`),
    ready: o.ready === true,
    terminating: o.terminating === true,
  };
}

/**
 * Parses a state file (YAML, a superset of JSON).
 *
 * @example
 * ```ts
 * import { parseAnycastState } from "./state_file.ts";
 * const s = parseAnycastState(`
 * services: [{ name: default/web, addresses: [10.0.100.10], selector: { app: web } },
 *            { name: default/db, mode: stateful, addresses: [10.0.100.20] }]
 * pods: [{ name: default/web-1, node: n1, labels: { app: web }, ready: true }]
 * `);
 * if (s.services.length !== 1 || s.pods[0]?.terminating !== false) throw new Error();
 * ```
 */
export function parseAnycastState(text: string): AnycastState {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (e) {
    fail("$", `not YAML or JSON: ${(e as Error).message}`, e);
  }
  const o = (raw ?? {}) as Record<string, unknown>;
  if (typeof o !== "object" || Array.isArray(o)) fail("$", "expected an object");
  const services = list(o.services, "$.services").map((s, i) => service(s, `$.services[${i}]`))
    .filter((s): s is AnycastService => s !== null);
  const pods = list(o.pods, "$.pods").map((x, i) => pod(x, `$.pods[${i}]`));
  return { services, pods };
}
