/**
 * What an operator relies on in `k8s/` without a cluster: the CRDs carry the API decided for
 * issue 10 (names, scope, printer columns, defaults, enums, limits), no container is privileged,
 * the agent has exactly the capabilities it was measured to need (agent_caps_test.ts), RBAC
 * names every verb and resource (no `*`) and keeps namespace-local rights in a Role, and the
 * policy ConfigMap carries the module `deno task build` makes.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { containers, K8S, type Obj, ofKind, one, podSpec, readManifests } from "./_manifests.ts";
import { renderPolicyConfigMap } from "../../scripts/k8s_policy_configmap.ts";

const all = await readManifests();
const NAMESPACE = "holdfast-system";

/** The API as decided (docs of issue 10): per CRD its names, scope and what a user relies on. */
const CRDS = [
  {
    file: "crds/addresspools.yaml",
    kind: "AddressPool",
    plural: "addresspools",
    short: "hfpool",
    scope: "Cluster",
    columns: ["Total", "Used", "Available", "Ready", "Age"],
    required: ["blocks"],
    defaults: { autoAssign: true, avoidBuggyIPs: false },
    enums: {},
    ranges: {},
  },
  {
    file: "crds/loadbalancerconfigs.yaml",
    kind: "LoadBalancerConfig",
    plural: "loadbalancerconfigs",
    short: "hflbc",
    scope: "Cluster",
    columns: ["Mode", "Class", "Ready", "Age"],
    required: [],
    defaults: {
      mode: "Stateful",
      flowKey: "FiveTuple",
      maglevTableSize: 16381,
      encapPort: 6080,
      loadBalancerClass: "holdfast.io/lb",
      claimServicesWithoutClass: false,
    },
    enums: { mode: ["Stateful", "Anycast"], flowKey: ["FiveTuple", "ClientIP"] },
    ranges: { maglevTableSize: [251, 131071], encapPort: [1, 65535] },
  },
  {
    file: "crds/egressnats.yaml",
    kind: "EgressNAT",
    plural: "egressnats",
    short: "hfegress",
    scope: "Namespaced",
    columns: ["Addresses", "Replicas", "Ready", "Age"],
    required: ["destinations", "addresses"],
    defaults: { replicas: 2 },
    enums: {},
    ranges: { replicas: [2, 64] },
  },
] as const;

Deno.test("k8s/: every file parses, every object is named, namespaced ones live in holdfast-system", () => {
  assert(all.length >= 20, `found ${all.length} objects`);
  for (const { file, obj } of all) {
    assert(obj.apiVersion && obj.kind && obj.metadata?.name, `${file}: apiVersion, kind, name`);
    const ns = obj.metadata.namespace;
    if (ns !== undefined && !file.startsWith("examples/")) {
      assertEquals(ns, NAMESPACE, `${file}: ${obj.kind}/${obj.metadata.name}`);
    }
  }
  for (const kind of ["Deployment", "DaemonSet", "ServiceAccount", "Role", "ConfigMap"]) {
    for (const o of ofKind(all, kind)) {
      assertEquals(o.metadata.namespace, NAMESPACE, o.metadata.name);
    }
  }
});

