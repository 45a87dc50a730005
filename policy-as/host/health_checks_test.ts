import { type HealthParams, type HealthProbe, type HealthRecord, newHealthRecord } from "./abi.ts";
import { healthPropertySequences, healthViolation } from "./health_checks.ts";
import { healthStepTs } from "./health_ts.ts";
import { loadVectors } from "./vectors.ts";

const sequences = healthPropertySequences((await loadVectors()).health);

type Step = (rec: HealthRecord, probe: HealthProbe) => number;

/** The reference step with the settings changed by `adjust` (a stricter or looser policy). */
const adjusted = (adjust: (p: HealthParams) => HealthParams): Step => (rec, probe) =>
  healthStepTs(rec, { ...probe, params: adjust(probe.params) });

/** The first violation of `step` over every sequence, as "check" (or undefined). */
function firstViolation(step: Step): string | undefined {
  for (const seq of sequences) {
    const rec = newHealthRecord();
    const states = seq.probes.map((p) => step(rec, { ...p, params: seq.params }));
    const bad = healthViolation(seq, states);
    if (bad) return bad.check;
  }
  return undefined;
}

function expectCheck(step: Step, want: string | undefined): void {
  const got = firstViolation(step);
  if (got !== want) throw new Error(`expected ${want ?? "no violation"}, got ${got ?? "none"}`);
}

Deno.test("health invariants: the reference passes every sequence, golden and generated", () => {
  if (sequences.length < 10) throw new Error(`only ${sequences.length} sequences`);
  expectCheck(healthStepTs, undefined);
});

Deno.test("health invariants: stricter policies pass (twice the rise, one more fall, twice the hold)", () => {
  expectCheck(adjusted((p) => ({ ...p, rise: p.rise * 2 })), undefined);
  expectCheck(adjusted((p) => ({ ...p, fall: p.fall + 1 })), undefined);
  expectCheck(
    adjusted((p) => ({
      ...p,
      backoffBaseMs: p.backoffBaseMs * 2,
      backoffMaxMs: p.backoffMaxMs * 2,
    })),
    undefined,
  );
});

Deno.test("health invariants: each broken policy fails the check that names its fault", () => {
  expectCheck(() => 1, "active-needs-ok-run"); // always Active
  expectCheck(adjusted((p) => ({ ...p, rise: 1 })), "active-needs-ok-run");
  expectCheck(adjusted((p) => ({ ...p, fall: 1 })), "quarantine-needs-fail-run");
  expectCheck(adjusted((p) => ({ ...p, backoffBaseMs: 0, backoffMaxMs: 0 })), "quarantine-holds");
  expectCheck(adjusted((p) => ({ ...p, fall: p.fall * 10 })), "fails-quarantine");
  expectCheck(adjusted((p) => ({ ...p, rise: p.rise * 10 })), "oks-activate");
  expectCheck((rec, probe) => {
    if (healthStepTs(rec, probe) === 2) rec.holdUntilMs = Infinity; // never comes back
    return rec.state;
  }, "oks-activate");
  expectCheck((rec, probe) => {
    const s = healthStepTs(rec, probe);
    return s === 2 ? (rec.state = 0) : s; // "quarantined" reported as New
  }, "states");
});

Deno.test("health invariants: a violation names the step, the probe and the transition", () => {
  const seq = sequences[0]!;
  const bad = healthViolation(seq, seq.probes.map(() => 1));
  if (
    bad?.check !== "active-needs-ok-run" || bad.step !== 0 ||
    !bad.message.includes("good probe at 0 ms, New → Active")
  ) {
    throw new Error(JSON.stringify(bad));
  }
});
