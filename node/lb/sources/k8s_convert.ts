/**
 * Pure conversion of Kubernetes Service and EndpointSlice objects into LB model inputs.
 * No API access here: the live watch (Kubernetes issue) feeds objects to {@linkcode K8sSource}.
 *
 * Rules:
 * - Frontends: every LoadBalancer ingress IP and `spec.externalIPs` entry, IPv4 or IPv6 (as
 *   `[IPv6]:PORT/PROTO`, RFC 5952), × every TCP/UDP port (port name kept to match backends);
 *   `spec.clusterIP` too with `includeClusterIP`.
 * - Flow keying: `spec.sessionAffinity: ClientIP` or annotation `holdfast.io/flow-key: client-ip`
 *   → per client address; otherwise per connection. `holdfast.io/maglev-size` sets M (a prime
 *   in 251..131071; default 16381, docs/maglev.md).
 * - Health check: `holdfast.io/health-check: tcp|http` and `holdfast.io/health-check-*`
 *   settings (`node/lb/sources/health_check.ts`) → `healthCheck`, probed by the LB nodes.
 * - Backends: IPv4 and IPv6 EndpointSlices (label `kubernetes.io/service-name`; FQDN slices
 *   skipped), every endpoint address × every port. Ready and not terminating → active;
 *   terminating and serving → terminating; not ready (or terminating and not serving) →
 *   quarantined: no new flow picks it, but its established flows stay, as kube-proxy's conntrack
 *   entries outlive a readiness failure — a readiness blip (a flapping probe, an app that closes
 *   its listener on SIGTERM while it drains) must not cut live connections. A backend's flows
 *   go only when its endpoint leaves the slice (the pod is gone). Zone from the endpoint. Which
 *   frontend takes which family's backends is `node/lb/tables/select.ts`'s rule: a service with
 *   frontends of both families (dual stack) pairs each frontend with its own family's slices.
 *
 * The types below are the structural subset of `@kubernetes/client-node`'s V1Service and
 * V1EndpointSlice that the conversion reads, so real objects can be passed as they are.
 *
 * @module
 */

import type { FlowKeyMode } from "../maps/lbmaps.ts";
import { scanIPv4 } from "../tables/address.ts";
import { formatIpv6, ipv6Bytes } from "../../../lib/ipv6.ts";
import type { BackendInput, FrontendInput, ServiceInput } from "../tables/writer.ts";
import { checkMaglevSize } from "../../../policy-as/host/maglev_input.ts";
import { type HealthCheck, HealthCheckError, healthCheckFromAnnotations } from "./health_check.ts";

