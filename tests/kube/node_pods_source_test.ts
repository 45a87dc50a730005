/**
 * The node agent's Kubernetes pod source (node/backends/kube_pods.ts) against the API test server
 * through the real client-node: only the pods of its node (field selector spec.nodeName), with
 * their status.podIPs; host-network and finished pods left out; a pod that gets its address, or
 * is deleted, reaches the agent as a new list.
 */
import { deepStrictEqual } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { kubeConfigFor, startKubeServer } from "../../lab/kube/mod.ts";
import { waitFor } from "./_kubectl.ts";
import { kubePodSource } from "../../node/backends/kube_pods.ts";
import type { LocalPod } from "../../node/backends/plan.ts";
import { log } from "../../lib/log.ts";

Deno.test("kubePodSource: the pods of this node with their addresses, following changes", async () => {
  await using server = await startKubeServer();
  const dir = await Deno.makeTempDir({ prefix: "hf-nodepods-kube-" });
  const kubeconfig = await server.writeKubeconfig(`${dir}/kubeconfig`);
  const core = (await kubeConfigFor(server)).makeApiClient(k8s.CoreV1Api);
  await core.createNode({ body: { metadata: { name: "node1" } } });
  const pod = async (
    name: string,
    node: string,
    ips: string[],
    extra: Partial<k8s.V1PodSpec> = {},
    phase = "Running",
  ) => {
    const created = await core.createNamespacedPod({
      namespace: "shop",
      body: {
        metadata: { name, namespace: "shop" },
        spec: { nodeName: node, containers: [{ name: "c", image: "x" }], ...extra },
      },
    });
    if (ips.length === 0) return;
    await core.replaceNamespacedPodStatus({
      name,
      namespace: "shop",
      body: { ...created, status: { phase, podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) } },
    });
  };
  await core.createNamespace({ body: { metadata: { name: "shop" } } });
  await pod("web-1", "node1", ["10.2.0.5", "2001:db8:2::5"]);
  await pod("web-2", "node2", ["10.2.1.5"]);
  await pod("host", "node1", ["10.9.0.1"], { hostNetwork: true });
  await pod("done", "node1", ["10.2.0.9"], {}, "Succeeded");
  await pod("web-3", "node1", []);
  const seen: (readonly LocalPod[])[] = [];
  const source = kubePodSource(kubeconfig, "node1", log.with({ component: "test" }));
  try {
    await source.start((pods) => {
      seen.push(pods);
      return Promise.resolve();
    });
    const last = () => [...(seen.at(-1) ?? [])].sort((a, b) => a.name.localeCompare(b.name));
    deepStrictEqual(last(), [{ name: "shop/web-1", ips: ["10.2.0.5", "2001:db8:2::5"] }]);
    // web-3 gets its address; web-1 is deleted.
    const w3 = await core.readNamespacedPod({ name: "web-3", namespace: "shop" });
    await core.replaceNamespacedPodStatus({
      name: "web-3",
      namespace: "shop",
      body: { ...w3, status: { phase: "Running", podIPs: [{ ip: "10.2.0.7" }] } },
    });
    await core.deleteNamespacedPod({ name: "web-1", namespace: "shop", gracePeriodSeconds: 0 });
    await waitFor(
      "web-3 in, web-1 out",
      () => JSON.stringify(last()) === JSON.stringify([{ name: "shop/web-3", ips: ["10.2.0.7"] }]),
    );
  } finally {
    await source.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
