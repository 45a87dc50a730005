/**
 * The few built-in defaults and allocations clients notice: a Service's type, protocol,
 * targetPort, node ports, IP families and cluster IPs (a dual-stack cluster, IPv4 primary:
 * `ipFamilyPolicy` SingleStack by default, `ipFamilies` the primary family or both with a
 * dual-stack policy, one cluster IP per family from 10.96.0.0/16 and fd00:10:96::/112); a
 * Namespace's `kubernetes.io/metadata.name` label and
 * phase; a Pod's Pending phase; a Deployment's replicas; a CRD's Established status. Everything
 * else the real server defaults is left out (see docs/kube_test_server.md).
 *
 * @module
 */
import { isObj, type Obj, type ResourceType } from "./resources.ts";
import type { ServiceAllocator } from "./service_alloc.ts";

function defaultService(obj: Obj, previous: Obj | undefined, alloc: ServiceAllocator): void {
  const spec = (obj.spec ??= {}) as Obj;
  const old = (previous?.spec ?? {}) as Obj;
  spec.type ??= "ClusterIP";
  spec.sessionAffinity ??= "None";
  spec.internalTrafficPolicy ??= "Cluster";
  if (spec.type !== "ExternalName") defaultFamilies(spec, old, alloc);
  const wantsNodePorts = spec.type === "NodePort" ||
    (spec.type === "LoadBalancer" && spec.allocateLoadBalancerNodePorts !== false);
  if (spec.type === "LoadBalancer") spec.allocateLoadBalancerNodePorts ??= true;
  if (spec.type === "LoadBalancer" || spec.type === "NodePort") {
    spec.externalTrafficPolicy ??= "Cluster";
  }
  const ports = (Array.isArray(spec.ports) ? spec.ports : []).filter(isObj);
  // Explicit node ports (and those an update kept, service_strategy.ts) first, then new ones.
  const taken = new Set(
    ports.map((p) => p.nodePort).filter((n): n is number => typeof n === "number" && n > 0),
  );
  for (const p of ports) {
    p.protocol ??= "TCP";
    p.targetPort ??= p.port;
    if (wantsNodePorts && (p.nodePort === undefined || p.nodePort === 0)) {
      taken.add(p.nodePort = alloc.nodePort(taken));
    }
  }
  // A LoadBalancer with externalTrafficPolicy Local gets a health-check node port.
  if (spec.type === "LoadBalancer" && spec.externalTrafficPolicy === "Local") {
    if (!spec.healthCheckNodePort) spec.healthCheckNodePort = alloc.nodePort(taken);
  }
  if (!previous) obj.status = { loadBalancer: {} };
}

const FAMILIES = ["IPv4", "IPv6"];

/**
 * `ipFamilyPolicy`, `ipFamilies`, `clusterIP(s)` as a dual-stack apiserver (IPv4 primary) sets
 * them. Values it would reject (unknown families, two with SingleStack) are left for validation.
 */
function defaultFamilies(spec: Obj, old: Obj, alloc: ServiceAllocator): void {
  spec.ipFamilyPolicy ??= old.ipFamilyPolicy ?? "SingleStack";
  const given = Array.isArray(spec.ipFamilies) ? spec.ipFamilies as string[] : undefined;
  const oldFamilies = Array.isArray(old.ipFamilies) ? old.ipFamilies as string[] : [];
  let families = given ?? oldFamilies;
  if (!families.every((f) => FAMILIES.includes(f)) || new Set(families).size < families.length) {
    return;
  }
  const single = spec.ipFamilyPolicy === "SingleStack";
  // Down to SingleStack: the apiserver drops the secondary family it had added itself.
  if (single && families.length === 2 && sameList(families, oldFamilies)) {
    families = families.slice(0, 1);
  }
  if (families.length === 0) {
    const ipFamily = (spec.clusterIP ?? (spec.clusterIPs as string[] | undefined)?.[0]) as
      | string
      | undefined;
    families = [ipFamily?.includes(":") ? "IPv6" : "IPv4"];
  }
  if (!single && families.length === 1) {
    families = [...families, families[0] === "IPv4" ? "IPv6" : "IPv4"];
  }
  spec.ipFamilies = families;
  if (single && families.length > 1) return;
  const headless = spec.clusterIP === "None";
  const oldIps = (old.clusterIPs ?? (old.clusterIP ? [old.clusterIP] : [])) as string[];
  const givenIps = (spec.clusterIPs ??
    (spec.clusterIP !== undefined ? [spec.clusterIP] : undefined)) as string[] | undefined;
  const ips = headless ? ["None"] : families.map((f, i) =>
    givenIps?.[i] ??
      oldIps.find((ip) => ip !== "None" && (ip.includes(":") ? "IPv6" : "IPv4") === f) ??
      alloc.clusterIp(f)
  );
  spec.clusterIPs = ips;
  spec.clusterIP = ips[0];
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Applies the built-in defaults of `type` to `obj` (being created when `previous` is absent). */
export function applyDefaults(
  type: ResourceType,
  obj: Obj,
  previous: Obj | undefined,
  alloc: ServiceAllocator,
): void {
  if (type.custom) return;
  const meta = obj.metadata as Obj;
  switch (type.kind) {
    case "Service":
      if (type.group === "") defaultService(obj, previous, alloc);
      break;
    case "Namespace":
      meta.labels = { ...(meta.labels as Obj ?? {}), "kubernetes.io/metadata.name": meta.name };
      obj.spec ??= { finalizers: ["kubernetes"] };
      if (!previous) obj.status = { phase: "Active" };
      break;
    case "Pod":
      if (!previous) obj.status = { phase: "Pending" };
      break;
    case "Deployment": {
      const spec = (obj.spec ??= {}) as Obj;
      spec.replicas ??= 1;
      spec.revisionHistoryLimit ??= 10;
      spec.progressDeadlineSeconds ??= 600;
      spec.strategy ??= {
        type: "RollingUpdate",
        rollingUpdate: { maxSurge: "25%", maxUnavailable: "25%" },
      };
      break;
    }
    case "DaemonSet": {
      const spec = (obj.spec ??= {}) as Obj;
      spec.revisionHistoryLimit ??= 10;
      spec.updateStrategy ??= {
        type: "RollingUpdate",
        rollingUpdate: { maxUnavailable: 1, maxSurge: 0 },
      };
      break;
    }
    case "CustomResourceDefinition": {
      if (previous && obj.status) {
        obj.status = previous.status;
        break;
      }
      const spec = (obj.spec ?? {}) as Obj;
      const versions = (spec.versions ?? []) as Obj[];
      const storage = versions.find((v) => v.storage)?.name ?? versions[0]?.name;
      const at = new Date().toISOString().replace(/\.\d+Z$/, "Z");
      const cond = (type: string, reason: string, message: string) => ({
        type,
        status: "True",
        lastTransitionTime: at,
        reason,
        message,
      });
      obj.status = {
        acceptedNames: spec.names ?? {},
        storedVersions: storage ? [storage] : [],
        conditions: [
          cond("NamesAccepted", "NoConflicts", "no conflicts found"),
          cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
      };
      break;
    }
  }
}
