/**
 * What the real API server does to a Service update before validating it (the Service
 * strategy's `PrepareForUpdate`): values the client left out are patched from the stored object
 * (`patchAllocatedValues`: cluster IPs, node ports by port name), `spec.clusterIP` and
 * `spec.clusterIPs` are made to agree (`NormalizeClusterIPs`), and fields the new type no longer
 * uses are dropped when the client did not change them (`dropTypeDependentFields`): leaving
 * LoadBalancer drops `loadBalancerClass`, `allocateLoadBalancerNodePorts` and
 * `status.loadBalancer`; leaving NodePort/LoadBalancer drops node ports; leaving the externally
 * accessible types drops `externalTrafficPolicy`; ExternalName drops cluster IPs and families.
 *
 * @module
 */
import { isObj, type Obj } from "./resources.ts";
import { externallyAccessible } from "./service_validation.ts";

const needsClusterIp = (s: Obj) => s.type !== "ExternalName";
const needsNodePort = (s: Obj) => s.type === "NodePort" || s.type === "LoadBalancer";
const needsHcNodePort = (s: Obj) =>
  s.type === "LoadBalancer" && s.externalTrafficPolicy === "Local";
const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

function ports(spec: Obj): Obj[] {
  return Array.isArray(spec.ports) ? spec.ports.filter(isObj) : [];
}

function nodePorts(spec: Obj): Set<number> {
  return new Set(
    ports(spec).map((p) => p.nodePort).filter((n): n is number => typeof n === "number" && n > 0),
  );
}

function clusterIps(spec: Obj): unknown[] {
  return Array.isArray(spec.clusterIPs) ? spec.clusterIPs : [];
}

function patchAllocatedValues(spec: Obj, old: Obj): void {
  if (needsClusterIp(old) && needsClusterIp(spec)) {
    if (!spec.clusterIP && old.clusterIP) spec.clusterIP = old.clusterIP;
    if (clusterIps(spec).length === 0 && clusterIps(old).length > 0) {
      spec.clusterIPs = old.clusterIPs;
    }
  }
  if (needsNodePort(old) && needsNodePort(spec)) {
    const mine = nodePorts(spec);
    const used = new Set([...nodePorts(old)].filter((n) => mine.has(n)));
    const byName = new Map(ports(old).map((p) => [String(p.name ?? ""), p.nodePort]));
    for (const p of ports(spec)) {
      if (p.nodePort !== undefined && p.nodePort !== 0) continue;
      const was = byName.get(String(p.name ?? ""));
      if (typeof was === "number" && was > 0 && !used.has(was)) p.nodePort = was;
    }
  }
  if (needsHcNodePort(old) && needsHcNodePort(spec) && !spec.healthCheckNodePort) {
    if (old.healthCheckNodePort) spec.healthCheckNodePort = old.healthCheckNodePort;
  }
}

function normalizeClusterIps(spec: Obj, old: Obj): void {
  if (
    clusterIps(old).length > 0 && clusterIps(spec).length === 0 && old.clusterIP === spec.clusterIP
  ) {
    spec.clusterIPs = old.clusterIPs;
  }
  if ((old.clusterIP ?? "") === (spec.clusterIP ?? "")) return;
  if (!same(clusterIps(old), clusterIps(spec))) return; // changed both: validation decides
  if (old.clusterIP && !spec.clusterIP) delete spec.clusterIPs;
  else spec.clusterIPs = [spec.clusterIP];
}

function dropTypeDependentFields(svc: Obj, spec: Obj, old: Obj): void {
  if (needsClusterIp(old) && !needsClusterIp(spec)) {
    if (same(clusterIps(old), clusterIps(spec)) && same(old.clusterIP, spec.clusterIP)) {
      delete spec.clusterIP;
      delete spec.clusterIPs;
    }
    if (same(old.ipFamilies, spec.ipFamilies)) delete spec.ipFamilies;
    if (same(old.ipFamilyPolicy, spec.ipFamilyPolicy)) delete spec.ipFamilyPolicy;
  }
  if (needsNodePort(old) && !needsNodePort(spec)) {
    const before = nodePorts(old);
    if ([...nodePorts(spec)].every((n) => before.has(n))) {
      for (const p of ports(spec)) delete p.nodePort;
    }
  }
  if (
    needsHcNodePort(old) && !needsHcNodePort(spec) &&
    same(old.healthCheckNodePort, spec.healthCheckNodePort)
  ) {
    delete spec.healthCheckNodePort;
  }
  if (old.type === "LoadBalancer" && spec.type !== "LoadBalancer") {
    const a = old.allocateLoadBalancerNodePorts, b = spec.allocateLoadBalancerNodePorts;
    if (a !== undefined && b !== undefined && a === b) delete spec.allocateLoadBalancerNodePorts;
    if (same(old.loadBalancerClass, spec.loadBalancerClass)) delete spec.loadBalancerClass;
  }
  if (externallyAccessible(old) && !externallyAccessible(spec)) {
    if (same(old.externalTrafficPolicy, spec.externalTrafficPolicy)) {
      delete spec.externalTrafficPolicy;
    }
  }
  if (spec.type !== "LoadBalancer" && isObj(svc.status)) svc.status.loadBalancer = {};
}

/** The real server's changes to `svc` (a Service update of the main resource) given `old`. */
export function prepareServiceUpdate(svc: Obj, old: Obj): void {
  const spec = (svc.spec ??= {}) as Obj;
  spec.type ??= "ClusterIP"; // defaulted as the real server decodes it
  const before = isObj(old.spec) ? old.spec : {};
  patchAllocatedValues(spec, before);
  normalizeClusterIps(spec, before);
  dropTypeDependentFields(svc, spec, before);
}