for (const want of CRDS) {
  Deno.test(`k8s/${want.file}: ${want.kind} as the API says`, () => {
    const crd = one(all, "CustomResourceDefinition", `${want.plural}.holdfast.io`);
    assertEquals(all.find((m) => m.obj === crd)?.file, want.file);
    assertEquals(crd.apiVersion, "apiextensions.k8s.io/v1");
    assertEquals(crd.spec.group, "holdfast.io");
    assertEquals(crd.spec.scope, want.scope);
    assertEquals(crd.spec.names.kind, want.kind);
    assertEquals(crd.spec.names.shortNames, [want.short]);
    assertEquals(crd.spec.names.categories, ["holdfast"]);
    assertEquals(crd.spec.versions.length, 1);
    const v = crd.spec.versions[0];
    assertEquals([v.name, v.served, v.storage], ["v1alpha1", true, true]);
    assertEquals(v.subresources, { status: {} });
    assertEquals(v.additionalPrinterColumns.map((c: Obj) => c.name), [...want.columns]);
    const ready = v.additionalPrinterColumns.find((c: Obj) => c.name === "Ready");
    assertEquals(ready.jsonPath, '.status.conditions[?(@.type=="Ready")].status');
    const root = v.schema.openAPIV3Schema;
    const spec = root.properties.spec;
    assertEquals(spec.required ?? [], [...want.required]);
    for (const [field, value] of Object.entries(want.defaults)) {
      assertEquals(spec.properties[field].default, value, `default of spec.${field}`);
    }
    for (const [field, values] of Object.entries(want.enums)) {
      assertEquals(spec.properties[field].enum, values, `enum of spec.${field}`);
    }
    for (const [field, [min, max]] of Object.entries(want.ranges)) {
      const p = spec.properties[field];
      assertEquals([p.minimum, p.maximum], [min, max], `range of spec.${field}`);
    }
    // Conditions are metav1.Condition, a map list keyed by type (server-side apply merges them).
    const conditions = root.properties.status.properties.conditions;
    assertEquals(conditions["x-kubernetes-list-map-keys"], ["type"]);
    assertEquals(conditions.items.required, [
      "type",
      "status",
      "reason",
      "message",
      "lastTransitionTime",
    ]);
    assertEquals(conditions.items.properties.status.enum, ["True", "False", "Unknown"]);
    assert(root.properties.status.properties.observedGeneration, "status.observedGeneration");
  });
}

Deno.test("k8s/crds: address and CIDR patterns (IPv4, and IPv6 for pools) accept addresses and refuse near misses", () => {
  const pools = one(all, "CustomResourceDefinition", "addresspools.holdfast.io");
  const block = pools.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.blocks;
  const cidr = new RegExp(block.items.properties.cidr.pattern);
  const ip = new RegExp(block.items.properties.start.pattern);
  for (const ok of ["0.0.0.0", "10.0.100.40", "255.255.255.255", "192.168.1.9"]) {
    assert(ip.test(ok), ok);
  }
  for (const bad of ["256.1.1.1", "10.0.0", "10.0.0.01", "1.2.3.4/32", " 1.2.3.4", "a.b.c.d"]) {
    assert(!ip.test(bad), bad);
  }
  for (const ok of ["0.0.0.0/0", "10.0.100.0/28", "203.0.113.10/32"]) assert(cidr.test(ok), ok);
  for (const bad of ["10.0.0.0/33", "10.0.0.0", "10.0.0.0/", "10.0.0.0/024"]) {
    assert(!cidr.test(bad), bad);
  }
  const egress = one(all, "CustomResourceDefinition", "egressnats.holdfast.io");
  const spec = egress.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties;
  // Pools take IPv6 blocks too (the controller validates the rest); EgressNAT stays IPv4.
  for (const ok of ["2001:db8:100::/64", "::/0", "2001:db8::1/128"]) assert(cidr.test(ok), ok);
  for (const bad of ["2001:db8::/129", "2001:db8::", "2001:db8::/"]) assert(!cidr.test(bad), bad);
  assert(ip.test("2001:db8:100::10") && !ip.test("2001:db8::/64"), "IPv6 start and stop");
  const egressCidr = new RegExp(spec.destinations.items.pattern);
  const egressIp = new RegExp(spec.addresses.items.pattern);
  assert(egressCidr.test("10.0.0.0/8") && !egressCidr.test("2001:db8::/64"), "IPv4 destinations");
  assert(egressIp.test("10.0.0.1") && !egressIp.test("2001:db8::1"), "IPv4 addresses");
  assertEquals([spec.destinations.minItems, spec.addresses.minItems], [1, 1]);
  const hc = spec.healthCheck.properties;
  assertEquals([hc.intervalMs.minimum, hc.intervalMs.maximum, hc.intervalMs.default], [
    10,
    10000,
    100,
  ]);
  assertEquals([hc.multiplier.minimum, hc.multiplier.maximum, hc.multiplier.default], [2, 20, 3]);
});

