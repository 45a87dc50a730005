/**
 * The test server's API semantics over plain HTTP, as a client sees them: namespaces, dry runs,
 * resourceVersion rules for lists and pages, generation, server-side apply on keyed lists and
 * atomic maps, tables, and the loud refusals.
 */
import { deepStrictEqual } from "node:assert/strict";
import { startKubeServer } from "../../lab/kube/mod.ts";
import { assertStringIncludes } from "./_assert.ts";
import { call, CM, type Json } from "./_http.ts";

const WIDGET_CRDS = new URL("./testdata/widget_crd.yaml", import.meta.url).pathname;

Deno.test("api: namespaces: objects need one; deleting it deletes what is in it", async () => {
  await using server = await startKubeServer();
  const missing = await call(server, "POST", "/api/v1/namespaces/nope/configmaps", {
    metadata: { name: "a" },
  });
  deepStrictEqual([missing.code, missing.body.message], [404, `namespaces "nope" not found`]);
  await call(server, "POST", "/api/v1/namespaces", { metadata: { name: "team" } });
  await call(server, "POST", "/api/v1/namespaces/team/configmaps", { metadata: { name: "a" } });
  deepStrictEqual((await call(server, "DELETE", "/api/v1/namespaces/team")).code, 200);
  deepStrictEqual((await call(server, "GET", "/api/v1/namespaces/team/configmaps/a")).code, 404);
  const again = await call(server, "POST", "/api/v1/namespaces", { metadata: { name: "default" } });
  deepStrictEqual([again.code, again.body.reason], [409, "AlreadyExists"]);
});

Deno.test("api: a Namespace's /status; creating with a resourceVersion fails as on a real server", async () => {
  await using server = await startKubeServer();
  const ns = await call(server, "GET", "/api/v1/namespaces/default/status");
  deepStrictEqual([ns.code, ns.body.status.phase], [200, "Active"]);
  const withRv = await call(server, "POST", CM, { metadata: { name: "a", resourceVersion: "5" } });
  deepStrictEqual(withRv.code, 500);
  assertStringIncludes(
    withRv.body.message,
    "resourceVersion should not be set on objects to be created",
  );
});

Deno.test("api: dryRun=All stores nothing; lists refuse versions they cannot serve", async () => {
  await using server = await startKubeServer();
  const dry = await call(server, "POST", `${CM}?dryRun=All`, { metadata: { name: "dry" } });
  deepStrictEqual(dry.code, 201);
  deepStrictEqual((await call(server, "GET", `${CM}/dry`)).code, 404);
  const rv = Number((await call(server, "GET", CM)).body.metadata.resourceVersion);
  deepStrictEqual((await call(server, "GET", `${CM}?resourceVersion=${rv + 100}`)).code, 504);
  const exact = await call(
    server,
    "GET",
    `${CM}?resourceVersion=${rv - 1}&resourceVersionMatch=Exact`,
  );
  deepStrictEqual([exact.code, exact.body.reason], [410, "Expired"]);
  for (const n of ["a", "b", "c"]) await call(server, "POST", CM, { metadata: { name: n } });
  const page = await call(server, "GET", `${CM}?limit=2`);
  deepStrictEqual(page.body.metadata.remainingItemCount, 1);
  await call(server, "POST", CM, { metadata: { name: "d" } });
  const next = await call(
    server,
    "GET",
    `${CM}?limit=2&continue=${encodeURIComponent(page.body.metadata.continue)}`,
  );
  deepStrictEqual(
    next.body.items.map((i: Json) => i.metadata.name),
    ["c"],
    "pages come from the first page's snapshot",
  );
  server.lister.expireSnapshots();
  const stale = await call(
    server,
    "GET",
    `${CM}?limit=2&continue=${encodeURIComponent(page.body.metadata.continue)}`,
  );
  deepStrictEqual(stale.code, 410);
});

Deno.test("api: generation bumps on spec changes only; status writes keep it", async () => {
  await using server = await startKubeServer();
  const path = "/apis/apps/v1/namespaces/default/daemonsets";
  const spec = {
    selector: { matchLabels: { app: "a" } },
    template: {
      metadata: { labels: { app: "a" } },
      spec: { containers: [{ name: "a", image: "a:1" }] },
    },
  };
  await call(server, "POST", path, { metadata: { name: "agent" }, spec });
  const merge = { "content-type": "application/merge-patch+json" };
  const labelled = await call(server, "PATCH", `${path}/agent`, {
    metadata: { labels: { x: "y" } },
  }, merge);
  deepStrictEqual(labelled.body.metadata.generation, 1);
  const status = await call(server, "PATCH", `${path}/agent/status`, {
    status: { numberReady: 2, observedGeneration: 1 },
  }, merge);
  deepStrictEqual([status.body.metadata.generation, status.body.status.numberReady], [1, 2]);
  const changed = await call(server, "PATCH", `${path}/agent`, {
    spec: { template: { spec: { containers: [{ name: "a", image: "a:2" }] } } },
  }, merge);
  deepStrictEqual(changed.body.metadata.generation, 2);
  deepStrictEqual(changed.body.status.numberReady, 2, "a main-resource write keeps status");
});

