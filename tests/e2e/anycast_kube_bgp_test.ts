/**
 * `main.ts anycast --kube` without `--bgp-config`: the node's BGP settings come from the
 * LoadBalancerConfig's `spec.bgp` (router id = its Node's InternalIP). The agent starts bird from
 * them, a bad peer is refused with a log line naming it while the good one announces, and a
 * change to the config (a community) is applied with `birdc configure`: the router's session
 * keeps its start time and the route stays.
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";
import { sameSession } from "../../lab/_bird_session.ts";
import { startAnycastKube } from "./_anycast_kube_rig.ts";

rootTest(
  "anycast --kube: BGP peers from the LoadBalancerConfig's spec.bgp; a bad peer is named",
  async () => {
    await using kube = await startAnycastKube();
    const bgp = {
      localAsn: 65101, // the lab's router expects node i in AS 65100+i: one node here
      prefixes: ["10.0.100.0/24"],
      peers: [
        { address: "10.9.1.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } },
        { address: "10.9.1.300", asn: 65000 },
      ],
    };
    kube.createConfig({ bgp });
    kube.createNode("n1", "10.9.1.2", { rack: "r1" });
    kube.createService("web", "10.0.100.10");

    await using lab = await AnycastLab.create({
      nodes: 1,
      kube: { ...kube.lab, bgpFromConfig: true },
    });
    const agent = lab.nodes.get("n1")!.agent;
    await agent.waitForLine((l) =>
      l.includes("BGP peer refused") && l.includes('"peer":"10.9.1.300"') &&
      l.includes("spec.bgp.peers[1].address")
    );
    const route = await lab.watchRoute();
    kube.createPod("web-1", { node: "n1" });
    kube.setPodReady("web-1", true);
    await route.until((g) => g.join() === "10.9.1.2");
    const before = await lab.sessionSince("n1");

    // A community added in the config: reconfigured in place, no flap, the route stays.
    const from = agent.lineCount;
    kube.patchConfig({ bgp: { ...bgp, communities: ["65000:100"] } });
    await agent.waitForLine((l) => l.includes('"msg":"bird reconfigured"'), { fromLine: from });
    await lab.untilCommunity("10.0.100.10/32", "65000:100");
    ok(
      sameSession(await lab.sessionSince("n1"), before),
      "the router's session with n1 restarted on reconfigure",
    );
    ok(
      !route.monitor.lines.some((l) => l.startsWith("Deleted 10.0.100.10")),
      "the route was withdrawn during the reconfigure",
    );
  },
);
