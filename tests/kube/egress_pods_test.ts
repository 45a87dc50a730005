/**
 * The controller makes each EgressNAT's NAT pods (controller/k8s/_egress_workloads.ts), against
 * the Kubernetes API test server (with its garbage collector) and a real redis-server: the
 * Deployment and PodDisruptionBudget appear with the spec's replicas, the agent's arguments and
 * owner references; replicas follow the spec; a Deployment edited or deleted behind the controller
 * is put back; a Deployment of the same name it does not own is left alone and reported
 * (condition, Warning Event) while the others keep working; deleting the EgressNAT removes both.
 * Sources by selector: the selected pods' addresses (both families) reach the config in Redis.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { readStoredEgressConfig } from "../../controller/egress/redis_config.ts";
import { startController } from "../../controller/k8s/run.ts";
import { kubeConfigFor, startKubeServer } from "../../lab/kube/mod.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { waitFor } from "./_kubectl.ts";

const NS = "default";
const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
// deno-lint-ignore no-explicit-any
type Obj = any;
/** client-node's model objects as plain JSON. */
const plain = (x: unknown): Obj => x === undefined ? undefined : JSON.parse(JSON.stringify(x));

function egressNat(name: string, spec: Record<string, unknown> = {}) {
  return {
    group: "holdfast.io",
    version: "v1alpha1",
    plural: "egressnats",
    namespace: NS,
    body: {
      apiVersion: "holdfast.io/v1alpha1",
      kind: "EgressNAT",
      metadata: { name },
      spec: {
        destinations: ["198.18.0.0/24"],
        addresses: ["198.18.0.100"],
        gateways: ["10.8.0.100"],
        sources: [{ prefix: "10.8.0.0/26" }],
        ...spec,
      },
    },
  };
}

const CRD = { group: "holdfast.io", version: "v1alpha1", plural: "egressnats", namespace: NS };

async function pod(
  core: k8s.CoreV1Api,
  name: string,
  labels: Record<string, string>,
  ips: string[],
) {
  await core.createNamespacedPod({
    namespace: NS,
    body: { metadata: { name, labels }, spec: { containers: [{ name: "c", image: "x" }] } },
  });
  await core.patchNamespacedPodStatus({
    name,
    namespace: NS,
    body: { status: { phase: "Running", podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) } },
  }, MERGE);
}

