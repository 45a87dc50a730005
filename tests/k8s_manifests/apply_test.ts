/**
 * `k8s/` applied with the real kubectl (server-side apply) to the Kubernetes API test server
 * (lab/kube), in the order `deno task deploy` uses: CRDs, the namespace, then everything else.
 * Then what an operator sees: defaults filled in, printer columns, the `holdfast` category, and
 * invalid LoadBalancerConfig and EgressNAT objects refused naming the field. (AddressPool's
 * refusals are in tests/kube/k8s_crds_test.ts.)
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { kubectlEnv } from "../kube/_kubectl.ts";
import { K8S } from "./_manifests.ts";

const APPLY = ["apply", "--server-side", "--field-manager=holdfast-deploy"];

Deno.test("kubectl apply --server-side of k8s/ creates every object; applying again changes nothing", async () => {
  await using env = await kubectlEnv();
  await env.ok([...APPLY, "-f", `${K8S}crds/`]);
  await env.ok([...APPLY, "-f", `${K8S}namespace.yaml`]);
  const first = await env.ok([...APPLY, "-f", K8S]);
  for (
    const object of [
      "namespace/holdfast-system",
      "serviceaccount/holdfast-controller",
      "clusterrole.rbac.authorization.k8s.io/holdfast-agent",
      "role.rbac.authorization.k8s.io/holdfast-controller",
      "deployment.apps/holdfast-controller",
      "daemonset.apps/holdfast-agent",
      "deployment.apps/holdfast-redis",
      "service/holdfast-redis",
      "configmap/holdfast-policy",
      "loadbalancerconfig.holdfast.io/default",
    ]
  ) {
    assert(first.includes(`${object} serverside-applied`), `${object} in:\n${first}`);
  }
  const before = JSON.parse(await env.ok(["get", "deploy,ds,cm,hflbc", "-A", "-o", "json"]));
  await env.ok([...APPLY, "-f", K8S]);
  const after = JSON.parse(await env.ok(["get", "deploy,ds,cm,hflbc", "-A", "-o", "json"]));
  const versions = (list: { items: { metadata: { name: string; resourceVersion: string } }[] }) =>
    list.items.map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`);
  assertEquals(versions(after), versions(before), "a second apply is a no-op");

  // The default LoadBalancerConfig as the controller will read it, and its columns.
  const lbc = JSON.parse(await env.ok(["get", "hflbc", "default", "-o", "json"]));
  assertEquals(lbc.spec.mode, "Stateful");
  assertEquals(lbc.spec.loadBalancerClass, "holdfast.io/lb");
  const table = await env.ok(["get", "loadbalancerconfigs"]);
  assert(/^NAME\s+MODE\s+CLASS\s+READY\s+AGE/m.test(table), table);
  assert(/^default\s+Stateful\s+holdfast\.io\/lb\s/m.test(table), table);

  // The example pool and Service apply; `kubectl get holdfast` lists every Holdfast object.
  await env.ok([...APPLY, "-f", `${K8S}examples/`]);
  const pool = JSON.parse(await env.ok(["get", "hfpool", "blue", "-o", "json"]));
  assertEquals(pool.spec.blocks.length, 2);
  const category = await env.ok(["get", "holdfast"]);
  assert(category.includes("addresspool.holdfast.io/blue"), category);
  assert(category.includes("loadbalancerconfig.holdfast.io/default"), category);
});

Deno.test("LoadBalancerConfig and EgressNAT: defaults filled in, out-of-range fields refused by name", async () => {
  await using env = await kubectlEnv();
  await env.ok([...APPLY, "-f", `${K8S}crds/`]);
  const apply = (obj: unknown) =>
    env.kubectl([...APPLY, "-f", "-"], { stdin: JSON.stringify(obj) });
  const lbc = (spec: unknown) => ({
    apiVersion: "holdfast.io/v1alpha1",
    kind: "LoadBalancerConfig",
    metadata: { name: "default" },
    spec,
  });
  const minimal = await apply(lbc({}));
  assertEquals(minimal.code, 0, minimal.stderr);
  const filled = JSON.parse(await env.ok(["get", "hflbc", "default", "-o", "json"]));
  assertEquals(filled.spec, {
    mode: "Stateful",
    flowKey: "FiveTuple",
    maglevTableSize: 16381,
    encapPort: 6080,
    loadBalancerClass: "holdfast.io/lb",
    claimServicesWithoutClass: false,
  });
  for (
    const [spec, field] of [
      [{ mode: "Active" }, "spec.mode"],
      [{ flowKey: "SourceIP" }, "spec.flowKey"],
      [{ maglevTableSize: 250 }, "spec.maglevTableSize"],
      [{ maglevTableSize: 131072 }, "spec.maglevTableSize"],
      [{ encapPort: 0 }, "spec.encapPort"],
      [{ loadBalancerClass: "not a class" }, "spec.loadBalancerClass"],
    ] as const
  ) {
    const r = await apply(lbc(spec));
    assert(r.code !== 0, `${JSON.stringify(spec)} refused`);
    assert(r.stderr.includes(field), `${JSON.stringify(spec)}: ${r.stderr}`);
  }

  await env.ok(["create", "namespace", "egress", "--dry-run=client", "-o", "yaml"]).then((ns) =>
    env.ok([...APPLY, "-f", "-"], ns)
  );
  const nat = (spec: Record<string, unknown>) => ({
    apiVersion: "holdfast.io/v1alpha1",
    kind: "EgressNAT",
    metadata: { name: "internet", namespace: "egress" },
    spec: { destinations: ["0.0.0.0/0"], addresses: ["203.0.113.10"], ...spec },
  });
  const ok = await apply(nat({}));
  assertEquals(ok.code, 0, ok.stderr);
  const got = JSON.parse(
    await env.ok(["get", "hfegress", "internet", "-n", "egress", "-o", "json"]),
  );
  assertEquals([got.spec.replicas, got.spec.healthCheck], [2, { intervalMs: 100, multiplier: 3 }]);
  const columns = await env.ok(["get", "egressnats", "-n", "egress"]);
  assert(/^NAME\s+ADDRESSES\s+REPLICAS\s+READY\s+AGE/m.test(columns), columns);
  for (
    const [spec, field] of [
      [{ replicas: 1 }, "spec.replicas"],
      [{ addresses: [] }, "spec.addresses"],
      [{ addresses: ["203.0.113.300"] }, "spec.addresses[0]"],
      [{ destinations: ["10.0.0.0/40"] }, "spec.destinations[0]"],
      [{ healthCheck: { intervalMs: 5 } }, "spec.healthCheck.intervalMs"],
      [{ healthCheck: { multiplier: 21 } }, "spec.healthCheck.multiplier"],
    ] as const
  ) {
    const r = await apply(nat(spec));
    assert(r.code !== 0, `${JSON.stringify(spec)} refused`);
    assert(r.stderr.includes(field), `${JSON.stringify(spec)}: ${r.stderr}`);
  }
});

Deno.test("kubectl apply -f k8s/ (client-side) after the CRDs and the namespace", async () => {
  await using env = await kubectlEnv();
  await env.ok(["apply", "-f", `${K8S}crds/`]);
  await env.ok(["apply", "-f", `${K8S}namespace.yaml`]);
  const out = await env.ok(["apply", "-f", K8S]);
  assert(out.includes("daemonset.apps/holdfast-agent created"), out);
  assert(out.includes("configmap/holdfast-policy created"), out);
  const again = await env.ok(["apply", "-f", K8S]);
  assert(!again.includes(" configured"), `a second apply changes nothing:\n${again}`);
});
