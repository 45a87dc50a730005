/**
 * The EgressNAT reconciler (controller/k8s/egress.ts) against the Kubernetes API test server and
 * a real redis-server: the config the NAT pods read from Redis is what the file source would read
 * and follows the labelled pods; an invalid object gets Ready=False InvalidSpec and a Warning
 * Event while a valid one beside it is still published; a lease in Redis shows in status.owners.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { parseEgressConfig } from "../../controller/egress/config.ts";
import { RedisLeaseStore } from "../../controller/egress/lease.ts";
import { readStoredEgressConfig } from "../../controller/egress/redis_config.ts";
import { startController } from "../../controller/k8s/run.ts";
import { kubeConfigFor, startKubeServer } from "../../lab/kube/mod.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { waitFor } from "./_kubectl.ts";

const NS = "default";

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
        addresses: ["198.18.0.100", "198.18.0.101"],
        gateways: ["10.8.0.100", "10.8.0.101"],
        sources: [{ prefix: "10.8.0.0/26" }],
        snatPorts: "10000-29999",
        ...spec,
      },
    },
  };
}

/** A NAT pod of EgressNAT `nat` with `ip` as its status.podIP. */
async function natPod(core: k8s.CoreV1Api, name: string, nat: string, ip: string) {
  await core.createNamespacedPod({
    namespace: NS,
    body: {
      metadata: { name, labels: { "holdfast.io/egress": nat } },
      spec: { containers: [{ name: "agent", image: "holdfast:test" }] },
    },
  });
  await core.patchNamespacedPodStatus(
    { name, namespace: NS, body: { status: { phase: "Running", podIP: ip } } },
    k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
  );
}

// deno-lint-ignore no-explicit-any
type Obj = any;

async function natStatus(kc: k8s.KubeConfig, name: string): Promise<Obj> {
  const o: Obj = await kc.makeApiClient(k8s.CustomObjectsApi).getNamespacedCustomObjectStatus({
    group: "holdfast.io",
    version: "v1alpha1",
    plural: "egressnats",
    namespace: NS,
    name,
  });
  return o.status ?? {};
}

const ready = (s: Obj) => s.conditions?.find((c: Obj) => c.type === "Ready");