Deno.test("k8s/: no container is privileged; each drops ALL and has a read-only root filesystem", () => {
  const found = containers(all);
  assertEquals(found.length, 5, "controller, agent, anycast agent, node agent, redis");
  for (const { workload, container } of found) {
    const where = `${workload.kind}/${workload.metadata.name} container ${container.name}`;
    const sc = container.securityContext ?? {};
    assert(sc.privileged !== true, `${where}: privileged`);
    assertEquals(sc.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation`);
    assertEquals(sc.readOnlyRootFilesystem, true, `${where}: readOnlyRootFilesystem`);
    assertEquals(sc.capabilities?.drop, ["ALL"], `${where}: drops ALL`);
    assertEquals(container.image, "holdfast:dev", `${where}: the image deploy --image replaces`);
    const egressImage = (container.args ?? []).indexOf("--egress-image");
    if (container.name === "controller" || egressImage >= 0) {
      // The NAT pods the controller makes run its image: deploy --image replaces this value too.
      assertEquals(container.args[egressImage + 1], "holdfast:dev", `${where}: NAT pods' image`);
    }
    assert(
      container.resources?.requests && container.resources?.limits?.memory,
      `${where}: resources`,
    );
  }
});

const args0 = (c: Obj): string => c.args.join(" ");

Deno.test("k8s/agent.yaml: host network on LB nodes, the measured capabilities", () => {
  const agent = one(all, "DaemonSet", "holdfast-agent");
  const pod = podSpec(agent);
  assertEquals(pod.nodeSelector, { "holdfast.io/lb-node": "true" });
  assertEquals(pod.hostNetwork, true);
  assertEquals(pod.serviceAccountName, "holdfast-agent");
  const [c] = pod.containers;
  // The measured list (agent_caps_test.ts runs the agent with it, and without each datapath
  // one; agent_bgp_caps_test.ts without NET_BIND_SERVICE, bird's TCP 179); no SYS_ADMIN (Maglev
  // tables are pinned and opened by path), no privileged: true.
  assertEquals([...c.securityContext.capabilities.add].sort(), [
    "BPF",
    "NET_ADMIN",
    "NET_BIND_SERVICE",
    "PERFMON",
  ]);
  // bird's directory (spec.bgp through the model): writable under the read-only root.
  assert(args0(c).includes("--bgp-dir /run/holdfast/bird"), args0(c));
  assert(c.volumeMounts.some((m: Obj) => m.mountPath === "/run/holdfast"), "bird dir mounted");
  assertEquals(c.securityContext.privileged ?? false, false);
  assertEquals(c.readinessProbe.httpGet.path, "/readyz");
  const bpffs = pod.volumes.find((v: Obj) => v.hostPath?.path === "/sys/fs/bpf");
  assert(bpffs, "bpffs hostPath");
  assert(
    c.volumeMounts.some((m: Obj) => m.name === bpffs.name && m.mountPath === "/sys/fs/bpf"),
    "bpffs mounted at /sys/fs/bpf",
  );
  const args = c.args.join(" ");
  for (const part of ["main.ts agent", "--node-name $(NODE_NAME)", "--redis redis://"]) {
    assert(args.includes(part), `agent args carry "${part}": ${args}`);
  }
  assert(args.includes("--redis-password-file /run/secrets/redis/password"), args);
  // XDP on each node's own interface: the one holding the node's address; its IPv6 address
  // (dual stack) is the outer source to IPv6 pods.
  assert(args.includes("--node-address $(HOST_IPS)"), args);
  assertEquals(
    c.env.find((e: Obj) => e.name === "HOST_IPS")?.valueFrom?.fieldRef?.fieldPath,
    "status.hostIPs",
  );
  // Only the agents are on the host network or add capabilities.
  const anycast = one(all, "DaemonSet", "holdfast-anycast");
  const node = one(all, "DaemonSet", "holdfast-node");
  for (const { workload, container } of containers(all)) {
    if (workload === agent || workload === anycast || workload === node) continue;
    assert(podSpec(workload).hostNetwork !== true, `${workload.metadata.name}: hostNetwork`);
    assertEquals(container.securityContext.capabilities.add, undefined, workload.metadata.name);
    assertEquals(podSpec(workload).securityContext.runAsNonRoot, true, workload.metadata.name);
  }
});

