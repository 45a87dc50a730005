/**
 * Kubernetes objects for the benchmarks: N Services of type LoadBalancer, each with an
 * EndpointSlice of B ready endpoints, as a reflector would hand them over (plain objects).
 *
 * @module
 */

import type { K8sEndpointSlice, K8sService } from "../node/lb/sources/k8s_convert.ts";
import type { K8sEvent } from "../node/lb/sources/k8s_source.ts";

/** Service i and its EndpointSlice, as a reflector would hand them over (plain objects). */
export function generate(n: number, b: number, offset = 0): K8sEvent[] {
  const events: K8sEvent[] = [];
  for (let s = 0; s < n; s++) {
    const i = s + offset;
    const vip = `10.${100 + (i >>> 16)}.${(i >>> 8) & 255}.${i & 255}`;
    const svc: K8sService = {
      kind: "Service",
      metadata: { name: `svc-${i}`, namespace: `ns-${i % 100}`, labels: { app: `app-${i}` } },
      spec: { type: "LoadBalancer", ports: [{ name: "http", port: 80, protocol: "TCP" }] },
      status: { loadBalancer: { ingress: [{ ip: vip }] } },
    };
    const endpoints: NonNullable<K8sEndpointSlice["endpoints"]> = [];
    for (let j = 0; j < b; j++) {
      const k = i * b + j;
      endpoints.push({
        addresses: [`172.${16 + (k >>> 16)}.${(k >>> 8) & 255}.${k & 255}`],
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: `node-${k % 50}`,
        zone: `zone-${k % 3}`,
      });
    }
    const slice: K8sEndpointSlice = {
      kind: "EndpointSlice",
      metadata: {
        name: `svc-${i}-abcde`,
        namespace: `ns-${i % 100}`,
        labels: { "kubernetes.io/service-name": `svc-${i}` },
      },
      addressType: "IPv4",
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      endpoints,
    };
    events.push({ type: "add", object: svc }, { type: "add", object: slice });
  }
  return events;
}
