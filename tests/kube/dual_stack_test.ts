/**
 * Dual stack through kubectl: the API test server defaults and validates Services' IP families
 * as a dual-stack apiserver (IPv4 primary) does, takes IPv6 EndpointSlices and AddressPool
 * blocks; the controller gives a dual-stack Service one address per family, and a
 * RequireDualStack Service without an IPv6 pool keeps its IPv4 address with a False condition
 * and a Warning Event until an IPv6 block arrives.
 */
import { deepStrictEqual, match, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { startController } from "../../controller/k8s/run.ts";
import { kubeConfigFor } from "../../lab/kube/mod.ts";
import { assertStringIncludes } from "./_assert.ts";
import { kubectlEnv, waitFor } from "./_kubectl.ts";

interface Svc {
  spec?: {
    ipFamilies?: string[];
    ipFamilyPolicy?: string;
    clusterIP?: string;
    clusterIPs?: string[];
  };
  status?: {
    loadBalancer?: { ingress?: { ip?: string }[] };
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
}

function service(name: string, spec: Record<string, unknown> = {}): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "default" },
    spec: {
      type: "LoadBalancer",
      loadBalancerClass: "holdfast.io/lb",
      ports: [{ name: "http", port: 80 }],
      ...spec,
    },
  });
}

function pool(name: string, blocks: Record<string, string>[]): string {
  return JSON.stringify({
    apiVersion: "holdfast.io/v1alpha1",
    kind: "AddressPool",
    metadata: { name },
    spec: { blocks },
  });
}

Deno.test("kube dual stack: Services get ipFamilies, ipFamilyPolicy and one cluster IP per family; bad combinations are refused naming the field", async () => {
  await using env = await kubectlEnv();
  const get = async (name: string) =>
    JSON.parse(await env.ok(["get", "svc", name, "-o", "json"])) as Svc;
  await env.ok(["apply", "-f", "-"], service("plain"));
  await env.ok(["apply", "-f", "-"], service("dual", { ipFamilyPolicy: "PreferDualStack" }));
  await env.ok(["apply", "-f", "-"], service("six", { ipFamilies: ["IPv6"] }));
  await env.ok(
    ["apply", "-f", "-"],
    service("six-first", { ipFamilyPolicy: "RequireDualStack", ipFamilies: ["IPv6"] }),
  );
  const plain = (await get("plain")).spec!;
  deepStrictEqual([plain.ipFamilyPolicy, plain.ipFamilies], ["SingleStack", ["IPv4"]]);
  match(plain.clusterIP!, /^10\.96\./);
  const dual = (await get("dual")).spec!;
  deepStrictEqual(dual.ipFamilies, ["IPv4", "IPv6"]);
  deepStrictEqual(dual.clusterIPs!.length, 2);
  match(dual.clusterIPs![1]!, /^fd00:10:96::/);
  const six = (await get("six")).spec!;
  deepStrictEqual([six.ipFamilyPolicy, six.ipFamilies], ["SingleStack", ["IPv6"]]);
  match(six.clusterIP!, /^fd00:10:96::/);
  deepStrictEqual((await get("six-first")).spec!.ipFamilies, ["IPv6", "IPv4"]);

  // Down to SingleStack: the secondary family and its cluster IP go, the primary stays.
  await env.ok(["patch", "svc", "dual", "-p", '{"spec":{"ipFamilyPolicy":"SingleStack"}}']);
  const down = (await get("dual")).spec!;
  deepStrictEqual([down.ipFamilies, down.clusterIPs], [["IPv4"], [dual.clusterIPs![0]]]);

  const refused = async (body: string, part: string) => {
    const r = await env.kubectl(["apply", "-f", "-"], { stdin: body });
    ok(r.code !== 0, `refused: ${body}`);
    assertStringIncludes(r.stderr, part);
  };
  await refused(
    service("two-single", { ipFamilyPolicy: "SingleStack", ipFamilies: ["IPv4", "IPv6"] }),
    `spec.ipFamilyPolicy: Invalid value: "SingleStack": must be 'RequireDualStack' or 'PreferDualStack' when multiple 'ipFamilies' are specified`,
  );
  await refused(
    service("five", { ipFamilies: ["IPv5"] }),
    `spec.ipFamilies[0]: Unsupported value: "IPv5"`,
  );
  await refused(
    service("twice", { ipFamilyPolicy: "PreferDualStack", ipFamilies: ["IPv6", "IPv6"] }),
    `spec.ipFamilies[1]: Duplicate value: "IPv6"`,
  );
  await refused(
    service("policy", { ipFamilyPolicy: "DualStack" }),
    `spec.ipFamilyPolicy: Unsupported value: "DualStack"`,
  );
  await refused(
    service("lbip", { loadBalancerIP: "2001:db8::zz" }),
    `spec.loadBalancerIP: Invalid value: "2001:db8::zz": must be a valid IP address`,
  );

  const slice = (address: string) =>
    JSON.stringify({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name: "six-1", labels: { "kubernetes.io/service-name": "six" } },
      addressType: "IPv6",
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      endpoints: [{ addresses: [address], conditions: { ready: true } }],
    });
  await refused(slice("10.1.0.1"), 'endpoints[0].addresses[0]: Invalid value: "10.1.0.1"');
  await env.ok(["apply", "-f", "-"], slice("2001:db8:2::3"));
});

