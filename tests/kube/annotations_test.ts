/**
 * Bad Holdfast annotations on Services, against the Kubernetes API test server: the Service gets
 * `holdfast.io/Configured` False (reason `InvalidAnnotation`, message naming the annotation and
 * its value) and an `InvalidAnnotation` Event, stays out of the published model, and every other
 * Service keeps working; once fixed it is Configured True and served.
 */
import { deepStrictEqual, match, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { type ModelEntry, startModelPublisher } from "../../controller/model/mod.ts";
import { MemoryModelStore } from "../../controller/model/_memory_model_store.ts";
import { startController } from "../../controller/k8s/run.ts";
import { createAddressPool, kubeConfigFor, startKubeServer } from "../../lab/kube/mod.ts";
import { captureLogs } from "../../lib/log.ts";
import { waitFor } from "./_kubectl.ts";

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

function service(name: string, annotations: Record<string, string>) {
  return {
    namespace: "default",
    body: {
      metadata: { name, annotations },
      spec: {
        type: "LoadBalancer",
        loadBalancerClass: "holdfast.io/lb",
        ports: [{ port: 80, name: "http" }],
      },
    },
  };
}

Deno.test("controller: a Service with a bad Holdfast annotation gets Configured=False and an Event; the others keep working; fixed → served", async () => {
  using _logs = captureLogs();
  await using server = await startKubeServer({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await createAddressPool(kc, "blue", [{ cidr: "10.0.7.0/28" }]);
  const store = new MemoryModelStore();
  await using running = startController(kc, { identity: "controller-0" });
  await using pub = startModelPublisher(running.cp, store); // stopped early below too
  await running.synced;
  const bad = {
    "bad-key": { "holdfast.io/flow-key": "source-ip" },
    "bad-size": { "holdfast.io/maglev-size": "100" },
    "bad-ips": { "holdfast.io/load-balancer-ips": "10.0.7.300" },
  };
  for (const [name, ann] of Object.entries(bad)) {
    await core.createNamespacedService(service(name, ann));
  }
  await core.createNamespacedService(service("good", {}));

  const conditions = async (name: string) =>
    ((await core.readNamespacedServiceStatus({ name, namespace: "default" })).status
      ?.conditions ?? []) as Condition[];
  const configured = async (name: string) =>
    (await conditions(name)).find((c) => c.type === "holdfast.io/Configured");
  const events = async () =>
    (await kc.makeApiClient(k8s.EventsV1Api).listNamespacedEvent({ namespace: "default" })).items
      .filter((e) => e.reason === "InvalidAnnotation")
      .map((e) => `${e.regarding?.name}: ${e.note}`)
      .sort();
  const frontends = (name: string) => {
    const raw = store.entries.get(`default/${name}`);
    return raw === undefined
      ? undefined
      : (JSON.parse(raw) as ModelEntry).service.frontends?.map((f) => f.address) ?? [];
  };

  await waitFor("good served", () => (frontends("good") ?? []).length === 1);
  await waitFor("three InvalidAnnotation Events", async () => (await events()).length === 3);
  const expected: Record<string, RegExp> = {
    "bad-key": /^annotation holdfast\.io\/flow-key="source-ip" is not five-tuple or client-ip; /,
    "bad-size": /^annotation holdfast\.io\/maglev-size="100": .*prime/,
    "bad-ips":
      /^annotation holdfast\.io\/load-balancer-ips="10\.0\.7\.300": "10\.0\.7\.300" is not an IPv4 or IPv6 address; /,
  };
  for (const [name, re] of Object.entries(expected)) {
    const c = await configured(name);
    ok(c !== undefined, `${name} has a Configured condition`);
    deepStrictEqual([c.status, c.reason], ["False", "InvalidAnnotation"], name);
    match(c.message, re);
    ok((await events()).some((e) => e === `${name}: ${c.message}`), `${name}'s Event`);
  }
  // Left out of the model (bad-ips has no address, so no frontend); the good one is untouched.
  deepStrictEqual(frontends("bad-key"), undefined);
  deepStrictEqual(frontends("bad-size"), undefined);
  deepStrictEqual(frontends("bad-ips") ?? [], []);
  deepStrictEqual(await configured("good"), undefined, "no Configured condition on a good Service");
  const allocated = (await conditions("good")).find((c) =>
    c.type === "holdfast.io/AddressAllocated"
  );
  deepStrictEqual([allocated?.status, allocated?.reason], ["True", "Allocated"]);

  // Fixed: Configured True, served; the Event was told once, not on every pass.
  const svc = await core.readNamespacedService({ name: "bad-key", namespace: "default" });
  svc.metadata!.annotations = { "holdfast.io/flow-key": "client-ip" };
  await core.replaceNamespacedService({ name: "bad-key", namespace: "default", body: svc });
  await waitFor("bad-key served", () => (frontends("bad-key") ?? []).length === 1);
  await waitFor("bad-key Configured", async () => (await configured("bad-key"))?.status === "True");
  deepStrictEqual((await configured("bad-key"))?.reason, "Valid");
  deepStrictEqual((await events()).length, 3);
  await pub.stop();
  await running.stop();

  // A restarted controller neither rewrites the conditions nor repeats the Events.
  await new Promise((r) => setTimeout(r, 100));
  const before = server.requests.filter((r) => r.method !== "GET").length;
  await using again = startController(kc, { identity: "controller-1" });
  await again.synced;
  await new Promise((r) => setTimeout(r, 200));
  const writes = server.requests.filter((r) => r.method !== "GET").slice(before);
  deepStrictEqual(writes, [], "a restarted controller writes nothing");
  deepStrictEqual((await configured("bad-size"))?.status, "False");
});
