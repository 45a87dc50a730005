/**
 * The controller against what the test server now refuses or changes as a real API server
 * does: a pool with no address to hand out (a /32 of a .0 address under avoidBuggyIPs), a
 * LoadBalancer → ClusterIP type change whose status the server drops (the address is released
 * and reused), and an EndpointSlice over 1,000 endpoints that the server refuses (its backends
 * are never published).
 */
import { deepStrictEqual, match } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { type ModelEntry, startModelPublisher } from "../../controller/model/mod.ts";
import { MemoryModelStore } from "../../controller/model/_memory_model_store.ts";
import { startController } from "../../controller/k8s/run.ts";
import { createAddressPool, kubeConfigFor } from "../../lab/kube/mod.ts";
import { kubectlEnv, waitFor } from "./_kubectl.ts";
import { refused } from "./_refuse.ts";

const LB = (name: string, port = 80) =>
  JSON.stringify({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name },
    spec: {
      type: "LoadBalancer",
      loadBalancerClass: "holdfast.io/lb",
      ports: [{ name: "http", port }],
    },
  });

interface Svc {
  status?: {
    loadBalancer?: { ingress?: { ip?: string }[] };
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
}
const ingress = (s: Svc) => (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip);
const allocated = (s: Svc) =>
  s.status?.conditions?.find((c) => c.type === "holdfast.io/AddressAllocated");

async function eventReasons(kc: k8s.KubeConfig): Promise<string[]> {
  const list = await kc.makeApiClient(k8s.EventsV1Api).listNamespacedEvent({
    namespace: "default",
  });
  return list.items.map((e) => `${e.reason} ${e.regarding?.name}`);
}

Deno.test("controller: a pool of 0 addresses is Ready with 0, Exhausted; its Service PoolExhausted", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await createAddressPool(kc, "zero", [{ cidr: "10.0.7.0/32" }], { avoidBuggyIPs: true });
  await using running = startController(kc, { identity: "controller-0" });
  await running.synced;
  await env.ok(["create", "-f", "-"], LB("web"));
  let svc: Svc = {};
  await waitFor("a condition", async () => {
    svc = await core.readNamespacedServiceStatus({ name: "web", namespace: "default" });
    return allocated(svc) !== undefined;
  });
  deepStrictEqual(ingress(svc), []);
  deepStrictEqual([allocated(svc)!.status, allocated(svc)!.reason], ["False", "PoolExhausted"]);
  await waitFor(
    "the pool's status",
    async () =>
      /^zero\s+0\s+0\s+0\s+True/.test(await env.ok(["get", "hfpool", "zero", "--no-headers"])),
  );
  const conditions = JSON.parse(
    await env.ok(["get", "hfpool", "zero", "-o", "jsonpath={.status.conditions}"]),
  ) as { type: string; status: string; message: string }[];
  deepStrictEqual(conditions.map((c) => `${c.type}=${c.status}`), ["Ready=True", "Exhausted=True"]);
  match(conditions[0]!.message, /^0 addresses in 1 block/);
  await waitFor(
    "AllocationFailed",
    async () => (await eventReasons(kc)).includes("AllocationFailed web"),
  );
});

Deno.test("controller: LoadBalancer → ClusterIP: the server drops the status, the address is released and reused", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await createAddressPool(kc, "one", [{ start: "10.0.8.1", stop: "10.0.8.1" }]);
  const store = new MemoryModelStore();
  await using running = startController(kc, { identity: "controller-0" });
  await using _pub = startModelPublisher(running.cp, store);
  await running.synced;
  await env.ok(["create", "-f", "-"], LB("web"));
  const read = (name: string) => core.readNamespacedServiceStatus({ name, namespace: "default" });
  await waitFor("web allocated", async () => ingress(await read("web")).join() === "10.0.8.1");
  await waitFor("web in the model", () => store.entries.has("default/web"));
  await env.ok(["patch", "service", "web", "--type=merge", "-p", '{"spec":{"type":"ClusterIP"}}']);
  const dropped = await read("web");
  deepStrictEqual(ingress(dropped), [], "the server cleared status.loadBalancer");
  await waitFor(
    "AddressReleased",
    async () => (await eventReasons(kc)).includes("AddressReleased web"),
  );
  await waitFor("web gone from the model", () => !store.entries.has("default/web"));
  await waitFor("its condition cleared", async () => allocated(await read("web")) === undefined);
  await env.ok(["create", "-f", "-"], LB("next", 81));
  await waitFor(
    "next takes the address",
    async () => ingress(await read("next")).join() === "10.0.8.1",
  );
});

Deno.test("controller: an EndpointSlice of 1,001 endpoints is refused; the model keeps the 1,000 it had", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  await createAddressPool(kc, "blue", [{ cidr: "10.0.9.0/30" }]);
  const store = new MemoryModelStore();
  await using running = startController(kc, { identity: "controller-0" });
  await using _pub = startModelPublisher(running.cp, store);
  await running.synced;
  await env.ok(["create", "-f", "-"], LB("web"));
  const slice = (name: string, n: number, base: number) =>
    JSON.stringify({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name, labels: { "kubernetes.io/service-name": "web" } },
      addressType: "IPv4",
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      endpoints: Array.from({ length: n }, (_, i) => ({
        addresses: [`10.${base}.${i >> 8}.${i & 255}`],
        conditions: { ready: true },
      })),
    });
  const backends = () => {
    const raw = store.entries.get("default/web");
    return raw ? (JSON.parse(raw) as ModelEntry).backends.length : 0;
  };
  await env.ok(["create", "-f", "-"], slice("web-1", 1000, 244));
  await waitFor("1,000 backends", () => backends() === 1000);
  await refused(
    env,
    ["create", "-f", "-"],
    slice("web-2", 1001, 245),
    "endpoints: Too many: 1001: must have at most 1000 items",
  );
  // A later change that the model must show proves the refused slice was not merely late.
  await env.ok(["label", "service", "web", "tier=front"]);
  await env.ok(["create", "-f", "-"], slice("web-3", 1, 246));
  await waitFor("1,001 backends: the first slice and the third", () => backends() === 1001);
});
