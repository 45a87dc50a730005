/**
 * The test server driven by the real `@kubernetes/client-node`: typed APIs (core, discovery,
 * coordination, custom objects), status subresources, errors as ApiException with the Status,
 * Watch, and informers (list+watch, re-list after 410 Gone).
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { kubeConfigFor, startKubeServer } from "../../lab/kube/mod.ts";
import { assertRejects, assertStringIncludes } from "./_assert.ts";
import { waitFor } from "./_kubectl.ts";
import { allocationEvent } from "./_fixtures.ts";

const WIDGET_CRDS = new URL("./testdata/widget_crd.yaml", import.meta.url).pathname;

function service(name: string, labels: Record<string, string> = {}): k8s.V1Service {
  return {
    metadata: { name, labels },
    spec: {
      type: "LoadBalancer",
      loadBalancerClass: "holdfast.io/lb",
      selector: { app: name },
      ports: [{ port: 80 }],
    },
  };
}

Deno.test("client-node: services CRUD, defaults, status subresource, 409 on a stale update", async () => {
  await using server = await startKubeServer();
  const core = (await kubeConfigFor(server)).makeApiClient(k8s.CoreV1Api);
  const created = await core.createNamespacedService({
    namespace: "default",
    body: service("web"),
  });
  deepStrictEqual(created.spec?.ports?.[0]?.protocol, "TCP");
  deepStrictEqual(created.spec?.ports?.[0]?.targetPort, 80);
  ok(created.spec?.clusterIP?.startsWith("10.96."), "a cluster IP is allocated");
  ok(
    created.metadata?.uid && created.metadata.creationTimestamp,
    "uid and creationTimestamp set",
  );
  const withStatus = {
    ...created,
    status: { loadBalancer: { ingress: [{ ip: "10.0.100.1", ipMode: "VIP" }] } },
  };
  const updated = await core.replaceNamespacedServiceStatus({
    name: "web",
    namespace: "default",
    body: withStatus,
  });
  deepStrictEqual(updated.status?.loadBalancer?.ingress?.[0]?.ip, "10.0.100.1");
  // The main resource ignores status; the stale resourceVersion is a 409.
  const stale = { ...created, spec: { ...created.spec, ports: [{ port: 81 }] } };
  const err = await assertRejects(() =>
    core.replaceNamespacedService({ name: "web", namespace: "default", body: stale })
  );
  deepStrictEqual((err as k8s.ApiException<string>).code, 409);
  assertStringIncludes(
    String((err as k8s.ApiException<string>).body),
    "the object has been modified",
  );
  const fresh = await core.readNamespacedService({ name: "web", namespace: "default" });
  fresh.status = { loadBalancer: {} };
  const replaced = await core.replaceNamespacedService({
    name: "web",
    namespace: "default",
    body: fresh,
  });
  deepStrictEqual(
    replaced.status?.loadBalancer?.ingress?.[0]?.ip,
    "10.0.100.1",
    "PUT on the main resource keeps status",
  );
  const missing = await assertRejects(() =>
    core.readNamespacedService({ name: "nope", namespace: "default" })
  );
  deepStrictEqual((missing as k8s.ApiException<string>).code, 404);
  await core.deleteNamespacedService({ name: "web", namespace: "default" });
  const list = await core.listNamespacedService({ namespace: "default" });
  deepStrictEqual(list.items.length, 0);
});

Deno.test("client-node: label and field selectors, pagination with continue", async () => {
  await using server = await startKubeServer();
  const core = (await kubeConfigFor(server)).makeApiClient(k8s.CoreV1Api);
  for (let i = 0; i < 7; i++) {
    await core.createNamespacedService({
      namespace: "default",
      body: service(`s${i}`, { team: i % 2 ? "blue" : "red", tier: `${i}` }),
    });
  }
  const names = (l: k8s.V1ServiceList) => l.items.map((s) => s.metadata?.name);
  deepStrictEqual(
    names(await core.listNamespacedService({ namespace: "default", labelSelector: "team=blue" })),
    ["s1", "s3", "s5"],
  );
  deepStrictEqual(
    names(
      await core.listNamespacedService({
        namespace: "default",
        labelSelector: "team!=blue,tier in (0,2,3)",
      }),
    ),
    ["s0", "s2"],
  );
  deepStrictEqual(
    names(await core.listNamespacedService({ namespace: "default", labelSelector: "!team" })),
    [],
  );
  deepStrictEqual(
    names(await core.listServiceForAllNamespaces({ fieldSelector: "metadata.name=s4" })),
    ["s4"],
  );
  const bad = await assertRejects(() =>
    core.listServiceForAllNamespaces({ fieldSelector: "spec.nope=1" })
  );
  deepStrictEqual((bad as k8s.ApiException<string>).code, 400);
  const pages: (string | undefined)[][] = [];
  let token: string | undefined;
  for (let i = 0; i < 10; i++) {
    const page = await core.listNamespacedService({
      namespace: "default",
      limit: 3,
      _continue: token,
    });
    pages.push(names(page));
    token = page.metadata?._continue;
    if (!token) break;
  }
  deepStrictEqual(pages, [["s0", "s1", "s2"], ["s3", "s4", "s5"], ["s6"]]);
});

Deno.test("client-node: EndpointSlices, Leases, Events through their group APIs", async () => {
  await using server = await startKubeServer();
  const kc = await kubeConfigFor(server);
  const discovery = kc.makeApiClient(k8s.DiscoveryV1Api);
  const coordination = kc.makeApiClient(k8s.CoordinationV1Api);
  const events = kc.makeApiClient(k8s.EventsV1Api);
  await discovery.createNamespacedEndpointSlice({
    namespace: "default",
    body: {
      metadata: { name: "web-abc", labels: { "kubernetes.io/service-name": "web" } },
      addressType: "IPv4",
      endpoints: [{
        addresses: ["10.0.1.2"],
        conditions: { ready: true, serving: true, terminating: false },
      }],
      ports: [{ port: 8080, protocol: "TCP" }],
    },
  });
  const slices = await discovery.listNamespacedEndpointSlice({
    namespace: "default",
    labelSelector: "kubernetes.io/service-name=web",
  });
  deepStrictEqual(slices.items[0]?.endpoints[0]?.conditions?.ready, true);
  const lease = await coordination.createNamespacedLease({
    namespace: "kube-system",
    body: {
      metadata: { name: "holdfast-controller" },
      spec: { holderIdentity: "a", leaseDurationSeconds: 15 },
    },
  });
  lease.spec!.holderIdentity = "b";
  await coordination.replaceNamespacedLease({
    name: "holdfast-controller",
    namespace: "kube-system",
    body: lease,
  });
  const stale = await assertRejects(() =>
    coordination.replaceNamespacedLease({
      name: "holdfast-controller",
      namespace: "kube-system",
      body: lease,
    })
  );
  deepStrictEqual(
    (stale as k8s.ApiException<string>).code,
    409,
    "two candidates cannot both take the lease",
  );
  await events.createNamespacedEvent({
    namespace: "default",
    body: { metadata: { generateName: "web-" }, ...allocationEvent(new k8s.V1MicroTime(), {}) },
  });
  const listed = await events.listNamespacedEvent({
    namespace: "default",
    fieldSelector: "regarding.name=web",
  });
  deepStrictEqual(listed.items.map((e) => e.reason), ["AddressAllocated"]);
  ok(listed.items[0]?.metadata?.name?.startsWith("web-"), "generateName makes a name");
});

Deno.test("client-node: custom objects with schema validation (422 naming the field) and /status", async () => {
  await using server = await startKubeServer({ crdDirs: [WIDGET_CRDS] });
  const custom = (await kubeConfigFor(server)).makeApiClient(k8s.CustomObjectsApi);
  const base = {
    group: "test.holdfast.io",
    version: "v1",
    plural: "widgets",
    namespace: "default",
  };
  const made = await custom.createNamespacedCustomObject({
    ...base,
    body: {
      apiVersion: "test.holdfast.io/v1",
      kind: "Widget",
      metadata: { name: "w" },
      spec: { size: 2 },
    },
  }) as k8s.KubernetesObject & { spec: { color: string } };
  deepStrictEqual(made.spec.color, "green", "schema default applied");
  const invalid = await assertRejects(() =>
    custom.createNamespacedCustomObject({
      ...base,
      body: {
        apiVersion: "test.holdfast.io/v1",
        kind: "Widget",
        metadata: { name: "x" },
        spec: { size: 0, parts: [] },
      },
    })
  );
  deepStrictEqual((invalid as k8s.ApiException<string>).code, 422);
  const status = JSON.parse(String((invalid as k8s.ApiException<string>).body));
  deepStrictEqual(status.reason, "Invalid");
  deepStrictEqual(status.details.causes.map((c: { field: string }) => c.field).sort(), [
    "spec.parts",
    "spec.size",
  ]);
  const withStatus = await custom.replaceNamespacedCustomObjectStatus({
    ...base,
    name: "w",
    body: {
      ...made,
      spec: { size: 9 },
      status: { observedGeneration: 1, conditions: [{ type: "Ready", status: "True" }] },
    },
  }) as { spec: { size: number }; status: { observedGeneration: number } };
  deepStrictEqual(withStatus.spec.size, 2, "a /status write leaves spec alone");
  deepStrictEqual(withStatus.status.observedGeneration, 1);
  const gadgets = await custom.listClusterCustomObject({
    group: "test.holdfast.io",
    version: "v1",
    plural: "gadgets",
  }) as { items: unknown[] };
  deepStrictEqual(gadgets.items, []);
});

Deno.test("client-node: Watch from a resourceVersion, 410 Gone when compacted, bookmarks", async () => {
  await using server = await startKubeServer({ bookmarkIntervalMs: 100 });
  const kc = await kubeConfigFor(server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const first = await core.createNamespacedConfigMap({
    namespace: "default",
    body: { metadata: { name: "a" }, data: { k: "1" } },
  });
  await core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: "b" } } });
  const seen: string[] = [];
  const watch = new k8s.Watch(kc);
  const ended = Promise.withResolvers<unknown>();
  const req = await watch.watch(
    "/api/v1/namespaces/default/configmaps",
    { resourceVersion: first.metadata!.resourceVersion, allowWatchBookmarks: true },
    (type, obj) => seen.push(type === "BOOKMARK" ? type : `${type} ${obj.metadata?.name}`),
    (err) => ended.resolve(err),
  );
  await core.deleteNamespacedConfigMap({ name: "a", namespace: "default" });
  await waitFor("a bookmark", () => seen.includes("BOOKMARK"));
  req.abort();
  await ended.promise;
  deepStrictEqual(seen.filter((s) => s !== "BOOKMARK"), ["ADDED b", "DELETED a"]);

  server.store.compact();
  const gone: unknown[] = [];
  const done = Promise.withResolvers<unknown>();
  await watch.watch(
    "/api/v1/namespaces/default/configmaps",
    { resourceVersion: first.metadata!.resourceVersion },
    (type, obj) => gone.push([type, obj.code]),
    (err) => done.resolve(err),
  );
  await done.promise;
  deepStrictEqual(gone, [["ERROR", 410]]);
});

Deno.test("client-node: KubernetesObjectApi server-side applies manifests from k8s-style YAML and lists them", async () => {
  await using server = await startKubeServer({ crdDirs: [WIDGET_CRDS] });
  const objects = k8s.KubernetesObjectApi.makeApiClient(await kubeConfigFor(server));
  const specs = k8s.loadAllYaml(
    await Deno.readTextFile(new URL("./testdata/widgets.yaml", import.meta.url)),
  ) as k8s.KubernetesObject[];
  for (const spec of specs) {
    await objects.patch(
      spec,
      undefined,
      undefined,
      "holdfast-deploy",
      true,
      k8s.PatchStrategy.ServerSideApply,
    );
  }
  const again = await objects.patch(
    specs[0]!,
    undefined,
    undefined,
    "holdfast-deploy",
    true,
    k8s.PatchStrategy.ServerSideApply,
  );
  deepStrictEqual(again.metadata?.generation, 1, "re-applying the same manifest changes nothing");
  const listed = await objects.list(
    "test.holdfast.io/v1",
    "Widget",
    "default",
    undefined,
    undefined,
    undefined,
    undefined,
    "team=blue",
  );
  deepStrictEqual(listed.items.map((o) => o.metadata?.name), ["w1"]);
  await objects.delete(specs[1]!);
  const left = await objects.list("test.holdfast.io/v1", "Widget", "default");
  deepStrictEqual(left.items.map((o) => o.metadata?.name), ["w1"]);
});
