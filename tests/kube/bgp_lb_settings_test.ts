/**
 * The LoadBalancerConfig's `spec.bgp` for stateful LB nodes (issue 12): applied with kubectl,
 * the controller against the Kubernetes API test server publishes it in the model settings in a
 * real redis-server — refused peers left out, each peer's `nodeSelector` resolved to the Nodes
 * it selects — and what every LB node derives from it (router id its address, its peers)
 * follows a relabelled Node.
 */
import { deepStrictEqual } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { startController } from "../../controller/k8s/run.ts";
import { connectModelStore, startModelPublisher } from "../../controller/model/mod.ts";
import { lbNodeBgpSettings, type ModelBgp } from "../../controller/model/settings.ts";
import { kubeConfigFor } from "../../lab/kube/mod.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { kubectlEnv, waitFor } from "./_kubectl.ts";

const CONFIG = `apiVersion: holdfast.io/v1alpha1
kind: LoadBalancerConfig
metadata:
  name: default
spec:
  bgp:
    localAsn: 65100
    prefixes: [10.0.100.0/24]
    communities: ["65000:100"]
    peers:
      - address: 10.9.0.1
        asn: 65000
        bfd: { intervalMs: 100, multiplier: 3 }
      - address: 10.9.1.1
        asn: 65000
        nodeSelector: { matchLabels: { rack: r1 } }
      - address: 10.9.1.300
        asn: 65000
`;

Deno.test("BGP for LB nodes: spec.bgp applied with kubectl reaches the model settings in Redis, peers resolved per node, and follows Node labels", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  await using redisServer = await startRedis();
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  for (const [name, rack] of [["n1", "r1"], ["n2", "r2"]] as const) {
    await core.createNode({ body: { metadata: { name, labels: { rack } } } });
  }
  const store = connectModelStore({ url: redisServer.url });
  try {
    await env.ok(["apply", "-f", "-"], CONFIG);
    await using running = startController(kc, { identity: "controller-0" });
    await running.synced;
    await using pub = startModelPublisher(running.cp, store, {});
    running.onModelSettings((s) => pub.setSettings(s));
    pub.setSettings(running.modelSettings());
    await pub.synced();
    const stored = async (): Promise<{ bgp?: ModelBgp }> =>
      JSON.parse((await store.snapshot()).settings || "{}");
    await waitFor("spec.bgp in Redis", async () => (await stored()).bgp !== undefined);
    deepStrictEqual((await stored()).bgp, {
      localAsn: 65100,
      prefixes: ["10.0.100.0/24"],
      communities: ["65000:100"],
      peers: [
        { address: "10.9.0.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } },
        { address: "10.9.1.1", asn: 65000, nodes: ["n1"] },
      ],
    });
    const peersOf = async (node: string, address: string) => {
      const bgp = (await stored()).bgp!;
      if ("refused" in bgp) throw new Error(`refused: ${bgp.refused}`);
      const { settings } = lbNodeBgpSettings(bgp, node, address);
      deepStrictEqual([settings.routerId, settings.announce], [address, "lb"]);
      return settings.peers.map((p) => p.address).join();
    };
    deepStrictEqual(await peersOf("n1", "10.9.1.2"), "10.9.0.1,10.9.1.1");
    deepStrictEqual(await peersOf("n2", "10.9.2.2"), "10.9.0.1");

    // n2 moves to rack r1: it peers with r1's router too; n1 keeps its peers.
    await env.ok(["label", "node", "n2", "rack=r1", "--overwrite"]);
    await waitFor(
      "n2 peers with 10.9.1.1",
      async () => (await peersOf("n2", "10.9.2.2")).includes("10.9.1.1"),
    );
    deepStrictEqual(await peersOf("n1", "10.9.1.2"), "10.9.0.1,10.9.1.1");

    // A bad cluster-wide field: published as refused (agents keep what they run).
    await env.ok([
      "patch",
      "loadbalancerconfig",
      "default",
      "--type=merge",
      "-p",
      '{"spec":{"bgp":{"localAsn":23456}}}',
    ]);
    await waitFor("refused in Redis", async () => "refused" in ((await stored()).bgp ?? {}));

    // spec.bgp removed: no bgp in the model (no bird on the LB nodes).
    await env.ok([
      "patch",
      "loadbalancerconfig",
      "default",
      "--type=json",
      "-p",
      '[{"op":"remove","path":"/spec/bgp"}]',
    ]);
    await waitFor("no bgp in Redis", async () => (await stored()).bgp === undefined);
  } finally {
    await store.close();
  }
});