Deno.test("api: server-side apply on a keyed list: managers own their items; dropping one removes it", async () => {
  await using server = await startKubeServer({ crdDirs: [WIDGET_CRDS] });
  const path = "/apis/test.holdfast.io/v1/namespaces/default/widgets/w";
  const apply = (manager: string, body: unknown, force = false) =>
    call(server, "PATCH", `${path}?fieldManager=${manager}${force ? "&force=true" : ""}`, body, {
      "content-type": "application/apply-patch+yaml",
    });
  const w = (size: number, parts: unknown[]) => ({
    apiVersion: "test.holdfast.io/v1",
    kind: "Widget",
    metadata: { name: "w" },
    spec: { size, parts },
  });
  deepStrictEqual((await apply("alice", w(2, [{ name: "a" }]))).code, 201);
  deepStrictEqual(
    (await apply("bob", { ...w(2, [{ name: "b", count: 3 }]) })).code,
    200,
    "same size value: no conflict",
  );
  const parts = (await call(server, "GET", path)).body.spec.parts.map((p: Json) => p.name);
  deepStrictEqual(parts, ["a", "b"]);
  const clash = await apply("bob", w(3, [{ name: "b", count: 3 }]));
  deepStrictEqual([clash.code, clash.body.reason], [409, "Conflict"]);
  assertStringIncludes(clash.body.message, `conflict with "alice": .spec.size`);
  deepStrictEqual((await apply("alice", w(2, [{ name: "c" }]))).code, 200);
  const after = (await call(server, "GET", path)).body;
  deepStrictEqual(
    after.spec.parts.map((p: Json) => p.name),
    ["b", "c"],
    "alice's a is gone, bob's b stays",
  );
  const empty = await apply("carol", {
    apiVersion: "test.holdfast.io/v1",
    kind: "Widget",
    metadata: { name: "w" },
    spec: { size: 2, parts: [] },
  });
  deepStrictEqual(empty.code, 200, "an empty keyed list owns no items: the others stay");
  const bare = {
    apiVersion: "test.holdfast.io/v1",
    kind: "Widget",
    metadata: { name: "v" },
    spec: { size: 2, parts: [] },
  };
  const invalid = await call(
    server,
    "PATCH",
    `${path.replace(/w$/, "v")}?fieldManager=carol`,
    bare,
    { "content-type": "application/apply-patch+yaml" },
  );
  deepStrictEqual(
    [invalid.code, invalid.body.details?.causes?.[0]?.field],
    [422, "spec.parts"],
    "the schema holds for apply",
  );
  const managers = after.metadata.managedFields.map((m: Json) => `${m.manager}/${m.operation}`)
    .sort();
  deepStrictEqual(managers, ["alice/Apply", "bob/Apply"]);
  const final = (await call(server, "GET", path)).body;
  deepStrictEqual(final.spec.parts.map((p: Json) => p.name), ["b", "c"]);
});

Deno.test("api: server-side apply treats a Service selector as one value (atomic map)", async () => {
  await using server = await startKubeServer();
  const path = "/api/v1/namespaces/default/services/s";
  const apply = (manager: string, selector: Record<string, string>, force = false) =>
    call(
      server,
      "PATCH",
      `${path}?fieldManager=${manager}${force ? "&force=true" : ""}`,
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "s" },
        spec: { selector, ports: [{ port: 80 }] },
      },
      { "content-type": "application/apply-patch+yaml" },
    );
  deepStrictEqual((await apply("a", { app: "web" })).code, 201);
  const clash = await apply("b", { tier: "front" });
  deepStrictEqual(clash.code, 409, "a different selector conflicts as a whole");
  assertStringIncludes(clash.body.message, ".spec.selector");
  deepStrictEqual(
    (await apply("b", { tier: "front" }, true)).body.spec.selector,
    { tier: "front" },
    "replaced, not merged",
  );
});