Deno.test("egress NAT pods: the controller owns a Deployment and a PDB per EgressNAT and keeps them as the spec says", async () => {
  await using server = await startKubeServer({ crdDirs: ["k8s/crds"] });
  await using redisServer = await startRedis();
  const kc = await kubeConfigFor(server);
  const apps = kc.makeApiClient(k8s.AppsV1Api);
  const policy = kc.makeApiClient(k8s.PolicyV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const redis = new RedisConnection({ url: redisServer.url, logComponent: "test" });
  const deployment = (name: string) =>
    apps.readNamespacedDeployment({ name, namespace: NS }).catch(() => undefined);
  const pdb = (name: string) =>
    policy.readNamespacedPodDisruptionBudget({ name, namespace: NS }).catch(() => undefined);
  const status = async (name: string): Promise<Obj> =>
    ((await custom.getNamespacedCustomObjectStatus({ ...CRD, name })) as Obj).status ?? {};
  const natPods = (s: Obj) => s.conditions?.find((c: Obj) => c.type === "NATPods");
  try {
    await using running = startController(kc, {
      identity: "controller-0",
      egressRedis: redis,
      egressPollMs: 100,
      egressWorkload: { image: "registry.example/holdfast:test", redisUrl: redisServer.url },
    });
    await running.synced;
    const nat: Obj = await custom.createNamespacedCustomObject(egressNat("internet"));

    // Created with the spec's replicas (the CRD's default 2), the agent's arguments, owned.
    let dep: k8s.V1Deployment | undefined;
    await waitFor("the Deployment", async () => (dep = await deployment("internet")) !== undefined);
    await waitFor("the PDB", async () => (await pdb("internet")) !== undefined);
    const owner = {
      apiVersion: "holdfast.io/v1alpha1",
      kind: "EgressNAT",
      name: "internet",
      uid: nat.metadata.uid,
      controller: true,
      blockOwnerDeletion: true,
    };
    deepStrictEqual(plain(dep!.metadata?.ownerReferences), [owner]);
    deepStrictEqual(plain((await pdb("internet"))!.metadata?.ownerReferences), [owner]);
    deepStrictEqual((await pdb("internet"))!.spec?.maxUnavailable, 1);
    deepStrictEqual(dep!.spec?.replicas, 2);
    deepStrictEqual(plain(dep!.spec?.selector.matchLabels), { "holdfast.io/egress": "internet" });
    const c = dep!.spec!.template.spec!.containers[0]!;
    deepStrictEqual(c.image, "registry.example/holdfast:test");
    deepStrictEqual(c.args?.slice(0, 5), [
      "main.ts",
      "egress",
      "--egress=default/internet",
      "--name=$(POD_NAME)",
      `--redis=${redisServer.url}`,
    ]);
    const anti = dep!.spec!.template.spec!.affinity!.podAntiAffinity!;
    deepStrictEqual(
      anti.preferredDuringSchedulingIgnoredDuringExecution![0]!.podAffinityTerm.topologyKey,
      "kubernetes.io/hostname",
    );
    await waitFor("NATPods=True", async () => natPods(await status("internet"))?.status === "True");

    // Replicas follow the spec.
    await custom.patchNamespacedCustomObject({
      ...CRD,
      name: "internet",
      body: { spec: { replicas: 3 } },
    }, MERGE);
    await waitFor("replicas 3", async () => (await deployment("internet"))?.spec?.replicas === 3);

    // An edit behind the controller's back is put back.
    await apps.patchNamespacedDeployment({
      name: "internet",
      namespace: NS,
      body: { spec: { replicas: 7 } },
    }, MERGE);
    await waitFor(
      "replicas put back",
      async () => (await deployment("internet"))?.spec?.replicas === 3,
    );

    // A deleted Deployment comes back (a new object); a deleted PDB too.
    const uid = (await deployment("internet"))!.metadata!.uid;
    await apps.deleteNamespacedDeployment({ name: "internet", namespace: NS });
    await policy.deleteNamespacedPodDisruptionBudget({ name: "internet", namespace: NS });
    await waitFor("recreated", async () => {
      const d = await deployment("internet");
      return d !== undefined && d.metadata?.uid !== uid && (await pdb("internet")) !== undefined;
    });
    deepStrictEqual((await deployment("internet"))!.spec?.replicas, 3);

    // A Deployment of the same name that is not ours: left alone, reported; the rest works.
    await apps.createNamespacedDeployment({
      namespace: NS,
      body: {
        metadata: { name: "taken", labels: { "holdfast.io/egress": "taken" } },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: "mine" } },
          template: {
            metadata: { labels: { app: "mine" } },
            spec: { containers: [{ name: "c", image: "mine" }] },
          },
        },
      },
    });
    await custom.createNamespacedCustomObject(egressNat("taken"));
    await waitFor("Conflict", async () => natPods(await status("taken"))?.reason === "Conflict");
    ok(natPods(await status("taken")).message.includes('Deployment "default/taken" exists'));
    deepStrictEqual((await deployment("taken"))!.spec?.replicas, 1);
    deepStrictEqual((await deployment("taken"))!.metadata?.ownerReferences, undefined);
    const events = kc.makeApiClient(k8s.EventsV1Api);
    await waitFor(
      "the Warning Event",
      async () =>
        (await events.listNamespacedEvent({ namespace: NS })).items.some((e) =>
          e.reason === "NATPodsConflict" && e.regarding?.name === "taken" && e.type === "Warning"
        ),
    );
    deepStrictEqual(natPods(await status("internet"))?.status, "True");

    // Clients by selector: the selected pods' addresses, both families, reach Redis (once a NAT
    // pod runs: no kubelet here, so one is written as the Deployment's would be).
    await pod(core, "internet-1", { "holdfast.io/egress": "internet" }, ["10.8.0.21"]);
    await pod(core, "web-1", { app: "web" }, ["10.8.0.11", "fd00:8::11"]);
    await pod(core, "db-1", { app: "db" }, ["10.8.0.12"]);
    await custom.patchNamespacedCustomObject({
      ...CRD,
      name: "internet",
      body: {
        spec: {
          sources: [{ prefix: "10.9.0.0/26" }, { podSelector: { matchLabels: { app: "web" } } }],
        },
      },
    }, MERGE);
    await waitFor("the selected pod in the config", async () => {
      const stored = await readStoredEgressConfig(redis, "default/internet");
      return stored?.clients.length === 1;
    });
    const stored = await readStoredEgressConfig(redis, "default/internet");
    deepStrictEqual(stored!.config.sources.map((s) => s.prefix), ["10.9.0.0/26", "10.8.0.11/32"]);
    deepStrictEqual(stored!.clients, [
      { pod: "default/web-1", ips: ["10.8.0.11", "fd00:8::11"], address: "198.18.0.100" },
    ]);
    await pod(core, "web-2", { app: "web" }, ["10.8.0.13"]);
    await waitFor(
      "a new client pod follows",
      async () => (await readStoredEgressConfig(redis, "default/internet"))?.clients.length === 2,
    );

    // The CRD refuses a source with both a prefix and a selector (CEL rule), naming the field.
    const refused = await custom.createNamespacedCustomObject(egressNat("both", {
      sources: [{ prefix: "10.9.0.0/26", podSelector: {} }],
    })).then(() => "", (err) => String(err?.body ?? err));
    ok(refused.includes("set either prefix or podSelector/namespaceSelector"), refused);
    ok(refused.includes("spec.sources[0]"), refused);

    // A Foreground delete ends: the controller does not make again what the collector deletes.
    await custom.createNamespacedCustomObject(egressNat("fg"));
    await waitFor("fg's Deployment", async () => (await deployment("fg")) !== undefined);
    await custom.deleteNamespacedCustomObject({
      ...CRD,
      name: "fg",
      propagationPolicy: "Foreground",
    });
    await waitFor(
      "fg and its objects gone",
      async () =>
        (await deployment("fg")) === undefined && (await pdb("fg")) === undefined &&
        (await custom.getNamespacedCustomObject({ ...CRD, name: "fg" }).then(
          () => false,
          () => true,
        )),
    );

    // Deleting the EgressNAT removes its Deployment and PDB (owner references, garbage collector).
    await custom.deleteNamespacedCustomObject({ ...CRD, name: "internet" });
    await waitFor(
      "owned objects gone",
      async () =>
        (await deployment("internet")) === undefined && (await pdb("internet")) === undefined,
    );
    ok((await deployment("taken")) !== undefined, "the Deployment not ours stays");
  } finally {
    await redis.close();
  }
});