Deno.test("k8s/anycast.yaml: every node, host network, NET_ADMIN and NET_BIND_SERVICE, --kube", () => {
  const anycast = one(all, "DaemonSet", "holdfast-anycast");
  const pod = podSpec(anycast);
  assertEquals(pod.nodeSelector, undefined);
  assertEquals(pod.hostNetwork, true);
  const [c] = pod.containers;
  assertEquals(c.command.join(" "), "deno run -P=anycast --no-prompt");
  assertEquals([...c.securityContext.capabilities.add].sort(), ["NET_ADMIN", "NET_BIND_SERVICE"]);
  const args = c.args.join(" ");
  for (const part of ["main.ts anycast", "--node-name $(NODE_NAME)", "--kube", "--bgp-dir /run/"]) {
    assert(args.includes(part), `anycast args carry "${part}": ${args}`);
  }
  assert(!args.includes("--redirect"), "flow redirection needs BPF capabilities: off here");
  // bird's directory is writable (the root filesystem is not).
  assert(c.volumeMounts.some((m: Obj) => m.mountPath === "/run/holdfast"), "/run/holdfast");
  assertEquals(c.readinessProbe.httpGet.host, "127.0.0.1");
  const role = one(all, "ClusterRole", "holdfast-anycast");
  assertEquals(
    role.rules.map((r: Obj) => `${r.resources.join(",")}:${r.verbs.join(",")}`),
    ["nodes:get", "pods:list,watch", "services:list,watch", "loadbalancerconfigs:list,watch"],
  );
});

Deno.test("k8s/node.yaml: every node, host network, BPF NET_ADMIN PERFMON, --kube and the model", () => {
  const node = one(all, "DaemonSet", "holdfast-node");
  const pod = podSpec(node);
  assertEquals(pod.nodeSelector, undefined);
  assertEquals(pod.tolerations, [{ operator: "Exists" }]);
  assertEquals(pod.hostNetwork, true);
  const [c] = pod.containers;
  assertEquals(c.command.join(" "), "deno run -P=node --no-prompt");
  // The measured list (node_caps_test.ts runs the node agent with it, and without each one).
  assertEquals([...c.securityContext.capabilities.add].sort(), ["BPF", "NET_ADMIN", "PERFMON"]);
  const args = c.args.join(" ");
  for (
    const part of [
      "main.ts node",
      "--node-name $(NODE_NAME)",
      "--kube",
      "--model redis",
      "--redis-password-file /run/secrets/redis/password",
      "--pin-dir /sys/fs/bpf/holdfast-node",
      "--listen 127.0.0.1:9472",
      "--node-address $(HOST_IPS)",
      "--egress-steer",
    ]
  ) assert(args.includes(part), `node args carry "${part}": ${args}`);
  assertEquals(c.readinessProbe.httpGet, { host: "127.0.0.1", path: "/readyz", port: 9472 });
  assertEquals(
    c.env.find((e: Obj) => e.name === "HOST_IPS")?.valueFrom?.fieldRef?.fieldPath,
    "status.hostIPs",
  );
  const bpffs = pod.volumes.find((v: Obj) => v.hostPath?.path === "/sys/fs/bpf");
  assert(
    c.volumeMounts.some((m: Obj) => m.name === bpffs?.name && m.mountPath === "/sys/fs/bpf"),
    "bpffs mounted at /sys/fs/bpf",
  );
  // It reads its Node and the Pods on it, nothing else.
  const role = one(all, "ClusterRole", "holdfast-node");
  assertEquals(
    role.rules.map((r: Obj) => `${r.resources.join(",")}:${r.verbs.join(",")}`),
    ["nodes:get", "pods:list,watch"],
  );
});

