/**
 * Chaos scenarios as tests: Holdfast must lose no connection in any of them; the Maglev-only
 * baseline's losses are reported beside, not asserted.
 */
import { rootTest } from "../harness/mod.ts";
import { runScenario, SCENARIOS } from "./chaos.ts";

for (const scenario of SCENARIOS) {
  rootTest(`chaos: ${scenario.name} — ${scenario.description}`, async () => {
    const ours = await runScenario(scenario, "holdfast");
    const base = await runScenario(scenario, "baseline");
    console.log(JSON.stringify({
      scenario: scenario.name,
      connections: ours.connections,
      survived: ours.survived,
      max_stall_ms: ours.max_stall_ms,
      baseline_survived: base.survived,
      baseline_max_stall_ms: base.max_stall_ms,
    }));
    if (ours.survived !== ours.connections) {
      throw new Error(
        `${
          ours.connections - ours.survived
        } of ${ours.connections} connections lost in "${scenario.name}": ${
          JSON.stringify(ours.deaths.slice(0, 5))
        }`,
      );
    }
  });
}
