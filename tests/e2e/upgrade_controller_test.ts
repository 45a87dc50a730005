/**
 * Upgrading the Kubernetes controller (issue 26): the controller of the previous release
 * (`scripts/previous-release.txt`, built by `lab/previous_release.ts`) allocates a Service's
 * address and publishes the LB model; LB nodes serve it under held connections. It is replaced by
 * this build's controller (SIGTERM: it releases its Lease), then rolled back. Each new leader
 * takes the addresses from the Services' status: the Service keeps its address and status (no
 * write), the model in Redis gets no new change, and every held connection survives.
 */
import { rootTest } from "../harness/mod.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import { backendAddress, Cluster, type HostProcess } from "../../lab/mod.ts";
import { previousRelease } from "../../lab/previous_release.ts";
import { modelKeys } from "../../controller/model/mod.ts";
import { agentsCaughtUp, KubeSide, modelEntryOf, waitUntil } from "./_kube_side.ts";

const SLICE = (port: number) => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: {
    name: "web-1",
    namespace: "default",
    labels: { "kubernetes.io/service-name": "web" },
  },
  addressType: "IPv4",
  ports: [{ name: "http", port, protocol: "TCP" }],
  endpoints: [1, 2, 3].map((j) => ({
    addresses: [backendAddress(j)],
    conditions: { ready: true, serving: true, terminating: false },
  })),
});

type Svc = {
  metadata?: { resourceVersion?: string };
  status?: { loadBalancer?: { ingress?: { ip?: string }[] } };
};

rootTest(
  "upgrade: the controller rolled from the previous release to this build and back; no status write, no model change, held connections survive",
  async () => {
    const previous = await previousRelease();
    await using cluster = await Cluster.create({ lbNodes: 0, backends: 3, model: "redis" });
    const kube = new KubeSide(cluster);
    await kube.startApiServer();
    await kube.createPoolAndService([`${cluster.vip}/32`]);
    await kube.kubectl(["create", "-f", "-"], SLICE(8080));
    let controller: HostProcess = await kube.startController(previous);
    let svc: Svc = {};
    await waitUntil("the Service's address", async () => {
      svc = await kube.json<Svc>(["get", "service", "web", "-n", "default"]);
      return (svc.status?.loadBalancer?.ingress ?? []).length > 0;
    }, 30_000);
    await waitUntil("the model in Redis", async () => (await modelEntryOf(cluster)) !== undefined);
    await cluster.addLbNode(1);
    await cluster.addLbNode(2);
    await agentsCaughtUp(cluster);
    const client = await cluster.startClient(40, 50_000);
    await client.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });

    const changes = async () => {
      const { stdout } = await cluster.topo.exec("ctl", [
        "redis-cli",
        "-u",
        cluster.redis.url,
        "XLEN",
        modelKeys().changes,
      ]);
      return Number(stdout.trim());
    };
    const before = {
      address: svc.status!.loadBalancer!.ingress!.map((i) => i.ip).join(),
      resourceVersion: svc.metadata?.resourceVersion,
      entry: JSON.stringify(await modelEntryOf(cluster)),
      changes: await changes(),
    };
    const rolls: Record<string, unknown>[] = [];
    for (const release of [undefined, previous]) {
      await controller.stop("SIGTERM", 10_000);
      controller = await kube.startController(release);
      await controller.waitForLine((l) => l.includes('"msg":"became leader"'), {
        timeoutMs: 30_000,
      });
      await new Promise((r) => setTimeout(r, 3_000)); // it has taken the status and resynced
      const now = await kube.json<Svc>(["get", "service", "web", "-n", "default"]);
      const after = {
        build: release ? release.version : "this build",
        address: (now.status?.loadBalancer?.ingress ?? []).map((i) => i.ip).join(),
        resourceVersion: now.metadata?.resourceVersion,
        entry: JSON.stringify(await modelEntryOf(cluster)),
        changes: await changes(),
      };
      rolls.push(after);
    }
    const held = await clientSummary(client, 80_000);
    console.log(JSON.stringify({ previous: previous.commit, before, rolls, held }));
    const problems: string[] = [];
    for (const r of rolls) {
      if (r.address !== before.address) problems.push(`the address moved: ${JSON.stringify(r)}`);
      if (r.resourceVersion !== before.resourceVersion) {
        problems.push(`the Service was written: ${JSON.stringify(r)}`);
      }
      if (r.entry !== before.entry) problems.push(`the model entry changed: ${JSON.stringify(r)}`);
      if (r.changes !== before.changes) {
        problems.push(`the model got changes: ${JSON.stringify(r)}`);
      }
    }
    if (held.survived !== held.connections) {
      problems.push(`${held.connections - held.survived} of ${held.connections} connections lost`);
    }
    if (problems.length) throw new Error(problems.join("\n"));
  },
);