Deno.test("k8s/controller.yaml: two replicas, leader Lease, probes and metrics port", () => {
  const controller = one(all, "Deployment", "holdfast-controller");
  assertEquals(controller.spec.replicas, 2);
  const pod = podSpec(controller);
  assertEquals(pod.serviceAccountName, "holdfast-controller");
  const [c] = pod.containers;
  assert(c.args.includes("--lease=holdfast-controller"), c.args.join(" "));
  assertEquals(c.livenessProbe.httpGet.path, "/healthz");
  assertEquals(c.readinessProbe.httpGet.path, "/readyz");
  assertEquals(c.ports.map((p: Obj) => p.name), ["metrics"]);
});

Deno.test("k8s/rbac: no wildcards; per-component ServiceAccounts; namespace rights in a Role", () => {
  for (const kind of ["ClusterRole", "Role"]) {
    for (const role of ofKind(all, kind)) {
      for (const rule of role.rules) {
        for (const key of ["verbs", "resources", "apiGroups"]) {
          assert(!rule[key].includes("*"), `${kind} ${role.metadata.name}: * in ${key}`);
        }
        assert(!rule.resources.includes("secrets"), `${kind} ${role.metadata.name}: secrets`);
      }
    }
  }
  const accounts = ofKind(all, "ServiceAccount").map((s) => s.metadata.name).sort();
  assertEquals(accounts, [
    "holdfast-agent",
    "holdfast-anycast",
    "holdfast-controller",
    "holdfast-node",
    "holdfast-redis",
  ]);
  for (const workload of [...ofKind(all, "Deployment"), ...ofKind(all, "DaemonSet")]) {
    assertEquals(podSpec(workload).serviceAccountName, workload.metadata.name);
  }
  // Leases and ConfigMaps are the controller's only in its namespace.
  const clusterResources = ofKind(all, "ClusterRole").flatMap((r) =>
    r.rules.flatMap((rule: Obj) => rule.resources)
  );
  for (const local of ["leases", "configmaps"]) {
    assert(!clusterResources.includes(local), `${local} in a ClusterRole`);
  }
  const role = one(all, "Role", "holdfast-controller");
  assertEquals(role.metadata.namespace, NAMESPACE);
  const named = role.rules.filter((r: Obj) => r.resourceNames !== undefined);
  assertEquals(named.map((r: Obj) => r.resourceNames), [["holdfast-controller"], [
    "holdfast-policy",
  ]]);
  // The agent reads its Node and (anycast) Pods, nothing else.
  const agent = one(all, "ClusterRole", "holdfast-agent");
  assertEquals(
    agent.rules.map((r: Obj) => `${r.resources.join(",")}:${r.verbs.join(",")}`),
    ["nodes:get,watch", "pods:list,watch"],
  );
  for (const binding of [...ofKind(all, "ClusterRoleBinding"), ...ofKind(all, "RoleBinding")]) {
    assertEquals(binding.roleRef.name, binding.metadata.name);
    assertEquals(binding.subjects, [{
      kind: "ServiceAccount",
      name: binding.metadata.name,
      namespace: NAMESPACE,
    }]);
  }
});

Deno.test("k8s/policy-configmap.yaml matches policy-as/build/release.wasm (deno task k8s:policy-configmap)", async () => {
  const wasm = await Deno.readFile(new URL("../../policy-as/build/release.wasm", import.meta.url));
  const want = await renderPolicyConfigMap(wasm);
  const have = await Deno.readTextFile(`${K8S}policy-configmap.yaml`);
  assert(have === want, "k8s/policy-configmap.yaml is stale: run deno task k8s:policy-configmap");
  const cm = one(all, "ConfigMap", "holdfast-policy");
  assertEquals(Object.keys(cm.binaryData), ["policy.wasm"]);
});
