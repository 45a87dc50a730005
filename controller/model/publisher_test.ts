import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { createControlPlane } from "../../node/lb/control_plane.ts";
import { MemoryLBMaps } from "../../node/lb/maps/memory.ts";
import { K8sSource } from "../../node/lb/sources/k8s_source.ts";
import { MemoryModelStore } from "./_memory_model_store.ts";
import { waitUntil } from "./_testing.ts";
import { startModelPublisher } from "./publisher.ts";

const service = {
  kind: "Service",
  metadata: { name: "web", namespace: "shop" },
  spec: { type: "LoadBalancer", ports: [{ name: "http", port: 80, protocol: "TCP" }] },
  status: { loadBalancer: { ingress: [{ ip: "10.0.100.9" }] } },
};
const slice = {
  kind: "EndpointSlice",
  metadata: { name: "web-1", namespace: "shop", labels: { "kubernetes.io/service-name": "web" } },
  ports: [{ name: "http", port: 8080, protocol: "TCP" }],
  endpoints: [{ addresses: ["10.1.0.1"] }, {
    addresses: ["10.1.0.2"],
    conditions: { ready: false, serving: true, terminating: true },
  }],
};

Deno.test("model publisher: waits for the Kubernetes sync (never publishes an empty model), then publishes and counts", async () => {
  const store = new MemoryModelStore();
  const registry = new Registry();
  const cp = await createControlPlane(new MemoryLBMaps());
  const k8s = new K8sSource(cp.writer);
  k8s.registerInitializer();
  cp.start();
  using logs = captureLogs();
  const pub = startModelPublisher(cp, store, { registry });
  try {
    k8s.apply([{ type: "add", object: service }, { type: "add", object: slice }]);
    await new Promise((r) => setTimeout(r, 50));
    deepStrictEqual([store.writes, store.epochToken], [0, ""], "nothing before synced()");
    k8s.synced();
    await pub.synced();
    deepStrictEqual([...store.entries.keys()], ["shop/web"]);
    deepStrictEqual(JSON.parse(store.entries.get("shop/web")!), {
      service: {
        name: "shop/web",
        flowKeyMode: "five-tuple",
        frontends: [{ address: "10.0.100.9:80/TCP", portName: "http" }],
      },
      backends: [
        { address: "10.1.0.1:8080/TCP", portName: "http", state: "active", weight: 100 },
        { address: "10.1.0.2:8080/TCP", portName: "http", state: "terminating", weight: 100 },
      ],
    });
    // A delete follows.
    k8s.apply([{ type: "delete", object: service }, { type: "delete", object: slice }]);
    await waitUntil(() => store.entries.size === 0, "the service deleted from the model");
    deepStrictEqual(registry.gauge("holdfast_model_rev", "").get(), 2);
    const c = registry.counter("holdfast_model_publishes_total", "", { labelNames: ["op"] });
    deepStrictEqual([c.get({ op: "upsert" }), c.get({ op: "delete" })], [1, 1]);
    const published = logs.records.filter((r) => r.msg === "model published");
    deepStrictEqual(published.map((r) => [r.service, r.op, r.rev]), [
      ["shop/web", "upsert", 1],
      ["shop/web", "delete", 2],
    ]);
  } finally {
    await pub.stop();
    await cp.stop();
  }
});

Deno.test("model publisher: a fenced publisher (not leader) writes nothing and retries", async () => {
  const store = new MemoryModelStore();
  const cp = await createControlPlane(new MemoryLBMaps());
  const k8s = new K8sSource(cp.writer);
  k8s.registerInitializer();
  cp.start();
  k8s.apply([{ type: "add", object: service }]);
  k8s.synced();
  let leader = false;
  using logs = captureLogs();
  const pub = startModelPublisher(cp, store, {
    registry: new Registry(),
    canWrite: () => leader,
    retry: { minMs: 10, maxMs: 20 },
  });
  try {
    await waitUntil(
      () => logs.records.some((r) => r.msg === "model publish failed"),
      "a refused write",
    );
    deepStrictEqual([store.writes, store.epochToken], [0, ""]);
    leader = true;
    await pub.synced();
    ok(store.entries.has("shop/web"));
  } finally {
    await pub.stop();
    await cp.stop();
  }
});

Deno.test("model publisher: a backend leaving one of two services sharing it updates that service's entry", async () => {
  const store = new MemoryModelStore();
  const cp = await createControlPlane(new MemoryLBMaps());
  const k8s = new K8sSource(cp.writer);
  k8s.registerInitializer();
  cp.start();
  // "api" has no address yet (no frontends) and shares 10.1.0.1:8080 with "web".
  const api = { ...service, metadata: { name: "api", namespace: "shop" }, status: {} };
  const apiSlice = (ips: string[]) => ({
    ...slice,
    metadata: { name: "api-1", namespace: "shop", labels: { "kubernetes.io/service-name": "api" } },
    endpoints: ips.map((ip) => ({ addresses: [ip] })),
  });
  k8s.apply([
    { type: "add", object: service },
    { type: "add", object: slice },
    { type: "add", object: api },
    { type: "add", object: apiSlice(["10.1.0.1", "10.1.0.3"]) },
  ]);
  k8s.synced();
  const pub = startModelPublisher(cp, store, { registry: new Registry() });
  try {
    await pub.synced();
    const apiBackends = () =>
      (JSON.parse(store.entries.get("shop/api")!) as { backends: { address: string }[] })
        .backends.map((b) => b.address);
    deepStrictEqual(apiBackends(), ["10.1.0.1:8080/TCP", "10.1.0.3:8080/TCP"]);
    k8s.apply([{ type: "update", object: apiSlice(["10.1.0.3"]) }]);
    await waitUntil(() => apiBackends().length === 1, "api's entry without 10.1.0.1");
    deepStrictEqual(apiBackends(), ["10.1.0.3:8080/TCP"]);
  } finally {
    await pub.stop();
    await cp.stop();
  }
});
