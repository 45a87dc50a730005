/**
 * Egress NAT agents driven by the config the Kubernetes controller publishes (issue 11): the real
 * `main.ts egress --egress lab/egress` in the egress lab reads the config from Redis — derived
 * from an EgressNAT and its pods exactly as the controller does (`deriveEgressConfig`) — and a
 * NAT pod the config does not list yet waits until it is added, then joins the running ones live
 * (their heartbeats pick it up) while established connections through the NAT keep going.
 */
import { rootTest } from "../harness/mod.ts";
import { createEgressLab, floatingAddress, gatewayAddress } from "../../lab/egress.ts";
import { summary } from "../../lab/egress_scenario.ts";
import { deriveEgressConfig } from "../../controller/k8s/_egress_derive.ts";
import { publishEgressConfigArgs } from "../../controller/egress/redis_config.ts";

const EGRESS_NAT = {
  metadata: { namespace: "lab", name: "egress" },
  spec: {
    destinations: ["198.18.0.0/24"],
    addresses: [floatingAddress(0), floatingAddress(1)],
    gateways: [gatewayAddress(0), gatewayAddress(1)],
    sources: [{ prefix: "10.8.0.11/32" }, { prefix: "10.8.0.12/32" }],
    snatPorts: "10000-29999",
  },
};

/** The lab's NAT pods i (nat1 = 10.8.0.21 …) as labelled, running pods. */
const pods = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    metadata: { namespace: "lab", name: `nat${i + 1}`, labels: { "holdfast.io/egress": "egress" } },
    status: { phase: "Running", podIP: `10.8.0.${21 + i}` },
  }));

function configFor(n: number) {
  const d = deriveEgressConfig(EGRESS_NAT, pods(n));
  if (!("config" in d)) throw new Error(`cannot derive the lab's config: ${d.problem}`);
  return d.config;
}

rootTest(
  "egress: NAT agents run from the controller's config in Redis; a pod added to it joins live, nothing resets",
  async () => {
    await using lab = await createEgressLab({ natPods: 3, configFromRedis: true });
    await lab.redis.cli(...publishEgressConfigArgs(configFor(2)));
    await lab.startServer();
    await lab.startNat("nat1");
    await lab.startNat("nat2");
    await lab.settle();
    const holdMs = 12_000;
    const client = await lab.startTcp(0, 10, holdMs);

    // nat3 is not in the config yet: its agent waits, saying so with the key.
    const joining = lab.startNat("nat3");
    const nat3 = lab.pods.get("nat3")!.agent!;
    const waiting = await nat3.waitForLine((l) => l.includes('"msg":"waiting for config"'));
    if (!waiting.includes("hf:egress:{lab/egress}:config")) throw new Error(waiting);

    // The controller adds it (a new revision): nat3 starts, nat1 follows without a restart.
    await lab.redis.cli(...publishEgressConfigArgs(configFor(3)));
    await joining;
    const nat1 = lab.pods.get("nat1")!.agent!;
    await nat1.waitForLine((l) => l.includes('"msg":"peers changed"'), { timeoutMs: 5_000 });
    await nat1.waitForLine(
      (l) => l.includes('"msg":"peer up"') && l.includes('"peer":"nat3"'),
      { timeoutMs: 5_000 },
    );
    const owners = await lab.settle();
    const tcp = await summary(client, holdMs + 20_000);
    console.log(JSON.stringify({ scenario: "config from redis, pod joins", owners, tcp }));
    if (tcp.survived !== tcp.connections) {
      throw new Error(`connections lost while nat3 joined: ${JSON.stringify(tcp)}`);
    }
  },
);
