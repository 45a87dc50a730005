/**
 * The anycast agent following Kubernetes: the API test server (lab/kube/) runs in the test
 * process, each node's `main.ts anycast --kube` reaches it through a loopback relay, and the
 * router's route follows what a user does with kubectl: a LoadBalancerConfig in mode Anycast,
 * a Service with an allocated address, pods that become ready, a pod deleted (terminating
 * under a finalizer: the address goes first), a Service opted out by annotation.
 */
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";
import { startKubeServer } from "../../lab/kube/mod.ts";

function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(msg);
}

const same = (want: string[]) => (g: string[]) => g.join() === [...want].sort().join();
const CRDS = new URL("../../k8s/crds", import.meta.url).pathname;
const W = { manager: "test" };

rootTest(
  "anycast --kube: Services in mode Anycast are announced from nodes with ready pods",
  async () => {
    await using kube = await startKubeServer({ crdDirs: [CRDS] });
    const kubeconfig = await kube.writeKubeconfig();
    const type = (group: string, version: string, plural: string) =>
      kube.registry.find(group, version, plural)!;
    const configs = type("holdfast.io", "v1alpha1", "loadbalancerconfigs");
    const services = type("", "v1", "services");
    const pods = type("", "v1", "pods");
    kube.rest.create(configs, "", { metadata: { name: "default" }, spec: { mode: "Anycast" } }, W);
    kube.rest.create(services, "default", {
      metadata: { name: "web" },
      spec: {
        type: "LoadBalancer",
        loadBalancerClass: "holdfast.io/lb",
        selector: { app: "web" },
        ports: [{ port: 80 }],
      },
    }, W);
    kube.rest.patch(services, "default", "web", "merge", {
      status: { loadBalancer: { ingress: [{ ip: "10.0.100.10" }] } },
    }, { ...W, subresource: "status" });
    const pod = (name: string, node: string) =>
      kube.rest.create(pods, "default", {
        metadata: { name, labels: { app: "web" }, finalizers: ["test.holdfast.io/hold"] },
        spec: { nodeName: node, containers: [{ name: "c", image: "x" }] },
      }, W);
    const ready = (name: string, status: "True" | "False") =>
      kube.rest.patch(pods, "default", name, "merge", {
        status: { conditions: [{ type: "Ready", status }] },
      }, { ...W, subresource: "status" });

    await using lab = await AnycastLab.create({ nodes: 2, kube: { port: kube.port, kubeconfig } });
    const route = await lab.watchRoute();
    pod("web-1", "n1");
    ready("web-1", "True");
    await route.until(same(["10.9.1.2"]));
    pod("web-2", "n2");
    await new Promise((r) => setTimeout(r, 300));
    const still = route.gateways;
    assert(still.join() === "10.9.1.2", `a pod that is not ready was announced: ${still}`);
    ready("web-2", "True");
    await route.until(same(["10.9.1.2", "10.9.2.2"]));
    // Deleting a pod makes it terminating (the finalizer holds it): its node forfeits at once.
    const agent = lab.nodes.get("n1")!.agent;
    const from = agent.lineCount;
    const deleted = kube.rest.delete(pods, "default", "web-1");
    assert(deleted.pending, "the finalizer should hold the pod");
    await route.until(same(["10.9.2.2"]));
    const line = await agent.waitForLine((l) => l.includes("forfeiting address 10.0.100.10"), {
      fromLine: from,
    });
    assert(line.includes("default/web-1 terminating") && line.includes("default/web"), line);
    // The Service opts out of anycast: nobody announces it.
    kube.rest.patch(services, "default", "web", "merge", {
      metadata: { annotations: { "holdfast.io/announce": "stateful" } },
    }, W);
    await route.until(same([]));
  },
);
