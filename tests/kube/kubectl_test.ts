/**
 * The test server driven by the real kubectl (Debian kubernetes-client): discovery, apply
 * (client-side and server-side), get (tables, YAML, watch), patch (merge, JSON, strategic),
 * delete, CRDs and their objects, and what it refuses loudly.
 */
import { deepStrictEqual, match, ok } from "node:assert/strict";
import { assertStringIncludes } from "./_assert.ts";
import { parse } from "yaml";
import { kubectlEnv, waitFor } from "./_kubectl.ts";
import { allocationEvent } from "./_fixtures.ts";

const TESTDATA = new URL("./testdata/", import.meta.url).pathname;

const DEPLOYMENT = `
apiVersion: apps/v1
kind: Deployment
metadata: { name: web, namespace: default, labels: { app: web } }
spec:
  replicas: 2
  selector: { matchLabels: { app: web } }
  template:
    metadata: { labels: { app: web } }
    spec:
      containers:
        - { name: web, image: nginx:1.25, ports: [{ containerPort: 80 }] }
        - { name: sidecar, image: busybox:1 }
`;

Deno.test("kubectl: discovery, version and api-resources", async () => {
  await using env = await kubectlEnv();
  const version = JSON.parse(await env.ok(["version", "-o", "json"]));
  deepStrictEqual(version.serverVersion.minor, "32");
  const resources = await env.ok(["api-resources", "--no-headers"]);
  for (
    const name of [
      "pods",
      "services",
      "endpointslices",
      "leases",
      "deployments",
      "customresourcedefinitions",
    ]
  ) {
    match(resources, new RegExp(`^${name}\\s`, "m"));
  }
  assertStringIncludes(await env.ok(["get", "namespaces"]), "kube-system");
});

Deno.test("kubectl: client-side apply creates, re-apply patches, get -o yaml shows the object", async () => {
  await using env = await kubectlEnv();
  assertStringIncludes(
    await env.ok(["apply", "-f", "-"], DEPLOYMENT),
    "deployment.apps/web created",
  );
  const changed = DEPLOYMENT.replace("replicas: 2", "replicas: 3").replace(
    "nginx:1.25",
    "nginx:1.26",
  );
  assertStringIncludes(
    await env.ok(["apply", "-f", "-"], changed),
    "deployment.apps/web configured",
  );
  const obj = parse(await env.ok(["get", "deployment", "web", "-o", "yaml"]));
  deepStrictEqual(obj.spec.replicas, 3);
  deepStrictEqual(obj.spec.template.spec.containers.map((c: { image: string }) => c.image), [
    "nginx:1.26",
    "busybox:1",
  ]);
  deepStrictEqual(obj.metadata.generation, 2);
  assertStringIncludes(
    await env.ok(["apply", "-f", "-"], changed),
    "deployment.apps/web unchanged",
  );
});

Deno.test("kubectl: server-side apply owns fields; another manager conflicts unless forced", async () => {
  await using env = await kubectlEnv();
  await env.ok(["apply", "--server-side", "-f", "-"], DEPLOYMENT);
  const other = DEPLOYMENT.replace("replicas: 2", "replicas: 5");
  const conflict = await env.kubectl([
    "apply",
    "--server-side",
    "--field-manager",
    "ops",
    "-f",
    "-",
  ], { stdin: other });
  ok(conflict.code !== 0, "a conflicting apply must fail");
  assertStringIncludes(conflict.stderr, `conflict with "kubectl"`);
  assertStringIncludes(conflict.stderr, ".spec.replicas");
  await env.ok(
    ["apply", "--server-side", "--field-manager", "ops", "--force-conflicts", "-f", "-"],
    other,
  );
  const obj = parse(
    await env.ok(["get", "deployment", "web", "-o", "yaml", "--show-managed-fields"]),
  );
  deepStrictEqual(obj.spec.replicas, 5);
  const managers = obj.metadata.managedFields.map((m: { manager: string }) => m.manager).sort();
  deepStrictEqual(managers, ["kubectl", "ops"]);
});

