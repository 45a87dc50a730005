/**
 * Chaos scenarios as tests. Holdfast must lose no connection in any of them, and every
 * disturbance must be seen to happen (route withdrawn, processes replaced, backends in the agents'
 * maps, Redis empty, a joining node forwarding): a step that did nothing cannot pass. The
 * Maglev-only baseline must lose connections where its design makes that certain.
 */
import { rootTest } from "../harness/mod.ts";
import { type RunResult, runScenario, SCENARIOS } from "../../lab/chaos.ts";

function failedChecks(r: RunResult): string[] {
  return r.checks.filter((c) => !c.ok).map((c) => `${r.mode}: ${c.what} (seen: ${c.seen})`);
}

for (const scenario of SCENARIOS) {
  rootTest(`chaos: ${scenario.name} — ${scenario.description}`, async () => {
    const ours = await runScenario(scenario, "holdfast");
    const base = await runScenario(scenario, "baseline");
    console.log(JSON.stringify({
      scenario: scenario.name,
      connections: ours.connections,
      survived: ours.survived,
      max_stall_ms: ours.max_stall_ms,
      checks: ours.checks.length + base.checks.length,
      baseline_survived: base.survived,
      baseline_max_stall_ms: base.max_stall_ms,
    }));
    const problems = [...failedChecks(ours), ...failedChecks(base)];
    if (ours.checks.length === 0) problems.push("holdfast: no disturbance was checked");
    if (ours.survived !== ours.connections) {
      problems.push(
        `${ours.connections - ours.survived} of ${ours.connections} connections lost: ${
          JSON.stringify(ours.deaths.slice(0, 5))
        }`,
      );
    }
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
