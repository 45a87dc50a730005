/**
 * Chaos scenarios as tests, on the dual-stack cluster. Holdfast must lose no long-lived
 * connection and fail no short one (a connect the router refused for want of a route is counted
 * apart), of either family, in any of them, and every disturbance must be seen to happen (routes
 * of both families withdrawn, processes replaced, backends in the agents' maps, Redis empty, a
 * joining node forwarding): a step that did nothing cannot pass. IPv6 flows must be in Redis
 * before the first disturbance, as IPv4 ones (`holdfastProblems` in lab/chaos.ts). The
 * Maglev-only baseline must lose connections where its design makes that certain.
 */
import { rootTest } from "../harness/mod.ts";
import { holdfastProblems, runScenario, SCENARIOS } from "../../lab/chaos.ts";

for (const scenario of SCENARIOS) {
  rootTest(`chaos: ${scenario.name} — ${scenario.description}`, async () => {
    const ours = await runScenario(scenario, "holdfast");
    const base = await runScenario(scenario, "baseline");
    console.log(JSON.stringify({
      scenario: scenario.name,
      connections: ours.connections,
      survived: ours.survived,
      ipv4_survived: `${ours.ipv4.survived}/${ours.ipv4.connections}`,
      ipv6_survived: ours.ipv6 && `${ours.ipv6.survived}/${ours.ipv6.connections}`,
      ipv6_shared: ours.ipv6_shared,
      short_failed: `${ours.short.ipv4.failed}+${ours.short.ipv6?.failed} of ` +
        `${ours.short.ipv4.attempts}+${ours.short.ipv6?.attempts}`,
      short_router_unreachable: ours.short.ipv4.unreachable + (ours.short.ipv6?.unreachable ?? 0),
      baseline_short_failed: base.short.ipv4.failed + (base.short.ipv6?.failed ?? 0),
      max_stall_ms: ours.max_stall_ms,
      checks: ours.checks.length + base.checks.length,
      baseline_survived: base.survived,
      baseline_max_stall_ms: base.max_stall_ms,
    }));
    const problems = [...holdfastProblems(ours), ...holdfastProblems(base)];
    if (ours.ipv6 === null) problems.push("the cluster was not dual stack");
    if (scenario.baselineLoses && base.survived === base.connections) {
      problems.push(
        `the baseline kept all ${base.connections} connections although flows moved between LB ` +
          "nodes after the backends changed: the disturbance did not reach the flows",
      );
    }
    if (problems.length) {
      throw new Error(`chaos "${scenario.name}":\n  ${problems.join("\n  ")}`);
    }
  });
}
