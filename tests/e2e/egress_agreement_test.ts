/**
 * Egress NAT owner / sync-sender agreement (issue 29): three NAT pods, long-lived TCP connections
 * through both floating addresses. Before each fault every agent's `holdfast_egress_owner`
 * gauges, its `holdfast_egress_owned_addresses` and the /32s on its interface agree, and every
 * standby's conntrack holds each owner's established flows with the same NAT port. The faults:
 * stalls of the owner's agent (SIGSTOP) longer than its lease window and shorter than detection,
 * so it forfeits its own address and assumes it again (what a resync that blocked the event loop
 * did, issue 29), then the owner's death, which every connection survives.
 */
import { rootTest } from "../harness/mod.ts";
import { createEgressLab } from "../../lab/egress.ts";
import { summary, waitForSuccessor } from "../../lab/egress_scenario.ts";
import { waitForAgreement } from "../../lab/egress_checks.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

rootTest(
  "egress: owner and sync sender agree and every standby holds the owner's flows with the same NAT port, before each fault (issue 29)",
  async () => {
    await using lab = await createEgressLab({ natPods: 3, metrics: true });
    await lab.startServer();
    await lab.startAll();
    let owners = await lab.settle();
    const holdMs = 30_000;
    const clients = [await lab.startTcp(0, 40, holdMs), await lab.startTcp(1, 40, holdMs)];
    const problems: string[] = [];
    const check = async (when: string) => {
      for (const p of await waitForAgreement(lab, 2)) problems.push(`${when}: ${p}`);
    };
    await check("before any fault");
    for (let i = 1; i <= 3; i++) {
      // Longer than the lease window (ttl − margin = 200 ms from the last renew sent), shorter
      // than detection (3 × 100 ms): the owner forfeits and, still assigned, assumes again.
      const owner = owners[0]!;
      await lab.hangNat(owner);
      await sleep(260);
      await lab.resumeNat(owner);
      owners = await lab.settle();
      await check(`after stall ${i} of ${owner}`);
    }
    const selfForfeits = [...lab.pods.values()].flatMap((p) => p.agent?.lines ?? [])
      .filter((l) => l.includes('"address forfeited"') && l.includes("not renewed")).length;
    const victim = owners[0]!;
    await lab.killNat(victim);
    const successor = await waitForSuccessor(lab, 0, victim, 15_000); // how fast: bench/egress
    const tcp = await Promise.all(clients.map((c) => summary(c, holdMs + 20_000)));
    console.log(JSON.stringify({
      scenario: "agreement",
      self_forfeits: selfForfeits,
      victim,
      successor,
      tcp,
      problems,
    }));
    for (const t of tcp) {
      if (t.survived !== t.connections) {
        problems.push(
          `${Number(t.connections) - Number(t.survived)} of ${t.connections} TCP connections ` +
            `lost after ${victim} died: ${JSON.stringify(t.deaths)}`,
        );
      }
    }
    if (problems.length) throw new Error(`agreement:\n  ${problems.join("\n  ")}`);
  },
);
