/**
 * The real server's hand-written validation, for the fields Holdfast's controller and agents
 * write: Service ports, type, IP families (`ipFamilies`, `ipFamilyPolicy`, `loadBalancerIP`)
 * and status (load-balancer ingress, conditions), EndpointSlice
 * address types, addresses and ports, events.k8s.io Events' required fields, Lease durations.
 * Messages name the field as the real server does (`spec.ports[0].port: Invalid value: 0: must
 * be between 1 and 65535, inclusive`). Other kinds get only the field checks of
 * `builtin_schema.ts`.
 *
 * @module
 */
import { isIpv6 } from "../../lib/ipv6.ts";
import { isObj, type Obj } from "./resources.ts";
import type { StatusCause } from "./status.ts";

const IPV4 = /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
const isIp6 = (v: unknown) => typeof v === "string" && v.includes(":") && isIpv6(v);
const isIp = (v: unknown) => IPV4.test(String(v)) || isIp6(v);
const REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;

class Causes {
  readonly list: StatusCause[] = [];
  required(field: string): void {
    this.list.push({ reason: "FieldValueRequired", field, message: "Required value" });
  }
  invalid(field: string, value: unknown, why: string): void {
    this.list.push({
      reason: "FieldValueInvalid",
      field,
      message: `Invalid value: ${JSON.stringify(value)}: ${why}`,
    });
  }
  oneOf(field: string, value: unknown, allowed: readonly string[]): void {
    if (value === undefined || allowed.includes(String(value))) return;
    const supported = allowed.map((a) => JSON.stringify(a)).join(", ");
    this.list.push({
      reason: "FieldValueNotSupported",
      field,
      message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${supported}`,
    });
  }
  port(field: string, value: unknown, required: boolean): void {
    if (value === undefined) {
      if (required) this.required(field);
    } else if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 65535) {
      this.invalid(field, value, "must be between 1 and 65535, inclusive");
    }
  }
}

function list(v: unknown): Obj[] {
  return Array.isArray(v) ? v.filter(isObj) : [];
}

function conditions(c: Causes, path: string, value: unknown): void {
  list(value).forEach((cond, i) => {
    const at = `${path}[${i}]`;
    if (!cond.type) c.required(`${at}.type`);
    c.oneOf(`${at}.status`, cond.status, ["True", "False", "Unknown"]);
    if (cond.status === undefined) c.required(`${at}.status`);
    if (!cond.lastTransitionTime) c.required(`${at}.lastTransitionTime`);
    if (!cond.reason) c.required(`${at}.reason`);
    else if (!REASON.test(String(cond.reason))) {
      c.invalid(
        `${at}.reason`,
        cond.reason,
        `a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'`,
      );
    }
  });
}

function service(c: Causes, obj: Obj): void {
  const spec = (obj.spec ?? {}) as Obj;
  c.oneOf("spec.type", spec.type, ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]);
  const ports = list(spec.ports);
  if (ports.length === 0 && spec.type !== "ExternalName" && spec.clusterIP !== "None") {
    c.required("spec.ports");
  }
  const seen = new Set<string>();
  ports.forEach((p, i) => {
    c.port(`spec.ports[${i}].port`, p.port, true);
    c.oneOf(`spec.ports[${i}].protocol`, p.protocol, ["TCP", "UDP", "SCTP"]);
    if (ports.length > 1 && !p.name) c.required(`spec.ports[${i}].name`);
    const key = `${p.port}/${p.protocol ?? "TCP"}`;
    if (seen.has(key)) {
      c.list.push({
        reason: "FieldValueDuplicate",
        field: `spec.ports[${i}]`,
        message: `Duplicate value: "${key}"`,
      });
    }
    seen.add(key);
    if (typeof p.targetPort === "number") {
      c.port(`spec.ports[${i}].targetPort`, p.targetPort, false);
    }
  });
  families(c, spec);
  if (
    spec.loadBalancerIP !== undefined && spec.loadBalancerIP !== "" && !isIp(spec.loadBalancerIP)
  ) {
    c.invalid("spec.loadBalancerIP", spec.loadBalancerIP, "must be a valid IP address");
  }
  const status = (obj.status ?? {}) as Obj;
  list(((status.loadBalancer ?? {}) as Obj).ingress).forEach((ing, i) => {
    const at = `status.loadBalancer.ingress[${i}]`;
    if (ing.ip !== undefined && !isIp(ing.ip)) {
      c.invalid(`${at}.ip`, ing.ip, "must be a valid IP address");
    }
    c.oneOf(`${at}.ipMode`, ing.ipMode, ["VIP", "Proxy"]);
    if (ing.ipMode !== undefined && ing.ip === undefined) c.required(`${at}.ip`);
  });
  conditions(c, "status.conditions", status.conditions);
}