Deno.test("api: tables for kubectl get (CRD printer columns, Service columns, Name/Age default)", async () => {
  await using server = await startKubeServer({ crdDirs: [WIDGET_CRDS] });
  const table = { accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json" };
  await call(server, "POST", "/apis/test.holdfast.io/v1/namespaces/default/widgets", {
    apiVersion: "test.holdfast.io/v1",
    kind: "Widget",
    metadata: { name: "w" },
    spec: { size: 4 },
  });
  const w = await call(
    server,
    "GET",
    "/apis/test.holdfast.io/v1/namespaces/default/widgets",
    undefined,
    table,
  );
  deepStrictEqual(w.body.columnDefinitions.map((c: Json) => c.name), [
    "Name",
    "Size",
    "Color",
    "Ready",
    "Age",
  ]);
  deepStrictEqual(w.body.rows[0].cells.slice(0, 4), ["w", 4, "green", null]);
  await call(server, "POST", "/api/v1/namespaces/default/services", {
    metadata: { name: "s" },
    spec: { type: "LoadBalancer", ports: [{ port: 80 }] },
  });
  const s = await call(server, "GET", "/api/v1/namespaces/default/services/s", undefined, table);
  deepStrictEqual(s.body.rows[0].cells.slice(0, 4), [
    "s",
    "LoadBalancer",
    "10.96.0.1",
    "<pending>",
  ]);
  const cm = await call(server, "GET", CM, undefined, table);
  deepStrictEqual(cm.body.columnDefinitions.map((c: Json) => c.name), ["Name", "Age"]);
});

Deno.test("api: a CRD with a CEL rule outside the supported subset is refused, naming the rule", async () => {
  await using server = await startKubeServer();
  const crd = {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "things.test.holdfast.io" },
    spec: {
      group: "test.holdfast.io",
      scope: "Cluster",
      names: { plural: "things", singular: "thing", kind: "Thing" },
      versions: [{
        name: "v1",
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: {
                type: "object",
                "x-kubernetes-validations": [{ rule: "self.n == oldSelf.n" }],
              },
            },
          },
        },
      }],
    },
  };
  const r = await call(
    server,
    "POST",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    crd,
  );
  deepStrictEqual([r.code, r.body.reason], [422, "Invalid"]);
  assertStringIncludes(
    r.body.message,
    `CEL rule "self.n == oldSelf.n" (transition rules (oldSelf) are not supported)`,
  );
  deepStrictEqual(
    (await call(server, "GET", "/apis/test.holdfast.io/v1/things")).code,
    404,
    "nothing is served",
  );
});

Deno.test("api: built-in validation of what Holdfast writes names the field (422)", async () => {
  await using server = await startKubeServer();
  const fields = (r: { body: Json }) => r.body.details.causes.map((c: Json) => c.field);
  const svc = await call(server, "POST", "/api/v1/namespaces/default/services", {
    metadata: { name: "s" },
    spec: { type: "LoadBalancer", ports: [{ name: "a", port: 80 }, { port: 70000 }] },
  });
  deepStrictEqual([svc.code, fields(svc)], [422, [
    "spec.ports[1].port",
    "spec.ports[1].name",
    "spec.ports[1].targetPort",
  ]]);
  await call(server, "POST", "/api/v1/namespaces/default/services", {
    metadata: { name: "s" },
    spec: { ports: [{ port: 80 }] },
  });
  const status = await call(server, "PATCH", "/api/v1/namespaces/default/services/s/status", {
    status: {
      loadBalancer: { ingress: [{ ip: "10.0.100.300", ipMode: "VIP" }] },
      conditions: [{
        type: "holdfast.io/AddressAllocated",
        status: "Yes",
        reason: "Pool exhausted",
      }],
    },
  }, { "content-type": "application/merge-patch+json" });
  deepStrictEqual([status.code, fields(status)], [422, [
    "status.loadBalancer.ingress[0].ip",
    "status.conditions[0].status",
    "status.conditions[0].lastTransitionTime",
    "status.conditions[0].reason",
  ]]);
  const slice = await call(
    server,
    "POST",
    "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
    {
      metadata: { name: "e" },
      addressType: "IPv4",
      endpoints: [{ addresses: ["10.0.1.x"] }, { addresses: [] }],
    },
  );
  deepStrictEqual([slice.code, fields(slice)], [422, [
    "endpoints[0].addresses[0]",
    "endpoints[1].addresses",
  ]]);
  const event = await call(server, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", {
    metadata: { name: "ev" },
    eventTime: "2026-01-01T00:00:00.000000Z",
    reason: "AddressAllocated",
    type: "Info",
  });
  deepStrictEqual([event.code, fields(event)], [422, [
    "reportingController",
    "reportingInstance",
    "action",
    "type",
  ]]);
});

Deno.test("api: what is not supported is refused with a Status naming it", async () => {
  await using server = await startKubeServer();
  const cases: [string, string, number, string, Record<string, string>?][] = [
    ["GET", "/api/v1/watch/namespaces/default/configmaps", 404, "legacy /watch/ paths"],
    ["GET", "/apis/apps/v1/namespaces/default/deployments/x/scale", 404, `subresource "scale"`],
    ["GET", "/apis/example.com/v1/things", 404, "not served"],
    ["PUT", CM, 405, "not supported on the collection"],
    ["GET", CM, 406, "only the following media types", {
      accept: "application/vnd.kubernetes.protobuf",
    }],
    ["GET", `${CM}?labelSelector=a%20in%20b`, 400, "unable to parse requirement"],
    ["GET", `${CM}?fieldSelector=data.x%3Dy`, 400, "field label not supported: data.x"],
    ["GET", `${CM}?watch=true&resourceVersion=abc`, 400, "invalid resourceVersion"],
    ["DELETE", `${CM}/x?propagationPolicy=Sideways`, 400, "not one of Background, Foreground"],
    ["PATCH", `${CM}/x`, 415, "unknown format", { "content-type": "application/x-yaml" }],
  ];
  for (const [method, path, code, text, headers] of cases) {
    const r = await call(server, method, path, method === "GET" ? undefined : "{}", headers);
    deepStrictEqual([r.code, r.body.kind], [code, "Status"], `${method} ${path}`);
    assertStringIncludes(r.body.message, text);
  }
});
