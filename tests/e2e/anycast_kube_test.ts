/**
 * The anycast agent following Kubernetes: the API test server (lab/kube/) runs in the test
 * process, each node's `main.ts anycast --kube` reaches it through a loopback relay, and the
 * router's route follows what a user does with kubectl: a LoadBalancerConfig in mode Anycast,
 * a Service with an allocated address, pods that become ready, a pod deleted (terminating
 * under a finalizer: the address goes first), a Service opted out by annotation.
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";
import { startAnycastKube } from "./_anycast_kube_rig.ts";

const same = (want: string[]) => (g: string[]) => g.join() === [...want].sort().join();

rootTest(
  "anycast --kube: Services in mode Anycast are announced from nodes with ready pods",
  async () => {
    await using kube = await startAnycastKube();
    kube.createConfig();
    kube.createService("web", "10.0.100.10");

    await using lab = await AnycastLab.create({ nodes: 2, kube: kube.lab });
    const route = await lab.watchRoute();
    kube.createPod("web-1", { node: "n1", finalizer: true });
    kube.setPodReady("web-1", true);
    await route.until(same(["10.9.1.2"]));
    kube.createPod("web-2", { node: "n2", finalizer: true });
    await new Promise((r) => setTimeout(r, 300));
    const still = route.gateways;
    ok(still.join() === "10.9.1.2", `a pod that is not ready was announced: ${still}`);
    kube.setPodReady("web-2", true);
    await route.until(same(["10.9.1.2", "10.9.2.2"]));
    // Deleting a pod makes it terminating (the finalizer holds it): its node forfeits at once.
    const agent = lab.nodes.get("n1")!.agent;
    const from = agent.lineCount;
    const deleted = kube.deletePod("web-1");
    ok(deleted.pending, "the finalizer should hold the pod");
    await route.until(same(["10.9.2.2"]));
    const line = await agent.waitForLine((l) => l.includes("forfeiting address 10.0.100.10"), {
      fromLine: from,
    });
    ok(line.includes("default/web-1 terminating") && line.includes("default/web"), line);
    // The Service opts out of anycast: nobody announces it.
    kube.annotateService("web", { "holdfast.io/announce": "stateful" });
    await route.until(same([]));
  },
);