Deno.test("kube dual stack: the controller gives a dual-stack Service an address per family; RequireDualStack without IPv6 keeps IPv4 with a Warning until an IPv6 block arrives", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await env.ok(["apply", "-f", "-"], pool("blue", [{ cidr: "10.0.100.0/30" }]));
  await using running = startController(kc, { identity: "controller-0" });
  await running.synced;
  await env.ok(["apply", "-f", "-"], service("web", { ipFamilyPolicy: "RequireDualStack" }));
  let svc: Svc = {};
  const read = async () =>
    svc = await core.readNamespacedServiceStatus({ name: "web", namespace: "default" }) as Svc;
  const allocated = () =>
    svc.status?.conditions?.find((c) => c.type === "holdfast.io/AddressAllocated");
  await waitFor("web's condition", async () => (await read(), allocated() !== undefined));
  deepStrictEqual((svc.status?.loadBalancer?.ingress ?? []).map((i) => i.ip), ["10.0.100.0"]);
  deepStrictEqual([allocated()!.status, allocated()!.reason], ["False", "IPFamilyUnavailable"]);
  assertStringIncludes(allocated()!.message, "no IPv6 address");
  const events = async () =>
    (await kc.makeApiClient(k8s.EventsV1Api).listNamespacedEvent({ namespace: "default" })).items
      .map((e) => `${e.type} ${e.reason} ${e.regarding?.name}`);
  await waitFor(
    "the Warning",
    async () => (await events()).includes("Warning AllocationFailed web"),
  );

  // An IPv6 block in the same pool: web gets its IPv6 address and keeps the IPv4 one.
  await env.ok(
    ["apply", "-f", "-"],
    pool("blue", [{ cidr: "10.0.100.0/30" }, { cidr: "2001:db8:100::/120" }]),
  );
  await waitFor("web's IPv6 address", async () => (await read(), allocated()?.status === "True"));
  deepStrictEqual(
    (svc.status?.loadBalancer?.ingress ?? []).map((i) => i.ip),
    ["10.0.100.0", "2001:db8:100::"],
  );
  match(
    await env.ok(["get", "svc", "web", "--no-headers"]),
    /^web\s+LoadBalancer\s+\S+\s+10\.0\.100\.0,2001:db8:100::\s+80:\d+\/TCP/,
  );
  match(
    await env.ok(["get", "hfpool", "blue", "--no-headers"]),
    /^blue\s+260\s+2\s+258\s+True/,
  );
});