function families(c: Causes, spec: Obj): void {
  const policies = ["SingleStack", "PreferDualStack", "RequireDualStack"];
  c.oneOf("spec.ipFamilyPolicy", spec.ipFamilyPolicy, policies);
  if (!Array.isArray(spec.ipFamilies)) return;
  const families = spec.ipFamilies as unknown[];
  families.forEach((f, i) => {
    c.oneOf(`spec.ipFamilies[${i}]`, f, ["IPv4", "IPv6"]);
    if (families.indexOf(f) < i) {
      c.list.push({
        reason: "FieldValueDuplicate",
        field: `spec.ipFamilies[${i}]`,
        message: `Duplicate value: ${JSON.stringify(f)}`,
      });
    }
  });
  if (families.length > 2) {
    c.list.push({
      reason: "FieldValueTooMany",
      field: "spec.ipFamilies",
      message: `Too many: ${families.length}: must have at most 2 items`,
    });
  } else if (families.length === 2 && spec.ipFamilyPolicy === "SingleStack") {
    c.invalid(
      "spec.ipFamilyPolicy",
      spec.ipFamilyPolicy,
      "must be 'RequireDualStack' or 'PreferDualStack' when multiple 'ipFamilies' are specified",
    );
  }
}

function endpointSlice(c: Causes, obj: Obj): void {
  c.oneOf("addressType", obj.addressType, ["IPv4", "IPv6", "FQDN"]);
  if (obj.addressType === undefined) c.required("addressType");
  if (obj.endpoints === undefined) c.required("endpoints");
  list(obj.endpoints).forEach((e, i) => {
    const addresses = Array.isArray(e.addresses) ? e.addresses : [];
    if (addresses.length < 1 || addresses.length > 100) {
      c.invalid(
        `endpoints[${i}].addresses`,
        addresses.length,
        "must contain at least 1 and at most 100 addresses",
      );
    }
    addresses.forEach((a, j) => {
      if (obj.addressType === "IPv4" && !IPV4.test(String(a))) {
        c.invalid(`endpoints[${i}].addresses[${j}]`, a, "must be a valid IPv4 address");
      } else if (obj.addressType === "IPv6" && !isIp6(a)) {
        c.invalid(`endpoints[${i}].addresses[${j}]`, a, "must be a valid IPv6 address");
      }
    });
  });
  list(obj.ports).forEach((p, i) => {
    c.port(`ports[${i}].port`, p.port, false);
    c.oneOf(`ports[${i}].protocol`, p.protocol, ["TCP", "UDP", "SCTP"]);
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
  const d = spec.leaseDurationSeconds;
  if (d !== undefined && (!Number.isInteger(d) || (d as number) <= 0)) {
    c.invalid("spec.leaseDurationSeconds", d, "must be greater than 0");
  }
}

/** Validation failures of a built-in object of `group`/`kind` (empty when valid or unchecked). */
export function validateBuiltin(group: string, kind: string, obj: Obj): StatusCause[] {
  const c = new Causes();
  if (group === "" && kind === "Service") service(c, obj);
  else if (group === "discovery.k8s.io" && kind === "EndpointSlice") endpointSlice(c, obj);
  else if (group === "events.k8s.io" && kind === "Event") eventV1(c, obj);
  else if (group === "coordination.k8s.io" && kind === "Lease") lease(c, obj);
  return c.list;
}
