/**
 * The real server's hand-written Service validation (`ValidateService`,
 * `ValidateServiceUpdate`) for the fields Holdfast and its operators use: ports (1..65535,
 * names RFC 1123 labels, required when several, no duplicates; nodePort only off ClusterIP, no duplicate nodePort), type,
 * selector keys and values, `externalTrafficPolicy` (Cluster/Local, only on externally
 * accessible Services) and `internalTrafficPolicy`, `loadBalancerClass` (a qualified name, only
 * on LoadBalancer, may not change while LoadBalancer), `allocateLoadBalancerNodePorts` (only on
 * LoadBalancer), IP families, cluster IPs (valid IPs, the primary may not change),
 * `loadBalancerIP`, status ingress and conditions. Allocation (node ports and cluster IPs in use
 * or out of range) is `service_alloc.ts`.
 *
 * @module
 */
import type { Obj } from "./resources.ts";
import { Causes, conditions, isIp, list } from "./causes.ts";
import { dns1123Label, goValue, qualifiedName, validateLabels } from "./meta_validation.ts";

const IP_EXAMPLE = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

/** `ExternallyAccessible`: LoadBalancer, NodePort, or ClusterIP with external IPs. */
export function externallyAccessible(spec: Obj): boolean {
  return spec.type === "LoadBalancer" || spec.type === "NodePort" ||
    (spec.type === "ClusterIP" && Array.isArray(spec.externalIPs) && spec.externalIPs.length > 0);
}

/** `ValidateService` (and `ValidateServiceUpdate` with `old`) for the fields listed above. */
export function validateService(c: Causes, obj: Obj, old?: Obj): void {
  const spec = (obj.spec ?? {}) as Obj;
  c.oneOf("spec.type", spec.type, ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]);
  const ports = list(spec.ports);
  if (ports.length === 0 && spec.type !== "ExternalName" && spec.clusterIP !== "None") {
    c.required("spec.ports");
  }
  const seen = new Set<string>(), names = new Set<string>();
  ports.forEach((p, i) => {
    c.port(`spec.ports[${i}].port`, p.port, true);
    c.oneOf(`spec.ports[${i}].protocol`, p.protocol, ["TCP", "UDP", "SCTP"]);
    if (ports.length > 1 && !p.name) c.required(`spec.ports[${i}].name`);
    else if (p.name) {
      const name = String(p.name);
      for (const why of dns1123Label(name)) c.invalid(`spec.ports[${i}].name`, name, why);
      if (names.has(name)) c.duplicate(`spec.ports[${i}].name`, name);
      names.add(name);
    }
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
  nodePorts(c, spec, ports);
  families(c, spec);
  clusterIps(c, spec, (old?.spec ?? undefined) as Obj | undefined);
  trafficPolicies(c, spec);
  loadBalancerFields(c, spec, (old?.spec ?? undefined) as Obj | undefined);
  c.list.push(...validateLabels(spec.selector, "spec.selector"));
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

function nodePorts(c: Causes, spec: Obj, ports: Obj[]): void {
  const seen = new Set<string>();
  ports.forEach((p, i) => {
    if (p.nodePort === undefined || p.nodePort === 0) return;
    const at = `spec.ports[${i}].nodePort`;
    if (spec.type === "ClusterIP") {
      c.forbidden(at, "may not be used when `type` is 'ClusterIP'");
      return;
    }
    c.port(at, p.nodePort, false);
    const key = `${p.protocol ?? "TCP"}/${p.nodePort}`;
    if (seen.has(key)) c.duplicate(at, p.nodePort);
    seen.add(key);
  });
}

function clusterIps(c: Causes, spec: Obj, old: Obj | undefined): void {
  if (spec.type === "ExternalName") return;
  const ips = Array.isArray(spec.clusterIPs) ? spec.clusterIPs as unknown[] : [];
  ips.forEach((ip, i) => {
    if (ip === "None" && i === 0) return;
    if (!isIp(ip)) c.invalid(`spec.clusterIPs[${i}]`, ip, IP_EXAMPLE);
  });
  if (ips[0] === "None" && spec.type === "LoadBalancer") {
    c.invalid("spec.clusterIPs[0]", ips[0], "may not be set to 'None' for LoadBalancer services");
  }
  if (!old || old.type === "ExternalName") return;
  const before = Array.isArray(old.clusterIPs) ? old.clusterIPs as unknown[] : [];
  if (before.length > 0 && ips.length > 0 && before[0] !== ips[0]) {
    c.list.push({
      reason: "FieldValueInvalid",
      field: "spec.clusterIPs[0]",
      message: `Invalid value: ${goValue(ips)}: may not change once set`,
    });
  }
}

function trafficPolicies(c: Causes, spec: Obj): void {
  const etp = spec.externalTrafficPolicy;
  const hc = spec.healthCheckNodePort;
  if (hc !== undefined && hc !== 0 && !(spec.type === "LoadBalancer" && etp === "Local")) {
    c.forbidden(
      "spec.healthCheckNodePort",
      "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
    );
  }
  if (externallyAccessible(spec)) {
    if (etp === undefined || etp === "") c.required("spec.externalTrafficPolicy");
    else c.oneOf("spec.externalTrafficPolicy", etp, ["Cluster", "Local"]);
  } else if (etp !== undefined && etp !== "") {
    c.invalid(
      "spec.externalTrafficPolicy",
      etp,
      "may only be set for externally-accessible services",
    );
  }
  if (spec.type !== "ExternalName") {
    c.oneOf("spec.internalTrafficPolicy", spec.internalTrafficPolicy, ["Cluster", "Local"]);
  }
}

function loadBalancerFields(c: Causes, spec: Obj, old: Obj | undefined): void {
  const lb = spec.type === "LoadBalancer";
  const cls = spec.loadBalancerClass;
  if (old?.type === "LoadBalancer" && lb && (old.loadBalancerClass ?? null) !== (cls ?? null)) {
    c.invalid("spec.loadBalancerClass", cls ?? null, "may not change once set");
  }
  if (cls !== undefined && cls !== null) {
    if (!lb) {
      c.forbidden("spec.loadBalancerClass", "may only be used when `type` is 'LoadBalancer'");
    } else {
      for (const why of qualifiedName(String(cls))) c.invalid("spec.loadBalancerClass", cls, why);
    }
  }
  if (spec.allocateLoadBalancerNodePorts !== undefined && !lb) {
    c.forbidden(
      "spec.allocateLoadBalancerNodePorts",
      "may only be used when `type` is 'LoadBalancer'",
    );
  }
}
