/**
 * Shard failover under chaos traffic (issue 28): the virtual cluster's store is a Redis Cluster
 * (three masters, a replica each, in the test's `ctl` namespace; agents given
 * `--redis redis+cluster://…` and `--flow-buckets 8`, so the LB IP's flows are on every master).
 * Long-lived TCP connections to both LB IPs and a stream of short ones run through 4 LB nodes
 * while the master of the IPv4 LB IP's first bucket is SIGKILLed and, at the same time, LB node
 * 1 dies (link down, agent killed). No connection may be lost or short one fail; the replica must
 * be promoted; the live agents must log the outage, come back in sync, count the flows they wrote
 * back (`holdfast_flows_rewritten_total`, `flows restored` with `published`), and every flow
 * they learned must be in the store (lab/_chaos_shard.ts).
 */
import { rootTest } from "../harness/mod.ts";
import { holdfastProblems, runScenario, SHARD_SCENARIOS } from "../../lab/chaos.ts";

for (const scenario of SHARD_SCENARIOS) {
  rootTest(`chaos: ${scenario.name} — ${scenario.description}`, async () => {
    const ours = await runScenario(scenario, "holdfast");
    console.log(JSON.stringify({
      scenario: scenario.name,
      connections: ours.connections,
      survived: ours.survived,
      short_failed: `${ours.short.ipv4.failed}+${ours.short.ipv6?.failed} of ` +
        `${ours.short.ipv4.attempts}+${ours.short.ipv6?.attempts}`,
      short_router_unreachable: ours.short.ipv4.unreachable + (ours.short.ipv6?.unreachable ?? 0),
      max_stall_ms: ours.max_stall_ms,
      checks: ours.checks.map((c) => `${c.ok ? "ok" : "FAILED"}: ${c.what} (${c.seen})`),
    }));
    const problems = holdfastProblems(ours);
    if (ours.ipv6 === null) problems.push("the cluster was not dual stack");
    if (!ours.checks.some((c) => c.what.includes("took") && c.ok)) {
      problems.push("no shard failover was seen");
    }
    if (problems.length) {
      throw new Error(`chaos "${scenario.name}":\n  ${problems.join("\n  ")}`);
    }
  });
}
