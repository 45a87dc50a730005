/**
 * Informers of the real `@kubernetes/client-node` against the test server: callbacks for adds,
 * updates and deletes under a label selector, and a re-list after 410 Gone.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { kubeConfigFor, startKubeServer } from "../../lab/kube/mod.ts";
import { waitFor } from "./_kubectl.ts";

Deno.test("informer: makeInformer with a label selector reports add, update and delete", async () => {
  await using server = await startKubeServer();
  const kc = await kubeConfigFor(server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const informer = k8s.makeInformer(
    kc,
    "/api/v1/namespaces/default/services",
    () =>
      core.listNamespacedService({ namespace: "default", labelSelector: "holdfast.io/test=yes" }),
    "holdfast.io/test=yes",
  );
  const seen: string[] = [];
  informer.on("add", (s) => seen.push(`add ${s.metadata?.name}`));
  informer.on("update", (s) => seen.push(`update ${s.metadata?.name} ${s.spec?.ports?.[0]?.port}`));
  informer.on("delete", (s) => seen.push(`delete ${s.metadata?.name}`));
  const svc = (name: string, labels: Record<string, string>) => ({
    metadata: { name, labels },
    spec: { ports: [{ port: 80 }] },
  });
  await core.createNamespacedService({
    namespace: "default",
    body: svc("before", { "holdfast.io/test": "yes" }),
  });
  await informer.start();
  try {
    await core.createNamespacedService({
      namespace: "default",
      body: svc("mine", { "holdfast.io/test": "yes" }),
    });
    await core.createNamespacedService({ namespace: "default", body: svc("other", {}) });
    await core.patchNamespacedService(
      {
        name: "mine",
        namespace: "default",
        body: [{ op: "replace", path: "/spec/ports/0/port", value: 81 }],
      },
    );
    await core.deleteNamespacedService({ name: "before", namespace: "default" });
    await waitFor("the delete", () => seen.includes("delete before"));
    deepStrictEqual(seen, ["add before", "add mine", "update mine 81", "delete before"]);
  } finally {
    await informer.stop();
  }
});

Deno.test("informer: ListWatch with a field selector) lists, watches, and re-lists after 410 Gone", async () => {
  await using server = await startKubeServer();
  const kc = await kubeConfigFor(server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await core.createNamespacedPod({
    namespace: "default",
    body: {
      metadata: { name: "p0" },
      spec: { containers: [{ name: "c", image: "x" }], nodeName: "n1" },
    },
  });
  const informer = new k8s.ListWatch(
    "/api/v1/namespaces/default/pods",
    new k8s.Watch(kc),
    () => core.listNamespacedPod({ namespace: "default", fieldSelector: "spec.nodeName=n1" }),
    false,
    undefined,
    "spec.nodeName=n1",
  );
  const names = () => informer.list("default").map((p) => p.metadata?.name).sort();
  const errors: unknown[] = [];
  informer.on("error", (e) => errors.push(e));
  await informer.start();
  try {
    deepStrictEqual(names(), ["p0"]);
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "p1" },
        spec: { containers: [{ name: "c", image: "x" }], nodeName: "n1" },
      },
    });
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "other" },
        spec: { containers: [{ name: "c", image: "x" }], nodeName: "n2" },
      },
    });
    await waitFor("the informer to see p1", () => names().includes("p1"));
    const lists = () =>
      server.requests.filter((r) =>
        r.path.startsWith("/api/v1/namespaces/default/pods?") && !r.path.includes("watch=true")
      ).length;
    const listsBefore = lists();
    // While its watch is down, p2 is created and the history compacted: only a re-list finds p2.
    const pods = server.registry.find("", "v1", "pods")!;
    server.endWatches();
    server.rest.create(pods, "default", {
      metadata: { name: "p2" },
      spec: { containers: [{ name: "c", image: "x" }], nodeName: "n1" },
    }, { manager: "test" });
    server.store.compact();
    await waitFor("the informer to re-list and see p2", () => names().includes("p2"));
    ok(lists() > listsBefore, "the informer listed again");
    deepStrictEqual(names(), ["p0", "p1", "p2"]);
    deepStrictEqual(errors, []);
  } finally {
    await informer.stop();
  }
});
