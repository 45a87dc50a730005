/**
 * The lab's endpoint-slice controller: for each Service with a selector, one EndpointSlice per
 * family of its `spec.ipFamilies` (as the API server defaulted them from `ipFamilyPolicy`; IPv4
 * when absent) — `<service>-lab` of `addressType` IPv4, `<service>-lab6` of IPv6, label
 * `kubernetes.io/service-name` — over the selected pods that have an address of that family
 * (`status.podIPs`), with the conditions Kubernetes gives them — `ready` while the pod is Ready and
 * not terminating, `serving` while its probe passes, `terminating` once it is being deleted — and
 * the Service's ports with their target ports (a named `targetPort` resolved from the pod's
 * container ports). A family the Service no longer lists loses its slice. Written through the API
 * test server only when it changed.
 *
 * @module
 */

import type { Obj, ResourceType } from "../kube/mod.ts";
import type { Rest } from "../kube/rest.ts";
import { podReady } from "./workloads.ts";

type Any = Record<string, unknown>;
const o = (v: unknown): Any => (v ?? {}) as Any;
const W = { manager: "endpointslice-controller.k8s.io" };

function targetPort(pod: Obj | undefined, port: Any): number | undefined {
  const t = port.targetPort ?? port.port;
  if (typeof t === "number") return t;
  if (/^\d+$/.test(String(t))) return Number(t);
  for (const c of (o(pod?.spec).containers ?? []) as Any[]) {
    const p = ((c.ports ?? []) as Any[]).find((x) => x.name === t);
    if (p) return Number(p.containerPort);
  }
  return undefined;
}

/** Writes the EndpointSlices of every selecting Service. */
export class EndpointSlices {
  readonly #svc: ResourceType;
  readonly #pods: ResourceType;
  readonly #slices: ResourceType;

  constructor(readonly rest: Rest) {
    const find = (g: string, v: string, p: string) => rest.registry.find(g, v, p)!;
    this.#svc = find("", "v1", "services");
    this.#pods = find("", "v1", "pods");
    this.#slices = find("discovery.k8s.io", "v1", "endpointslices");
  }

  /** One pass. */
  reconcile(): void {
    const store = this.rest.registry.store;
    const pods = store.list(`/${this.#pods.plural}`);
    for (const svc of store.list(`/${this.#svc.plural}`)) {
      const m = o(svc.metadata), sel = o(o(svc.spec).selector);
      if (Object.keys(sel).length === 0) continue;
      const listed = (o(svc.spec).ipFamilies ?? ["IPv4"]) as string[];
      for (const family of ["IPv4", "IPv6"]) {
        const name = `${m.name}-lab${family === "IPv6" ? "6" : ""}`, ns = String(m.namespace);
        if (listed.includes(family)) this.#slice(svc, family, name, pods, sel);
        else if (store.get(`discovery.k8s.io/${this.#slices.plural}`, ns, name)) {
          this.rest.delete(this.#slices, ns, name);
        }
      }
    }
  }

  #slice(svc: Obj, family: string, name: string, pods: Obj[], sel: Any): void {
    const store = this.rest.registry.store;
    const m = o(svc.metadata), ns = String(m.namespace);
    const address = (p: Obj) =>
      (((o(p.status).podIPs ?? [{ ip: o(p.status).podIP }]) as Any[])
        .filter((a) => typeof a.ip === "string").map((a) => String(a.ip)))
        .find((ip) => ip.includes(":") === (family === "IPv6"));
    const chosen = pods.filter((p) => {
      const pm = o(p.metadata), labels = o(pm.labels);
      return pm.namespace === m.namespace && address(p) !== undefined &&
        Object.entries(sel).every(([k, v]) => labels[k] === v);
    });
    const ports = ((o(svc.spec).ports ?? []) as Any[]).map((p) => ({
      ...(p.name ? { name: p.name } : {}),
      port: targetPort(chosen[0], p) ?? Number(p.port),
      protocol: p.protocol ?? "TCP",
    }));
    const endpoints = chosen.map((p) => {
      const pm = o(p.metadata), terminating = pm.deletionTimestamp !== undefined;
      return {
        addresses: [address(p)!],
        conditions: { ready: podReady(p) && !terminating, serving: podReady(p), terminating },
        nodeName: o(p.spec).nodeName,
        targetRef: { kind: "Pod", namespace: pm.namespace, name: pm.name, uid: pm.uid },
      };
    });
    const body = {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name,
        namespace: ns,
        labels: {
          "kubernetes.io/service-name": String(m.name),
          "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
        },
      },
      addressType: family,
      ports,
      endpoints,
    };
    const old = store.get(`discovery.k8s.io/${this.#slices.plural}`, ns, name);
    if (old === undefined) this.rest.create(this.#slices, ns, body, W);
    else if (
      JSON.stringify([old.ports, old.endpoints]) !== JSON.stringify([ports, endpoints])
    ) this.rest.update(this.#slices, ns, name, { ...old, ports, endpoints }, W);
  }
}
