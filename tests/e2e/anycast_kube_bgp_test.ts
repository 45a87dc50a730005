/**
 * `main.ts anycast --kube` without `--bgp-config`: the node's BGP settings come from the
 * LoadBalancerConfig's `spec.bgp` (router id = its Node's InternalIP). The agent starts bird from
 * them, a bad peer is refused with a log line naming it while the good one announces, and a
 * change to the config (a community) is applied with `birdc configure`: the router's session
 * keeps its start time and the route stays.
 */
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";
import { startKubeServer } from "../../lab/kube/mod.ts";

function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(msg);
}

const CRDS = new URL("../../k8s/crds", import.meta.url).pathname;
const W = { manager: "test" };

async function since(lab: AnycastLab): Promise<string> {
  const out = (await lab.birdc("show", "protocols")).stdout;
  const row = out.split("\n").find((l) => l.startsWith("hf_n1 "));
  assert(row && row.includes("Established"), `session with n1 not Established:\n${out}`);
  return row.trim().split(/\s+/).slice(4, 6).join(" ");
}

rootTest(
  "anycast --kube: BGP peers from the LoadBalancerConfig's spec.bgp; a bad peer is named",
  async () => {
    await using kube = await startKubeServer({ crdDirs: [CRDS] });
    const kubeconfig = await kube.writeKubeconfig();
    const type = (group: string, version: string, plural: string) =>
      kube.registry.find(group, version, plural)!;
    const configs = type("holdfast.io", "v1alpha1", "loadbalancerconfigs");
    const services = type("", "v1", "services");
    const pods = type("", "v1", "pods");
    const nodes = type("", "v1", "nodes");
    const bgp = {
      localAsn: 65101, // the lab's router expects node i in AS 65100+i: one node here
      prefixes: ["10.0.100.0/24"],
      peers: [
        { address: "10.9.1.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } },
        { address: "10.9.1.300", asn: 65000 },
      ],
    };
    kube.rest.create(
      configs,
      "",
      { metadata: { name: "default" }, spec: { mode: "Anycast", bgp } },
      W,
    );
    kube.rest.create(nodes, "", { metadata: { name: "n1", labels: { rack: "r1" } } }, W);
    kube.rest.patch(nodes, "", "n1", "merge", {
      status: { addresses: [{ type: "InternalIP", address: "10.9.1.2" }] },
    }, { ...W, subresource: "status" });
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

    await using lab = await AnycastLab.create({
      nodes: 1,
      kube: { port: kube.port, kubeconfig, bgpFromConfig: true },
    });
    const agent = lab.nodes.get("n1")!.agent;
    await agent.waitForLine((l) =>
      l.includes("BGP peer refused") && l.includes('"peer":"10.9.1.300"') &&
      l.includes("spec.bgp.peers[1].address")
    );
    const route = await lab.watchRoute();
    kube.rest.create(pods, "default", {
      metadata: { name: "web-1", labels: { app: "web" } },
      spec: { nodeName: "n1", containers: [{ name: "c", image: "x" }] },
    }, W);
    kube.rest.patch(pods, "default", "web-1", "merge", {
      status: { conditions: [{ type: "Ready", status: "True" }] },
    }, { ...W, subresource: "status" });
    await route.until((g) => g.join() === "10.9.1.2");
    const before = await since(lab);

    // A community added in the config: reconfigured in place, no flap, the route stays.
    const from = agent.lineCount;
    kube.rest.patch(configs, "", "default", "merge", {
      spec: { bgp: { ...bgp, communities: ["65000:100"] } },
    }, W);
    await agent.waitForLine((l) => l.includes('"msg":"bird reconfigured"'), { fromLine: from });
    const deadline = Date.now() + 5_000;
    let routes = "";
    for (let i = 0; i < 100 && Date.now() < deadline; i++) {
      routes = (await lab.birdc("show", "route", "all", "10.0.100.10/32")).stdout;
      if (routes.includes("(65000,100)")) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert(routes.includes("(65000,100)"), `the community was not announced:\n${routes}`);
    assert(await since(lab) === before, "the router's session with n1 restarted on reconfigure");
    assert(
      !route.monitor.lines.some((l) => l.startsWith("Deleted 10.0.100.10")),
      "the route was withdrawn during the reconfigure",
    );
  },
);