Deno.test("kubectl: client-side then server-side apply of a Service: kubectl's managedFields upgrade is honoured, one port", async () => {
  await using env = await kubectlEnv();
  const svc =
    "apiVersion: v1\nkind: Service\nmetadata: { name: web }\nspec:\n  type: LoadBalancer\n" +
    "  loadBalancerClass: holdfast.io/lb\n  selector: { app: web }\n  ports: [{ name: http, port: 80, targetPort: 8080 }]\n";
  await env.ok(["apply", "-f", "-"], svc);
  await env.ok(["apply", "--server-side", "-f", "-"], svc);
  await env.ok(["apply", "--server-side", "-f", "-"], svc.replace("8080", "8081"));
  const obj = parse(await env.ok(["get", "service", "web", "-o", "yaml", "--show-managed-fields"]));
  const managers = obj.metadata.managedFields.map((m: { manager: string; operation: string }) =>
    `${m.manager}/${m.operation}`
  );
  deepStrictEqual(
    managers.sort(),
    ["kubectl-last-applied/Apply", "kubectl/Apply"], // the annotation has its own manager
    "kubectl moved the client-side apply fields to its apply manager",
  );
  deepStrictEqual(obj.spec.ports, [{
    name: "http",
    port: 80,
    protocol: "TCP",
    targetPort: 8081,
    nodePort: 30000,
  }]);
  match(
    await env.ok(["get", "services"]),
    /^web\s+LoadBalancer\s+10\.96\.0\.1\s+<pending>\s+80:30000\/TCP\s/m,
  );
});

Deno.test("kubectl: patch merge, json and strategic (containers merge by name)", async () => {
  await using env = await kubectlEnv();
  await env.ok(["apply", "-f", "-"], DEPLOYMENT);
  const patch = (type: string, body: string) =>
    env.kubectl(["patch", "deployment", "web", "--type", type, "-p", body]);
  deepStrictEqual((await patch("merge", '{"spec":{"replicas":4}}')).code, 0);
  deepStrictEqual(
    (await patch("json", '[{"op":"add","path":"/metadata/labels/tier","value":"front"}]')).code,
    0,
  );
  const sidecar =
    '{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:2"}]}}}}';
  deepStrictEqual((await patch("strategic", sidecar)).code, 0);
  const obj = parse(await env.ok(["get", "deployment", "web", "-o", "yaml"]));
  deepStrictEqual(obj.spec.replicas, 4);
  deepStrictEqual(obj.metadata.labels.tier, "front");
  const images = obj.spec.template.spec.containers.map((c: { image: string }) => c.image);
  deepStrictEqual(images, ["nginx:1.25", "busybox:2"]);
  const bad = await patch("json", '[{"op":"test","path":"/spec/replicas","value":9}]');
  ok(bad.code !== 0);
  assertStringIncludes(bad.stderr, "test failed");
});

Deno.test("kubectl: a CRD applied through the API serves its kind with validation, defaults and columns", async () => {
  await using env = await kubectlEnv();
  await env.ok(["apply", "-f", `${TESTDATA}widget_crd.yaml`]);
  await env.ok(["apply", "-f", `${TESTDATA}widgets.yaml`]);
  const table = await env.ok(["get", "widgets"]);
  match(table, /^NAME\s+SIZE\s+COLOR\s+READY\s+AGE/);
  match(table, /^w1\s+3\s+green\s/m);
  const bad = await env.kubectl(["apply", "-f", `${TESTDATA}widget_invalid.yaml`]);
  ok(bad.code !== 0, "an invalid custom object must be refused");
  assertStringIncludes(bad.stderr, "spec.size");
  assertStringIncludes(bad.stderr, "spec.color");
  const badSsa = await env.kubectl([
    "apply",
    "--server-side",
    "-f",
    `${TESTDATA}widget_invalid.yaml`,
  ]);
  ok(badSsa.code !== 0);
  assertStringIncludes(badSsa.stderr, `Unsupported value: "purple"`);
  const strategic = await env.kubectl(["patch", "widget", "w1", "-p", '{"spec":{"size":4}}']);
  ok(strategic.code !== 0, "strategic merge patch on a custom object must be refused");
  assertStringIncludes(strategic.stderr, "strategic-merge-patch+json is not supported");
  await env.ok(["patch", "widget", "w1", "--type", "merge", "-p", '{"spec":{"size":4}}']);
  const w1 = parse(await env.ok(["get", "wg", "w1", "-o", "yaml"]));
  deepStrictEqual([w1.spec.size, w1.spec.color, w1.metadata.generation], [4, "green", 2]);
  deepStrictEqual(w1.spec.parts, [{ name: "a", count: 1 }, { name: "b", count: 2 }]);
  await env.ok(["delete", "-f", `${TESTDATA}widget_crd.yaml`]);
  const gone = await env.kubectl(["get", "widgets"]);
  ok(gone.code !== 0, "the kind is gone with its CRD");
});

Deno.test("kubectl: unknown fields are refused (fieldValidation=Strict), --validate=warn warns and prunes them", async () => {
  await using env = await kubectlEnv();
  const typo = "apiVersion: v1\nkind: ConfigMap\nmetadata: { name: typo }\ndat: { a: '1' }\n";
  const r = await env.kubectl(["apply", "-f", "-"], { stdin: typo });
  ok(r.code !== 0);
  assertStringIncludes(r.stderr, `unknown field "dat"`);
  const warned = await env.kubectl(["create", "--validate=warn", "-f", "-"], { stdin: typo });
  deepStrictEqual(warned.code, 0);
  assertStringIncludes(warned.stderr, `unknown field "dat"`);
});

