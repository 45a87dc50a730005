/**
 * An EgressNAT's NAT pods run as the controller creates them (issue 23 item 1): `deno task deploy`
 * installs Holdfast in the lab cluster (API test server, lab kubelet, lab/kubelet/cluster.ts); an
 * operator applies one EgressNAT with kubectl; the controller creates its Deployment and
 * PodDisruptionBudget, the lab kubelet runs the Deployment's two pods (their template's command:
 * `main.ts egress --egress NS/NAME`, Redis credentials from the Secret), the agents read the
 * config the controller published, become ready and one takes the floating address
 * (`status.owners`, Ready=True). Deleting the EgressNAT removes the Deployment, the PDB and the
 * pods (garbage collection by owner references).
 *
 * The pods' one interface (`eth0`) serves as both internal and external: this test is about what
 * the controller creates and that it runs, not about NAT (tests/e2e/egress_*_test.ts).
 */

import { strictEqual } from "node:assert/strict";
import { rootTest, until } from "../harness/mod.ts";
import { startKubeletCluster } from "../../lab/kubelet/cluster.ts";

const NS = "holdfast-system"; // the Secret holdfast-redis is there already
const NAT = {
  apiVersion: "holdfast.io/v1alpha1",
  kind: "EgressNAT",
  metadata: { name: "internet", namespace: NS },
  spec: {
    destinations: ["198.18.0.0/24"],
    addresses: ["198.18.0.100"],
    gateways: ["10.8.0.100"],
    sources: [{ prefix: "10.2.0.0/16" }],
    interfaces: { internal: "eth0", external: "eth0" },
    replicas: 2,
  },
};

// deno-lint-ignore no-explicit-any
type Any = any;

rootTest(
  "egress kubelet: the controller's Deployment for an EgressNAT runs two NAT pods; one owns the address; deleting the EgressNAT removes them",
  async (t) => {
    await using cluster = await startKubeletCluster();
    const { kube, topo } = cluster;
    const kubectl = (args: string[], stdin?: unknown[]) =>
      topo.exec("w1", [
        ...["kubectl", "--kubeconfig", cluster.kubeconfig, `--cache-dir=${cluster.dir}/kcache`],
        ...args,
      ], { stdin: stdin?.map((x) => JSON.stringify(x)).join("\n"), timeoutMs: 30_000 });
    const natPods = () =>
      kube.store.list("/pods", NS).filter((p: Any) =>
        p.metadata.labels?.["holdfast.io/egress"] === "internet"
      );
    const ready = (p: Any) =>
      (p.status?.conditions ?? []).some((c: Any) => c.type === "Ready" && c.status === "True");
    const status = (): Any =>
      (kube.store.get("holdfast.io/egressnats", NS, "internet") as Any)?.status ?? {};
    const step = async (name: string, fn: () => Promise<void>) => {
      if (!(await t.step(name, fn))) throw new Error(`step failed: ${name}`);
    };

    await step("deno task deploy", async () => {
      const out = await cluster.deploy(["--timeout", "180"]);
      strictEqual(out.includes("deployment.apps/holdfast-controller rolled out"), true, out);
    });
    await step("kubectl apply the EgressNAT: Deployment and PDB owned by it", async () => {
      await kubectl(["apply", "--server-side", "-f", "-"], [NAT]);
      await until(
        "the Deployment and the PDB",
        () =>
          Promise.resolve(
            kube.store.get("apps/deployments", NS, "internet") !== undefined &&
              kube.store.get("policy/poddisruptionbudgets", NS, "internet") !== undefined,
          ),
        60_000,
        250,
      );
      const dep = kube.store.get("apps/deployments", NS, "internet") as Any;
      strictEqual(dep.metadata.ownerReferences[0].kind, "EgressNAT");
      strictEqual(dep.spec.replicas, 2);
      // The controller's own image (k8s/controller.yaml --egress-image, what deploy installed).
      strictEqual(dep.spec.template.spec.containers[0].image, "holdfast:dev");
    });
    await step(
      "the lab kubelet runs two NAT pods; they get ready; one owns the address",
      async () => {
        await until(
          "two ready NAT pods",
          () => Promise.resolve(natPods().filter(ready).length === 2),
          180_000,
          500,
        );
        await until(
          "status.owners and Ready=True",
          () => {
            const s = status();
            const r = (s.conditions ?? []).find((c: Any) => c.type === "Ready");
            return Promise.resolve(s.owners?.length === 1 && r?.status === "True");
          },
          60_000,
          500,
        ).catch(async (err) => {
          const logs = await Promise.all(
            natPods().map((p: Any) => cluster.kubelet.logs(NS, p.metadata.name)),
          );
          throw new Error(
            `${err}; status ${JSON.stringify(status())}; NAT pods' logs:\n${
              logs.map((l) => l.split("\n").slice(-15).join("\n")).join("\n---\n")
            }`,
          );
        });
        const owner = status().owners[0];
        strictEqual(owner.address, "198.18.0.100");
        strictEqual(natPods().some((p: Any) => p.metadata.name === owner.pod), true, owner.pod);
      },
    );
    await step("kubectl delete the EgressNAT: Deployment, PDB and pods go", async () => {
      await kubectl(["delete", "egressnat", "internet", "-n", NS, "--wait=false"]);
      await until(
        "everything it owned gone",
        () =>
          Promise.resolve(
            kube.store.get("apps/deployments", NS, "internet") === undefined &&
              kube.store.get("policy/poddisruptionbudgets", NS, "internet") === undefined &&
              natPods().length === 0,
          ),
        90_000,
        500,
      );
    });
  },
);