Deno.test("egress controller: the config in Redis follows the EgressNAT and its pods; invalid objects are reported; leases show as owners", async () => {
  await using server = await startKubeServer({ crdDirs: ["k8s/crds"] });
  await using redisServer = await startRedis();
  const kc = await kubeConfigFor(server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const redis = new RedisConnection({ url: redisServer.url, logComponent: "test" });
  try {
    await custom.createNamespacedCustomObject(egressNat("internet"));
    await natPod(core, "nat-a", "internet", "10.8.0.21");
    await natPod(core, "nat-b", "internet", "10.8.0.22");
    await natPod(core, "other", "elsewhere", "10.8.0.29"); // another EgressNAT's pod
    await using running = startController(kc, {
      identity: "controller-0",
      egressRedis: redis,
      egressPollMs: 100,
    });
    await running.synced;

    // Two pods with IPs: the published config is what the file source reads, both peers listed.
    let stored = await readStoredEgressConfig(redis, "default/internet");
    await waitFor("the config", async () => {
      stored = await readStoredEgressConfig(redis, "default/internet");
      return stored !== null;
    });
    const expected = parseEgressConfig({
      name: "default/internet",
      destinations: ["198.18.0.0/24"],
      addresses: [
        { address: "198.18.0.100", gateway: "10.8.0.100" },
        { address: "198.18.0.101", gateway: "10.8.0.101" },
      ],
      sources: [{ prefix: "10.8.0.0/26" }],
      peers: [{ name: "nat-a", address: "10.8.0.21" }, { name: "nat-b", address: "10.8.0.22" }],
      interfaces: { internal: "int0", external: "ext0" },
      ports: { health: 7946, sync: 7947 },
      healthCheck: { intervalMs: 100, multiplier: 3 },
      snatPorts: "10000-29999",
    });
    deepStrictEqual(stored!.config, expected);
    deepStrictEqual(parseEgressConfig(JSON.parse(JSON.stringify(stored!.config))), expected);
    const rev = stored!.rev;

    // A third pod joins: the config lists it, with a new revision.
    await natPod(core, "nat-c", "internet", "10.8.0.23");
    await waitFor("the third peer", async () => {
      stored = await readStoredEgressConfig(redis, "default/internet");
      return stored?.config.peers.length === 3;
    });
    deepStrictEqual(stored!.config.peers.map((p) => p.name), ["nat-a", "nat-b", "nat-c"]);
    ok(stored!.rev > rev, `revision ${stored!.rev} after ${rev}`);

    // Not Ready while no pod owns an address.
    await waitFor(
      "Ready=False",
      async () => ready(await natStatus(kc, "internet"))?.status === "False",
    );
    deepStrictEqual(ready(await natStatus(kc, "internet")).reason, "AddressesUnowned");

    // Leases in Redis (as the NAT pods take them) show in status.owners, then Ready.
    const leases = new RedisLeaseStore(redis, "default/internet");
    const a = await leases.acquire("198.18.0.100", "nat-a/boot1", 60_000);
    const b = await leases.acquire("198.18.0.101", "nat-b/boot2", 60_000);
    ok(a.acquired && b.acquired);
    let status: Obj = {};
    await waitFor("owners", async () => {
      status = await natStatus(kc, "internet");
      return status.owners?.length === 2;
    });
    deepStrictEqual(status.owners, [
      { address: "198.18.0.100", pod: "nat-a", epoch: a.epoch },
      { address: "198.18.0.101", pod: "nat-b", epoch: b.epoch },
    ]);
    await waitFor(
      "Ready=True",
      async () => ready(await natStatus(kc, "internet"))?.status === "True",
    );

    // An invalid EgressNAT beside it: condition and Event; the valid one is still published.
    await natPod(core, "bad-a", "broken", "10.8.0.31");
    await custom.createNamespacedCustomObject(
      egressNat("broken", { gateways: ["10.8.0.200"] }),
    );
    await custom.createNamespacedCustomObject(egressNat("second", {
      addresses: ["198.18.0.110"],
      gateways: ["10.8.0.110"],
    }));
    await natPod(core, "second-a", "second", "10.8.0.41");
    await waitFor(
      "InvalidSpec",
      async () => ready(await natStatus(kc, "broken"))?.reason === "InvalidSpec",
    );
    const cond = ready(await natStatus(kc, "broken"));
    deepStrictEqual(cond.status, "False");
    ok(cond.message.includes('field "spec.gateways"'), cond.message);
    ok(cond.message.includes("expected 2"), cond.message);
    const events = kc.makeApiClient(k8s.EventsV1Api);
    await waitFor(
      "the Warning Event",
      async () =>
        (await events.listNamespacedEvent({ namespace: NS })).items.some((e) =>
          e.reason === "InvalidSpec" && e.regarding?.name === "broken" && e.type === "Warning"
        ),
    );
    deepStrictEqual(await readStoredEgressConfig(redis, "default/broken"), null);
    await waitFor(
      "the second config",
      async () =>
        (await readStoredEgressConfig(redis, "default/second"))?.config.peers[0]?.name ===
          "second-a",
    );
    deepStrictEqual(
      (await readStoredEgressConfig(redis, "default/internet"))?.config.peers.length,
      3,
    );

    // A field parseEgressConfig refuses is named as the spec field.
    await custom.patchNamespacedCustomObject(
      {
        group: "holdfast.io",
        version: "v1alpha1",
        plural: "egressnats",
        namespace: NS,
        name: "second",
        body: { spec: { sources: [{ prefix: "10.9.0.0/24", address: "198.18.0.111" }] } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await waitFor(
      "the second invalid",
      async () => ready(await natStatus(kc, "second"))?.reason === "InvalidSpec",
    );
    const m = ready(await natStatus(kc, "second")).message;
    ok(m.includes('field "spec.sources[0].address"'), m);
    // The last valid config stays for the pods.
    deepStrictEqual(
      (await readStoredEgressConfig(redis, "default/second"))?.config.sources[0]?.prefix,
      "10.8.0.0/26",
    );

    // A deleted EgressNAT's config goes.
    await custom.deleteNamespacedCustomObject({
      group: "holdfast.io",
      version: "v1alpha1",
      plural: "egressnats",
      namespace: NS,
      name: "internet",
    });
    await waitFor(
      "config removed",
      async () => (await readStoredEgressConfig(redis, "default/internet")) === null,
    );
  } finally {
    await redis.close();
  }
});
