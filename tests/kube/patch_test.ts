/**
 * Patch formats of the test server: merge, JSON and strategic merge with kubectl's directives;
 * `unchanged` (an update that stores nothing); managedFields of status writes.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { jsonPatch, mergePatch, strategicMerge } from "../../lab/kube/patch.ts";
import { canonical, unchanged } from "../../lab/kube/resources.ts";
import { identicalBut, recordUpdate } from "../../lab/kube/apply.ts";
import { ApiError } from "../../lab/kube/status.ts";
import { assertRejects } from "./_assert.ts";

const pod = {
  metadata: { name: "p", finalizers: ["a"] },
  spec: {
    containers: [
      { name: "app", image: "app:1", env: [{ name: "A", value: "1" }, { name: "B", value: "2" }] },
      { name: "side", image: "side:1" },
    ],
    tolerations: [{ key: "x" }],
  },
};

Deno.test("merge patch: objects merge, null deletes, lists replace", () => {
  deepStrictEqual(
    mergePatch({ a: 1, b: { c: 2, d: 3 }, l: [1, 2] }, { b: { c: null, e: 4 }, l: [3] }),
    {
      a: 1,
      b: { d: 3, e: 4 },
      l: [3],
    },
  );
});

Deno.test("json patch: add, remove, replace, move, copy, test; a failed test or bad path is a 422", async () => {
  const doc = { a: { b: [1, 2] }, c: "x" };
  const out = jsonPatch(doc, [
    { op: "add", path: "/a/b/-", value: 3 },
    { op: "replace", path: "/c", value: "y" },
    { op: "copy", from: "/c", path: "/d" },
    { op: "move", from: "/a/b/0", path: "/e" },
    { op: "remove", path: "/a/b/0" },
    { op: "test", path: "/d", value: "y" },
    { op: "add", path: "/f~1g", value: true },
  ]);
  deepStrictEqual(out, { a: { b: [3] }, c: "y", d: "y", e: 1, "f/g": true });
  deepStrictEqual(doc.a.b, [1, 2], "the input is not changed");
  const err = await assertRejects(
    () => jsonPatch(doc, [{ op: "test", path: "/c", value: "z" }]),
    "test failed",
  );
  deepStrictEqual((err as ApiError).code, 422);
  await assertRejects(
    () => jsonPatch(doc, [{ op: "remove", path: "/nope" }]),
    `path "/nope" does not exist`,
  );
});

Deno.test("strategic merge: containers and env merge by name, other lists replace", () => {
  const out = strategicMerge("Pod", pod, {
    spec: {
      containers: [{ name: "app", env: [{ name: "B", value: "3" }, { name: "C", value: "4" }] }, {
        name: "new",
        image: "n:1",
      }],
      tolerations: [{ key: "y" }],
    },
  }) as typeof pod;
  deepStrictEqual(out.spec.containers.map((c) => c.name), ["app", "side", "new"]);
  deepStrictEqual(out.spec.containers[0]!.image, "app:1");
  deepStrictEqual(out.spec.containers[0]!.env, [{ name: "A", value: "1" }, {
    name: "B",
    value: "3",
  }, {
    name: "C",
    value: "4",
  }]);
  deepStrictEqual(out.spec.tolerations, [{ key: "y" }]);
});

Deno.test("strategic merge: $patch delete/replace, $setElementOrder, $retainKeys, $deleteFromPrimitiveList", async () => {
  const out = strategicMerge("Pod", pod, {
    metadata: { "$deleteFromPrimitiveList/finalizers": ["a"] },
    spec: {
      "$setElementOrder/containers": [{ name: "side" }, { name: "app" }],
      containers: [{ name: "app", env: [{ name: "A", $patch: "delete" }] }],
    },
  }) as typeof pod;
  deepStrictEqual(out.metadata.finalizers, []);
  deepStrictEqual(out.spec.containers.map((c) => c.name), ["side", "app"]);
  deepStrictEqual(out.spec.containers[1]!.env, [{ name: "B", value: "2" }]);
  const replaced = strategicMerge("Pod", pod, {
    spec: { containers: [{ $patch: "replace" }, { name: "only", image: "o" }] },
  }) as typeof pod;
  deepStrictEqual(replaced.spec.containers, [{ name: "only", image: "o" }]);
  const retained = strategicMerge("Deployment", {
    spec: { strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1 } } },
  }, {
    spec: { strategy: { $retainKeys: ["type"], type: "Recreate" } },
  });
  deepStrictEqual(retained, { spec: { strategy: { type: "Recreate" } } });
  const err = await assertRejects(
    () => strategicMerge("Pod", pod, { spec: { $bogus: 1 } }),
    `directive "$bogus"`,
  );
  deepStrictEqual((err as ApiError).code, 400);
});

Deno.test("strategic merge: Service ports merge by port, finalizers as a set", () => {
  const svc = {
    metadata: { finalizers: ["a"] },
    spec: { ports: [{ port: 80, name: "http" }, { port: 443, name: "https" }] },
  };
  const out = strategicMerge("Service", svc, {
    metadata: { finalizers: ["b", "a"] },
    spec: { ports: [{ port: 443, targetPort: 8443 }] },
  });
  deepStrictEqual(out, {
    metadata: { finalizers: ["a", "b"] },
    spec: { ports: [{ port: 80, name: "http" }, { port: 443, name: "https", targetPort: 8443 }] },
  });
});

Deno.test("unchanged: as canonical JSON without resourceVersion and managedFields times", () => {
  const svc = (over: Record<string, unknown> = {}) => ({
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: "web",
      resourceVersion: "1001",
      labels: { a: "1", b: "2" },
      managedFields: [{ manager: "m", operation: "Update", time: "2026-11-29T15:00:00Z" }],
    },
    spec: { ports: [{ port: 80, name: "http" }] },
    status: { loadBalancer: {} },
    ...over,
  });
  const same = (a: Record<string, unknown>, b: Record<string, unknown>) =>
    deepStrictEqual([unchanged(a, b), unchanged(b, a)], [canonicalSame(a, b), canonicalSame(a, b)]);
  const base = svc();
  same(base, svc());
  // Key order, keys holding undefined, the resourceVersion and managedFields times: no change.
  same(base, { ...svc(), metadata: { ...svc().metadata, labels: { b: "2", a: "1" } } });
  same(base, { ...svc(), extra: undefined });
  same(base, { ...svc(), metadata: { ...svc().metadata, resourceVersion: "1002" } });
  same(base, {
    ...svc(),
    metadata: {
      ...svc().metadata,
      managedFields: [{ manager: "m", operation: "Update", time: "2026-11-29T16:00:00Z" }],
    },
  });
  // Changes.
  same(base, svc({ status: { loadBalancer: { ingress: [{ ip: "10.0.0.1" }] } } }));
  same(base, svc({ spec: { ports: [{ port: 81, name: "http" }] } }));
  same(base, svc({ spec: { ports: [{ port: 80, name: "http" }, { port: 81 }] } }));
  same(base, { ...svc(), metadata: { ...svc().metadata, managedFields: [] } });
  same(base, { ...svc(), metadata: { ...svc().metadata, managedFields: undefined } });
  same(base, {
    ...svc(),
    metadata: { ...svc().metadata, managedFields: [{ manager: "n", operation: "Update" }] },
  });
  same(base, { ...svc(), metadata: { ...svc().metadata, labels: { a: "1" } } });
  same(base, svc({ spec: { ports: { 0: { port: 80, name: "http" } } } }));
  same({ metadata: { name: "x" } }, { metadata: { name: "x" }, status: null });
  same({ n: 1 }, { n: 1.0 });
  same({}, { metadata: {} });
  ok(unchanged(base, svc()));
  ok(!unchanged(base, svc({ status: {} })));
});

/** The definition `unchanged` had: canonical JSON of copies without the bookkeeping. */
function canonicalSame(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const strip = (o: Record<string, unknown>) => {
    const c = structuredClone(o);
    const m = (c.metadata ??= {}) as Record<string, unknown>;
    delete m.resourceVersion;
    for (const f of (m.managedFields ?? []) as Record<string, unknown>[]) delete f.time;
    return canonical(c);
  };
  return strip(a) === strip(b);
}

