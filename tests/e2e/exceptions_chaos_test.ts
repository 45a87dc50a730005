/**
 * Exceptions-only flow sharing under chaos traffic (issue 28): every agent of the virtual cluster
 * runs with `--flow-sharing exceptions` (flows stored in Redis, only exceptions announced,
 * installed and restored; node/lb/flows/exceptions.ts). Long-lived TCP connections to both LB IPs
 * and a stream of short ones run through the LB nodes while 2 backends join 3 (Maglev slots move:
 * the agents' table-change handshake publishes and pulls the flows the new table would send
 * elsewhere), then LB node 1 dies and LB node 4 joins (ECMP moves flows; a node without a flow
 * places it with its own table, the same on every node; LB node 4 restores only the exceptions).
 * No connection may be lost or short one fail, and the agents' metrics and logs must show the mode
 * in force (lab/_chaos_exceptions.ts; a Redis-restart variant runs by hand:
 * `./hf chaos exceptions-redis-restarts`). With the handshake switched off the first scenario lost
 * 6–7 of 40 IPv4 connections (reset): the test sees the window the handshake closes.
 */
import { rootTest } from "../harness/mod.ts";
import { holdfastProblems, runScenario } from "../../lab/chaos.ts";
import { EXCEPTION_SCENARIOS } from "../../lab/_chaos_exceptions.ts";

for (const scenario of EXCEPTION_SCENARIOS) {
  rootTest(`chaos: ${scenario.name} — ${scenario.description}`, async () => {
    // Traffic for 16 s: under a busy CPU the steps take longer, and the joined node's forwarding
    // is checked (it needs traffic left after the join).
    const ours = await runScenario(scenario, "holdfast", { durationMs: 16_000 });
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
    if (problems.length) {
      throw new Error(`chaos "${scenario.name}":\n  ${problems.join("\n  ")}`);
    }
  });
}