Deno.test("kubectl: get -w streams changes, delete removes", async () => {
  await using env = await kubectlEnv();
  await env.ok(["apply", "-f", "-"], DEPLOYMENT);
  const watch = env.spawn(["get", "deployments", "-w", "--output-watch-events"]);
  try {
    // kubectl lists, then watches from the list's resourceVersion: once the watch request is in,
    // every later change reaches it.
    await waitFor(
      "kubectl's watch request",
      () => env.server.requests.some((r) => r.path.includes("watch=true")),
    );
    await env.ok([
      "patch",
      "deployment",
      "web",
      "--type",
      "merge",
      "-p",
      '{"spec":{"replicas":7}}',
    ]);
    assertStringIncludes(
      await env.ok(["delete", "deployment", "web"]),
      `deployment.apps "web" deleted`,
    );
    await waitFor("the watch to print the delete", () => /^DELETED/m.test(watch.stdout()));
  } finally {
    const out = await watch.stop();
    const events = out.stdout.split("\n").filter((l) => /^(ADDED|MODIFIED|DELETED)/.test(l)).map((
      l,
    ) => l.split(/\s+/)[0]);
    deepStrictEqual(events, ["ADDED", "MODIFIED", "DELETED"], out.stdout + out.stderr);
  }
  const gone = await env.kubectl(["get", "deployment", "web"]);
  assertStringIncludes(gone.stderr, `deployments.apps "web" not found`);
});

Deno.test("kubectl: rollout status waits on the simulated rollout; without it, it times out", async () => {
  {
    await using env = await kubectlEnv({ simulateRollouts: true });
    await env.ok(["apply", "-f", "-"], DEPLOYMENT);
    assertStringIncludes(
      await env.ok(["rollout", "status", "deployment/web", "--timeout=10s"]),
      "successfully rolled out",
    );
  }
  await using env = await kubectlEnv();
  await env.ok(["apply", "-f", "-"], DEPLOYMENT);
  const stalled = await env.kubectl(["rollout", "status", "deployment/web", "--timeout=1s"]);
  ok(stalled.code !== 0, "nothing rolls out without a controller");
});

Deno.test("kubectl: an events.k8s.io/v1 Event (as a controller writes it) shows in get events and describe", async () => {
  await using env = await kubectlEnv();
  const svc =
    "apiVersion: v1\nkind: Service\nmetadata: { name: web }\nspec: { ports: [{ port: 80 }] }\n";
  await env.ok(["apply", "-f", "-"], svc);
  const uid = (await env.ok(["get", "service", "web", "-o", "jsonpath={.metadata.uid}"])).trim();
  const event = {
    apiVersion: "events.k8s.io/v1",
    kind: "Event",
    metadata: { name: "web.1" },
    ...allocationEvent("2026-01-01T00:00:00.000000Z", { apiVersion: "v1", uid }),
  };
  await env.ok(["create", "-f", "-"], JSON.stringify(event));
  match(
    await env.ok(["get", "events"]),
    /Normal\s+AddressAllocated\s+service\/web\s+allocated 10\.0\.100\.1 from pool blue/,
  );
  match(
    await env.ok(["describe", "service", "web"]),
    /Normal\s+AddressAllocated\s+.*allocated 10\.0\.100\.1 from pool blue/,
  );
  const core = JSON.parse(await env.ok(["get", "events.v1.", "web.1", "-o", "json"]));
  deepStrictEqual([core.involvedObject.name, core.message, core.reportingComponent], [
    "web",
    event.note,
    "holdfast.io/controller",
  ]);
});

Deno.test("kubectl: what the server cannot do fails loudly", async () => {
  await using env = await kubectlEnv();
  const proto = await env.kubectl(["create", "configmap", "x", "--from-literal=a=b"]);
  ok(proto.code !== 0, "protobuf bodies are refused");
  assertStringIncludes(proto.stderr, "application/vnd.kubernetes.protobuf");
  const scale = await env.kubectl(["apply", "-f", "-"], { stdin: DEPLOYMENT }).then(() =>
    env.kubectl(["scale", "deployment", "web", "--replicas", "3"])
  );
  ok(scale.code !== 0, "the scale subresource is refused");
  assertStringIncludes(scale.stderr, "not supported");
  const field = await env.kubectl(["get", "pods", "--field-selector", "spec.bogus=x"]);
  ok(field.code !== 0);
  assertStringIncludes(field.stderr, "field label not supported: spec.bogus");
});
