/**
 * The LoadBalancerConfig's `encapPort` and `lbNodeSelector` in the LB model (issue 10): the
 * controller against the Kubernetes API test server publishes, in a real redis-server, the port
 * and the names of the Nodes the selector selects; relabelling a Node updates the list; an agent
 * following that model (in-memory maps) on a node left out serves no frontend while one on a
 * selected node serves them all.
 */
import { deepStrictEqual } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { startController } from "../../controller/k8s/run.ts";
import { connectModelStore, startModelPublisher } from "../../controller/model/mod.ts";
import {
  MODEL_YAML,
  startTestAgent,
  startTestController,
} from "../../controller/model/_testing.ts";
import { kubeConfigFor, startKubeServer } from "../../lab/kube/mod.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { waitFor } from "./_kubectl.ts";

const LB = "holdfast.io/lb-node";

async function labelNode(core: k8s.CoreV1Api, name: string, value: string | null) {
  await core.patchNode(
    { name, body: { metadata: { labels: { [LB]: value } } } },
    k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
  );
}

Deno.test("LB settings: encapPort and the nodes lbNodeSelector selects reach the model in Redis and follow Node labels; an agent left out serves nothing", async () => {
  await using server = await startKubeServer({ crdDirs: ["k8s/crds"] });
  await using redisServer = await startRedis();
  const kc = await kubeConfigFor(server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  for (const [name, lb] of [["n1", true], ["n2", true], ["n3", false]] as const) {
    await core.createNode({ body: { metadata: { name, labels: lb ? { [LB]: "true" } : {} } } });
  }
  await kc.makeApiClient(k8s.CustomObjectsApi).createClusterCustomObject({
    group: "holdfast.io",
    version: "v1alpha1",
    plural: "loadbalancerconfigs",
    body: {
      apiVersion: "holdfast.io/v1alpha1",
      kind: "LoadBalancerConfig",
      metadata: { name: "default" },
      spec: { encapPort: 7000, lbNodeSelector: { matchLabels: { [LB]: "true" } } },
    },
  });
  const store = connectModelStore({ url: redisServer.url });
  try {
    // As main.ts wires them: the controller's settings go to the publisher.
    await using running = startController(kc, { identity: "controller-0" });
    await running.synced;
    await using pub = startModelPublisher(running.cp, store, {});
    running.onModelSettings((s) => pub.setSettings(s));
    pub.setSettings(running.modelSettings());
    await pub.synced();
    const stored = async () => JSON.parse((await store.snapshot()).settings || "{}");
    await waitFor("the settings in Redis", async () => (await stored()).encapPort === 7000);
    deepStrictEqual(await stored(), { encapPort: 7000, lbNodes: ["n1", "n2"] });

    // n3 labelled, n1 not any more: the list follows.
    await labelNode(core, "n3", "true");
    await labelNode(core, "n1", null);
    await waitFor("n1 out, n3 in", async () => (await stored()).lbNodes?.join() === "n2,n3");
    deepStrictEqual(await stored(), { encapPort: 7000, lbNodes: ["n2", "n3"] });

    // Agents following this model: n1 (left out) withdraws, n2 (selected) serves. Their
    // services come from a second publisher's file (the controller's has none and writes no
    // service; the settings stay the controller's).
    await using _ctl = await startTestController(store, MODEL_YAML);
    const ports: number[] = [];
    await using n1 = await startTestAgent(store, {
      nodeName: "n1",
      onSettings: (s) => void ports.push(s.encapPort ?? 0),
    });
    await using n2 = await startTestAgent(store, { nodeName: "n2" });
    await n1.source.ready();
    await waitFor("n2 serves both frontends", () => n2.maps.services.size === 2);
    await n1.cp.reconciler.waitIdleWithin(2_000);
    deepStrictEqual([n1.source.serving, n1.maps.services.size, ports], [false, 0, [7000]]);
    await labelNode(core, "n1", "true");
    await waitFor("n1 selected again serves", () => n1.maps.services.size === 2);
  } finally {
    await store.close();
  }
});