/** managedFields after each write, without their times. */
const owners = (o: Record<string, unknown>) =>
  ((o.metadata as Record<string, unknown>).managedFields as Record<string, unknown>[])
    .map(({ time: _t, ...m }) => m);

Deno.test("recordUpdate: status writes by several managers (the status-only walk)", () => {
  // Expected as the full walk of both objects recorded them (before the status-only shortcut).
  const listKeys = (path: readonly string[]) => {
    const p = path.join(".");
    if (p === "spec.ports") return ["port", "protocol"];
    if (p === "status.conditions") return ["type"];
    if (p === "status.loadBalancer.ingress") return "atomic" as const;
    return undefined;
  };
  const w = (manager: string, subresource?: string) => ({
    manager,
    operation: "Update" as const,
    apiVersion: "v1",
    subresource,
  });
  const s1: Record<string, unknown> = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "default", labels: { a: "1" } },
    spec: { type: "LoadBalancer", ports: [{ port: 80, protocol: "TCP", name: "http" }] },
    status: { loadBalancer: {} },
  };
  recordUpdate(undefined, s1, w("kubectl"), listKeys);
  const s2 = structuredClone(s1);
  s2.status = {
    loadBalancer: { ingress: [{ ip: "10.0.0.1" }] },
    conditions: [{ type: "A", status: "True" }],
  };
  recordUpdate(s1, s2, w("ctl-a", "status"), listKeys);
  const s3 = structuredClone(s2);
  s3.status = {
    loadBalancer: { ingress: [{ ip: "10.0.0.2" }] },
    conditions: [{ type: "A", status: "True" }, { type: "B", status: "False" }],
  };
  recordUpdate(s2, s3, w("ctl-b", "status"), listKeys);
  const s4 = structuredClone(s3);
  delete s4.status;
  recordUpdate(s3, s4, w("ctl-b", "status"), listKeys);
  const plain = { metadata: { name: "web" }, spec: { a: [1, { b: 2 }] }, status: { x: 1 } };
  ok(identicalBut(plain, { ...structuredClone(plain), status: { y: 2 } }, "status"));
  ok(!identicalBut(plain, { ...plain, extra: undefined }, "status"), "undefined keys count");
  ok(!identicalBut(plain, { ...plain, spec: { a: [1, { b: 3 }] } }, "status"));
  deepStrictEqual(
    JSON.parse(JSON.stringify([owners(s2), owners(s3), owners(s4)])),
    EXPECTED_OWNERS,
  );
});

