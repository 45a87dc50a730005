/**
 * Kubernetes dual stack end to end: the API test server (lab/kube/) defaults a PreferDualStack
 * Service to both families, `main.ts controller` gives it an IPv4 and an IPv6 address out of one
 * AddressPool holding both, and publishes its frontends of both families with the backends of
 * the EndpointSlice of each family (before the IPv6 address exists, the IPv4 frontend alone with
 * the IPv4 slice); an LB node's agent (real XDP, `--model redis`) programs the
 * IPv4 frontend with the IPv4 backends only and the IPv6 frontend in hf_services6, and clients of
 * both families get through the router to the backends.
 *
 * Topology: lab/cluster.ts dual stack (client — router — LB node 1 — backends 1..2), the API
 * server, kubectl and the controller in its `ctl` namespace (tests/e2e/_kube_side.ts).
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import {
  backendAddress,
  backendAddress6,
  Cluster,
  frontendsOf,
  maglevBackendsOf,
} from "../../lab/mod.ts";
import { BpfMap } from "../../node/bpf/mod.ts";
import { decodeServiceKey6 } from "../../node/bpf/structs6.ts";
import { agentsCaughtUp, KubeSide, modelEntryOf, waitUntil } from "./_kube_side.ts";

/** The IPv6 frontends in LB node i's pinned hf_services6, as `[VIP]:PORT`, sorted. */
function frontends6Of(cluster: Cluster, i: number): string[] {
  using m = BpfMap.fromPinned(`${cluster.bpffs(i)}/hf_services6`);
  return m.entries().map(([k]) => {
    const key = decodeServiceKey6(k);
    return `[${key.address}]:${key.port}`;
  }).sort();
}

/** An EndpointSlice of service `web` of one family over backends 1 and 2. */
function slice(family: "IPv4" | "IPv6") {
  const address = family === "IPv4" ? backendAddress : backendAddress6;
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `web-${family.toLowerCase()}`,
      namespace: "default",
      labels: { "kubernetes.io/service-name": "web" },
    },
    addressType: family,
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    endpoints: [1, 2].map((j) => ({
      addresses: [address(j)],
      conditions: { ready: true, serving: true, terminating: false },
    })),
  };
}

type Svc = {
  spec?: { ipFamilies?: string[]; ipFamilyPolicy?: string; clusterIPs?: string[] };
  status?: {
    loadBalancer?: { ingress?: { ip?: string }[] };
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
};

rootTest(
  "kubernetes dual stack: a PreferDualStack Service gets an IPv4 and an IPv6 address, both families' frontends are programmed with their own family's backends, clients of both families get through",
  async () => {
    await using cluster = await Cluster.create({
      lbNodes: 0,
      backends: 2,
      model: "redis",
      ipv6: true,
    });
    const vip6 = cluster.vip6;
    ok(vip6 !== null, "the cluster has an IPv6 LB IP");
    const kube = new KubeSide(cluster);
    await kube.startApiServer();
    // The pool starts with the IPv4 LB IP only: the PreferDualStack Service gets that one, and its
    // IPv4 frontend is served with the IPv4 slice (the IPv6 slice waits for an IPv6 address).
    await kube.createPoolAndService([`${cluster.vip}/32`], { ipFamilyPolicy: "PreferDualStack" });
    const created = await kube.json<Svc>(["get", "service", "web", "-n", "default"]);
    ok(
      created.spec?.ipFamilies?.join() === "IPv4,IPv6" && created.spec.clusterIPs?.length === 2,
      `the API server defaults both families: ${JSON.stringify(created.spec)}`,
    );
    await kube.kubectl(["create", "-f", "-"], slice("IPv4"));
    await kube.kubectl(["create", "-f", "-"], slice("IPv6"));
    await kube.startController();
    const status = async (n: number) => {
      let svc: Svc = {};
      await waitUntil(`${n} address(es) in the Service's status`, async () => {
        svc = await kube.json<Svc>(["get", "service", "web", "-n", "default"]);
        return (svc.status?.loadBalancer?.ingress ?? []).length === n;
      }, 30_000);
      const cond = svc.status?.conditions?.find((c) => c.type === "holdfast.io/AddressAllocated");
      ok(cond?.status === "True", `AddressAllocated is ${JSON.stringify(cond)}`);
      return { ips: svc.status!.loadBalancer!.ingress!.map((i) => i.ip).join(), cond };
    };
    const first = await status(1);
    ok(first.ips === cluster.vip, `status shows ${first.ips}, want ${cluster.vip}`);
    ok(first.cond.message.includes("no IPv6 address"), first.cond.message);

    // The model the controller publishes pairs the IPv4 frontend with the IPv4 slice only (an
    // IPv6 backend would make the agents refuse the IPv4 frontend).
    await waitUntil("the IPv4-only entry in the model", async () => {
      const entry = await modelEntryOf(cluster);
      const frontends = (entry?.service.frontends ?? []).map((f) => f.address).sort();
      const backends = (entry?.backends ?? []).map((b) => b.address).sort();
      return frontends.join() === `${cluster.vip}:${cluster.port}/TCP` &&
        backends.join() === [1, 2].map((j) => `${backendAddress(j)}:8080/TCP`).join();
    });

    // The IPv6 block arrives: the Service gets its IPv6 address beside the IPv4 one.
    const blocks = [{ cidr: `${cluster.vip}/32` }, { cidr: `${vip6}/128` }];
    await kube.kubectl([
      "patch",
      "hfpool",
      "lab",
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { blocks } }),
    ]);
    const both = await status(2);
    await cluster.addLbNode(1); // it announces both LB IPs once ready: the router routes both
    const want4 = `${cluster.vip}:${cluster.port}/TCP`, want6 = `[${vip6}]:${cluster.port}`;
    ok(both.ips === `${cluster.vip},${vip6}`, `status shows ${both.ips}`);
    const table = await kube.kubectl(["get", "svc", "web", "--no-headers"]);
    ok(table.includes(`${cluster.vip},${vip6}`), `kubectl get svc shows ${table}`);
    await agentsCaughtUp(cluster);
    await waitUntil(
      "both frontends in the LB node's maps",
      () => frontendsOf(cluster, 1).includes(want4) && frontends6Of(cluster, 1).includes(want6),
    );
    // The IPv4 frontend balances over the IPv4 slice only (the IPv6 one holds the others).
    const table4 = maglevBackendsOf(cluster, 1).join();
    ok(
      table4 === [1, 2].map(backendAddress).sort().join(),
      `the IPv4 frontend's Maglev table holds ${table4}`,
    );

    const v4 = await cluster.startClient(10, 1_500);
    const v6 = await cluster.startClient(10, 1_500, { family: 6 });
    const [s4, s6] = await Promise.all([clientSummary(v4, 30_000), clientSummary(v6, 30_000)]);
    ok(s4.survived === 10, `IPv4 connections: ${JSON.stringify(s4)}`);
    ok(s6.survived === 10, `IPv6 connections: ${JSON.stringify(s6)}`);
  },
);
