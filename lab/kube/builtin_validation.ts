/**
 * The real server's hand-written validation, for the fields Holdfast's controller and agents
 * write: Services (`service_validation.ts`), EndpointSlice address types (immutable),
 * at most 1,000 endpoints and 100 ports, 1..100 addresses per endpoint, ports (names RFC 1123
 * labels); events.k8s.io
 * Events' required fields, Lease durations and transitions, ConfigMap keys. ObjectMeta is
 * `meta_validation.ts`.
 * Messages name the field as the real server does (`spec.ports[0].port: Invalid value: 0: must
 * be between 1 and 65535, inclusive`). Other kinds get only the field checks of
 * `builtin_schema.ts`.
 *
 * @module
 */
import { isObj, type Obj } from "./resources.ts";
import type { StatusCause } from "./status.ts";
import { Causes, IPV4, isIp6, list } from "./causes.ts";
import { validateService } from "./service_validation.ts";
import { dns1123Label } from "./meta_validation.ts";

/** The most endpoints, and ports, one EndpointSlice may hold. */
const MAX_ENDPOINTS = 1000, MAX_PORTS = 100, MAX_ADDRESSES = 100;

function endpointSlice(c: Causes, obj: Obj, old?: Obj): void {
  c.oneOf("addressType", obj.addressType, ["IPv4", "IPv6", "FQDN"]);
  if (obj.addressType === undefined) c.required("addressType");
  if (old) c.immutable("addressType", obj.addressType, old.addressType);
  if (obj.endpoints === undefined) c.required("endpoints");
  const endpoints = list(obj.endpoints);
  if (endpoints.length > MAX_ENDPOINTS) c.tooMany("endpoints", endpoints.length, MAX_ENDPOINTS);
  const ports = list(obj.ports);
  if (ports.length > MAX_PORTS) c.tooMany("ports", ports.length, MAX_PORTS);
  endpoints.forEach((e, i) => {
    const addresses = Array.isArray(e.addresses) ? e.addresses : [];
    if (addresses.length === 0) {
      c.list.push({
        reason: "FieldValueRequired",
        field: `endpoints[${i}].addresses`,
        message: "Required value: must contain at least 1 address",
      });
    } else if (addresses.length > MAX_ADDRESSES) {
      c.tooMany(`endpoints[${i}].addresses`, addresses.length, MAX_ADDRESSES);
    }
    addresses.forEach((a, j) => {
      if (obj.addressType === "IPv4" && !IPV4.test(String(a))) {
        c.invalid(`endpoints[${i}].addresses[${j}]`, a, "must be a valid IPv4 address");
      } else if (obj.addressType === "IPv6" && !isIp6(a)) {
        c.invalid(`endpoints[${i}].addresses[${j}]`, a, "must be a valid IPv6 address");
      }
    });
  });
  ports.forEach((p, i) => {
    c.port(`ports[${i}].port`, p.port, false);
    c.oneOf(`ports[${i}].protocol`, p.protocol, ["TCP", "UDP", "SCTP"]);
    if (typeof p.name === "string" && p.name) {
      for (const why of dns1123Label(p.name)) c.invalid(`ports[${i}].name`, p.name, why);
    }
  });
}

function eventV1(c: Causes, obj: Obj): void {
  for (const f of ["eventTime", "reportingController", "reportingInstance", "action", "reason"]) {
    if (obj[f] === undefined || obj[f] === "") c.required(f);
  }
  c.oneOf("type", obj.type, ["Normal", "Warning"]);
  if (typeof obj.note === "string" && new TextEncoder().encode(obj.note).length > 1024) {
    c.list.push({
      reason: "FieldValueTooLong",
      field: "note",
      message: "Too long: may not be more than 1024 bytes",
    });
  }
}

function lease(c: Causes, obj: Obj): void {
  const spec = (obj.spec ?? {}) as Obj;
  const d = spec.leaseDurationSeconds, t = spec.leaseTransitions;
  if (d !== undefined && (!Number.isInteger(d) || (d as number) <= 0)) {
    c.invalid("spec.leaseDurationSeconds", d, "must be greater than 0");
  }
  if (typeof t === "number" && t < 0) {
    c.invalid("spec.leaseTransitions", t, "must be greater than or equal to 0");
  }
}

/** `IsConfigMapKey`: keys of ConfigMap `data`/`binaryData`, not in both. */
function configMap(c: Causes, obj: Obj): void {
  const data = isObj(obj.data) ? obj.data : {};
  const binary = isObj(obj.binaryData) ? obj.binaryData : {};
  for (const [field, bag] of [["data", data], ["binaryData", binary]] as const) {
    for (const key of Object.keys(bag)) {
      for (const why of configMapKey(key)) c.invalid(`${field}[${key}]`, key, why);
      if (field === "data" && Object.hasOwn(binary, key)) {
        c.invalid(`data[${key}]`, key, "duplicate of key present in binaryData");
      }
    }
  }
}

function configMapKey(key: string): string[] {
  const out = key.length > 253 ? ["must be no more than 253 characters"] : [];
  if (!/^[-._a-zA-Z0-9]+$/.test(key)) {
    out.push(
      "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
    );
  }
  if (key === "." || key === "..") out.push(`must not be '${key}'`);
  else if (key.startsWith("..")) out.push("must not start with '..'");
  return out;
}

/**
 * Validation failures of a built-in object of `group`/`kind` (empty when valid or unchecked);
 * `old` is the stored object on an update (immutable fields).
 */
export function validateBuiltin(group: string, kind: string, obj: Obj, old?: Obj): StatusCause[] {
  const c = new Causes();
  if (group === "" && kind === "Service") validateService(c, obj, old);
  else if (group === "discovery.k8s.io" && kind === "EndpointSlice") endpointSlice(c, obj, old);
  else if (group === "events.k8s.io" && kind === "Event") eventV1(c, obj);
  else if (group === "coordination.k8s.io" && kind === "Lease") lease(c, obj);
  else if (group === "" && kind === "ConfigMap") configMap(c, obj);
  return c.list;
}