/** Object metadata fields used. */
export interface K8sMeta {
  name?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** The subset of V1Service read. */
export interface K8sService {
  kind?: string;
  metadata?: K8sMeta;
  spec?: {
    type?: string;
    clusterIP?: string;
    externalIPs?: string[];
    sessionAffinity?: string;
    ports?: { name?: string; port: number; protocol?: string }[];
  };
  status?: { loadBalancer?: { ingress?: { ip?: string }[] } };
}

/** The subset of V1EndpointSlice read. */
export interface K8sEndpointSlice {
  kind?: string;
  metadata?: K8sMeta;
  addressType?: string;
  endpoints?: {
    addresses: string[];
    conditions?: { ready?: boolean; serving?: boolean; terminating?: boolean };
    zone?: string;
    nodeName?: string;
  }[];
  ports?: { name?: string; port?: number; protocol?: string }[];
}

/** Label linking an EndpointSlice to its Service. */
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";
/** Annotation selecting flow keying (`five-tuple` | `client-ip`). */
export const FLOW_KEY_ANNOTATION = "holdfast.io/flow-key";
/** Annotation setting the service's Maglev table size (a prime in 251..131071). */
export const MAGLEV_SIZE_ANNOTATION = "holdfast.io/maglev-size";

function isIPv4(s: string | undefined): s is string {
  return s !== undefined && scanIPv4(s) === s.length;
}

/** An IPv4 or IPv6 address as the host part of a model address (IPv6 in RFC 5952 brackets). */
function hostOf(s: string | undefined): string | undefined {
  if (s === undefined) return undefined;
  if (scanIPv4(s) === s.length) return s;
  if (!s.includes(":")) return undefined;
  try {
    return flat(["[", formatIpv6(ipv6Bytes(s)), "]"]);
  } catch {
    return undefined;
  }
}

/**
 * Concatenates into one flat string. Template literals build rope ("cons") strings that V8
 * keeps as trees of pieces: for the keys rows hold for their lifetime that costs ~3× the memory
 * (measured: 200 vs 57 bytes for an `IP:PORT/PROTO`); `join` allocates the flat string at once.
 */
export function flat(parts: readonly (string | number)[]): string {
  return parts.join("");
}

/** Thrown for objects that cannot be converted (missing name, bad annotation...). */
export class ConversionError extends Error {
  override name = "ConversionError";
}

/** `namespace/name` of an object. */
export function objectName(o: { metadata?: K8sMeta }): string {
  const ns = o.metadata?.namespace ?? "default", name = o.metadata?.name;
  if (!name) {
    throw new ConversionError(
      `Cannot convert object in namespace "${ns}": metadata.name is missing`,
    );
  }
  return flat([ns, "/", name]);
}

/** Converts a Service into a service with frontends (and its health check, if annotated). */
export function convertService(
  svc: K8sService,
  options: { includeClusterIP?: boolean } = {},
): ServiceInput & { readonly healthCheck?: HealthCheck } {
  const name = objectName(svc);
  const spec = svc.spec ?? {};
  const ann = svc.metadata?.annotations ?? {};
  let flowKeyMode: FlowKeyMode = spec.sessionAffinity === "ClientIP" ? "client-ip" : "five-tuple";
  const fk = ann[FLOW_KEY_ANNOTATION];
  if (fk !== undefined) {
    if (fk !== "five-tuple" && fk !== "client-ip") {
      throw new ConversionError(
        `Cannot convert service "${name}": annotation ${FLOW_KEY_ANNOTATION}="${fk}" is not five-tuple or client-ip`,
      );
    }
    flowKeyMode = fk;
  }
  let maglevSize: number | undefined;
  const ms = ann[MAGLEV_SIZE_ANNOTATION];
  if (ms !== undefined) {
    maglevSize = /^\s*\d+\s*$/.test(ms) ? Number(ms) : NaN;
    try {
      checkMaglevSize(maglevSize);
    } catch (e) {
      throw new ConversionError(
        `Cannot convert service "${name}": annotation ${MAGLEV_SIZE_ANNOTATION}="${ms}": ${
          (e as Error).message
        }`,
        { cause: e },
      );
    }
  }
  let healthCheck: HealthCheck | undefined;
  try {
    healthCheck = healthCheckFromAnnotations(ann);
  } catch (e) {
    if (!(e instanceof HealthCheckError)) throw e;
    throw new ConversionError(`Cannot convert service "${name}": ${e.message}`, { cause: e });
  }
  const ips: string[] = [];
  const add = (text: string | undefined) => {
    const ip = hostOf(text);
    if (ip !== undefined && !ips.includes(ip)) ips.push(ip);
  };
  if (spec.type === "LoadBalancer") {
    for (const i of svc.status?.loadBalancer?.ingress ?? []) add(i.ip);
  }
  for (const ip of spec.externalIPs ?? []) add(ip);
  if (options.includeClusterIP && spec.clusterIP !== "None") add(spec.clusterIP);
  const frontends: FrontendInput[] = [];
  for (const ip of ips) {
    for (const p of spec.ports ?? []) {
      const proto = p.protocol ?? "TCP";
      if (proto !== "TCP" && proto !== "UDP") continue;
      frontends.push({ address: flat([ip, ":", p.port, "/", proto]), portName: p.name ?? "" });
    }
  }
  return { name, flowKeyMode, maglevSize, frontends, ...(healthCheck ? { healthCheck } : {}) };
}

/** The service an EndpointSlice belongs to, or undefined if it is not a service's slice. */
export function sliceServiceName(slice: K8sEndpointSlice): string | undefined {
  const svc = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
  if (!svc) return undefined;
  return flat([slice.metadata?.namespace ?? "default", "/", svc]);
}

/** Converts an EndpointSlice into backends of its service (appending to `out`). */
export function convertEndpointSlice(
  slice: K8sEndpointSlice,
  out: BackendInput[] = [],
): BackendInput[] {
  const addressType = slice.addressType ?? "IPv4";
  if (addressType !== "IPv4" && addressType !== "IPv6") return out;
  // Per port, once per slice: the `:PORT/PROTO` suffix and the port name (null: skipped).
  const ports: { suffix: string; name: string }[] = [];
  for (const p of slice.ports ?? []) {
    if (p.port === undefined) continue;
    const proto = p.protocol ?? "TCP";
    if (proto !== "TCP" && proto !== "UDP") continue;
    ports.push({ suffix: flat([":", p.port, "/", proto]), name: p.name ?? "" });
  }
  if (ports.length === 0) return out;
  for (const ep of slice.endpoints ?? []) {
    const c = ep.conditions ?? {};
    let state: "active" | "terminating" | "quarantined";
    if (c.terminating === true) state = c.serving === false ? "quarantined" : "terminating";
    else state = c.ready === false ? "quarantined" : "active";
    for (const text of ep.addresses) {
      const ip = addressType === "IPv4" ? (isIPv4(text) ? text : undefined) : hostOf(text);
      if (ip === undefined || (addressType === "IPv6") !== ip.startsWith("[")) continue;
      for (const p of ports) {
        out.push({ address: flat([ip, p.suffix]), portName: p.name, state, zone: ep.zone });
      }
    }
  }
  return out;
}