const EXPECTED_OWNERS = [
  [
    {
      "manager": "kubectl",
      "operation": "Update",
      "apiVersion": "v1",
      "fieldsType": "FieldsV1",
      "fieldsV1": {
        "f:metadata": {
          "f:labels": {
            "f:a": {},
          },
        },
        "f:spec": {
          "f:type": {},
          "f:ports": {
            'k:{"port":80,"protocol":"TCP"}': {
              ".": {},
              "f:port": {},
              "f:protocol": {},
              "f:name": {},
            },
          },
        },
      },
    },
    {
      "manager": "ctl-a",
      "operation": "Update",
      "apiVersion": "v1",
      "fieldsType": "FieldsV1",
      "fieldsV1": {
        "f:status": {
          "f:loadBalancer": {
            "f:ingress": {},
          },
          "f:conditions": {
            'k:{"type":"A"}': {
              ".": {},
              "f:type": {},
              "f:status": {},
            },
          },
        },
      },
      "subresource": "status",
    },
  ],
  [
    {
      "manager": "kubectl",
      "operation": "Update",
      "apiVersion": "v1",
      "fieldsType": "FieldsV1",
      "fieldsV1": {
        "f:metadata": {
          "f:labels": {
            "f:a": {},
          },
        },
        "f:spec": {
          "f:type": {},
          "f:ports": {
            'k:{"port":80,"protocol":"TCP"}': {
              ".": {},
              "f:port": {},
              "f:protocol": {},
              "f:name": {},
            },
          },
        },
      },
    },
    {
      "manager": "ctl-a",
      "operation": "Update",
      "apiVersion": "v1",
      "fieldsType": "FieldsV1",
      "fieldsV1": {
        "f:status": {
          "f:conditions": {
            'k:{"type":"A"}': {
              ".": {},
              "f:type": {},
              "f:status": {},
            },
          },
        },
      },
      "subresource": "status",
    },
    {
      "manager": "ctl-b",
      "operation": "Update",
      "apiVersion": "v1",
      "fieldsType": "FieldsV1",
      "fieldsV1": {
        "f:status": {
          "f:loadBalancer": {
            "f:ingress": {},
          },
          "f:conditions": {
            'k:{"type":"B"}': {
              ".": {},
              "f:type": {},
              "f:status": {},
            },
          },
        },
      },
      "subresource": "status",
    },
  ],
  [
    {
      "manager": "kubectl",
      "operation": "Update",
      "apiVersion": "v1",
      "fieldsType": "FieldsV1",
      "fieldsV1": {
        "f:metadata": {
          "f:labels": {
            "f:a": {},
          },
        },
        "f:spec": {
          "f:type": {},
          "f:ports": {
            'k:{"port":80,"protocol":"TCP"}': {
              ".": {},
              "f:port": {},
              "f:protocol": {},
              "f:name": {},
            },
          },
        },
      },
    },
  ],
];
