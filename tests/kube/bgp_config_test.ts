/**
 * BGP settings from Kubernetes: a LoadBalancerConfig with `spec.bgp` (one good peer, one whose
 * address is not IPv4, one selecting other nodes) applied with the real kubectl; the controller
 * reports `PeersAccepted=False` naming the bad peer and a `PeersRefused` Event, and an anycast
 * agent's settings derived from the same objects (its Node's InternalIP, labels) keep the good
 * peer; fixed, the condition turns True.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { startController } from "../../controller/k8s/run.ts";
import { kubeConfigFor } from "../../lab/kube/mod.ts";
import { kubeBgpSettings } from "../../node/anycast/kube_source.ts";
import type { KubeObject } from "../../controller/k8s/objects.ts";
import { kubectlEnv, waitFor } from "./_kubectl.ts";

const CONFIG = (badAddress: string) => `
apiVersion: holdfast.io/v1alpha1
kind: LoadBalancerConfig
metadata: { name: default }
spec:
  mode: Anycast
  bgp:
    localAsn: 65100
    prefixes: [10.0.100.0/24]
    communities: ["65000:100"]
    peers:
      - { address: 10.9.1.1, asn: 65000, bfd: { intervalMs: 100 } }
      - { address: "${badAddress}", asn: 65000 }
      - { address: 10.9.9.1, asn: 65009, nodeSelector: { matchLabels: { rack: r9 } } }
`;

Deno.test("bgp config: a bad peer is PeersAccepted=False and an Event; an agent's settings keep the good peer", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  await kc.makeApiClient(k8s.CoreV1Api).createNode({
    body: { metadata: { name: "n1", labels: { rack: "r1" } } },
  });
  await kc.makeApiClient(k8s.CoreV1Api).patchNodeStatus(
    {
      name: "n1",
      body: { status: { addresses: [{ type: "InternalIP", address: "10.9.1.2" }] } },
    },
    k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
  );
  await env.ok(["apply", "-f", "-"], CONFIG("10.9.1.300"));
  await using running = startController(kc, { identity: "controller-0" });
  await running.synced;
  const peers = async () => {
    const cfg = JSON.parse(await env.ok(["get", "hflbc", "default", "-o", "json"]));
    return (cfg.status?.conditions ?? []).find((c: { type: string }) =>
      c.type === "PeersAccepted"
    ) as { status: string; reason: string; message: string } | undefined;
  };
  await waitFor("PeersAccepted=False", async () => (await peers())?.status === "False", 10_000);
  const refused = (await peers())!;
  deepStrictEqual(refused.reason, "PeersRefused");
  ok(refused.message.includes('"10.9.1.300"'), `the bad peer is not named: ${refused.message}`);
  ok(refused.message.includes("spec.bgp.peers[1].address"), refused.message);
  ok(refused.message.includes("the other 2 peers keep announcing"), refused.message);
  await waitFor("the PeersRefused Event", async () => {
    const list = await kc.makeApiClient(k8s.EventsV1Api).listNamespacedEvent({
      namespace: "default",
    });
    return list.items.some((e) => e.reason === "PeersRefused" && e.note?.includes("10.9.1.300"));
  });

  // The agent's side: the same objects as its informers see them.
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const configs = (await custom.listClusterCustomObject({
    group: "holdfast.io",
    version: "v1alpha1",
    plural: "loadbalancerconfigs",
  }) as { items: KubeObject[] }).items;
  const node = await kc.makeApiClient(k8s.CoreV1Api).readNode({ name: "n1" }) as KubeObject;
  const derived = kubeBgpSettings(configs, node)!;
  deepStrictEqual(derived.settings.routerId, "10.9.1.2");
  deepStrictEqual(derived.settings.localAsn, 65100);
  deepStrictEqual(derived.settings.communities, ["65000:100"]);
  deepStrictEqual(derived.settings.peers, [
    { address: "10.9.1.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } },
  ]);
  deepStrictEqual(derived.problems.map((p) => p.peer), ["10.9.1.300"]);

  // Fixed: True, and the third peer's node (rack r9) would peer with it too.
  await env.ok(["apply", "-f", "-"], CONFIG("10.9.2.1"));
  await waitFor("PeersAccepted=True", async () => (await peers())?.status === "True", 10_000);
  deepStrictEqual((await peers())!.message, "3 peers");
});

Deno.test("bgp config: the schema refuses an ASN out of range and BFD timers out of range", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  for (
    const bad of [
      "{ address: 10.9.1.1, asn: 0 }",
      "{ address: 10.9.1.1, asn: 65000, bfd: { intervalMs: 1 } }",
    ]
  ) {
    const r = await env.kubectl(["apply", "-f", "-"], {
      stdin: `apiVersion: holdfast.io/v1alpha1
kind: LoadBalancerConfig
metadata: { name: default }
spec: { bgp: { localAsn: 65100, prefixes: [10.0.100.0/24], peers: [${bad}] } }
`,
    });
    ok(r.code !== 0, `applied: ${bad}`);
    ok(/spec\.bgp\.peers\[0\]\.(asn|bfd\.intervalMs)/.test(r.stderr), r.stderr);
  }
});
