import { deepStrictEqual } from "node:assert/strict";
import { readBuiltWasm } from "./_testing.ts";
import { type HealthParams, HealthState, newHealthRecord } from "./abi.ts";
import { healthStepTs } from "./health_ts.ts";
import { PolicyModule } from "./policy_module.ts";
import { loadVectors } from "./vectors.ts";

const params: HealthParams = { rise: 2, fall: 3, backoffBaseMs: 1000, backoffMaxMs: 8000 };

Deno.test("a flapping backend stays out: it cannot rise before its doubling hold ends", () => {
  const rec = newHealthRecord();
  let t = 0;
  const step = (ok: boolean) => healthStepTs(rec, { ok, nowMs: t += 100, params });
  step(true);
  if (step(true) !== HealthState.Active) throw new Error("not active after rise=2");
  const holds: number[] = [];
  for (let flap = 0; flap < 5; flap++) {
    step(false);
    step(false);
    if (step(false) !== HealthState.Quarantined) throw new Error("not quarantined at fall=3");
    holds.push(rec.holdUntilMs - t);
    // Probes succeed right away, but the hold keeps it out.
    for (let i = 0; i < 200; i++) {
      if (step(true) === HealthState.Active) {
        if (t < rec.holdUntilMs) throw new Error(`rose at ${t}, before ${rec.holdUntilMs}`);
        break;
      }
    }
  }
  deepStrictEqual(holds, [1000, 2000, 4000, 8000, 8000], `holds ${holds}`);
});

Deno.test("health reference reproduces the golden health vectors", async () => {
  const { health } = await loadVectors();
  for (const v of health) {
    const rec = newHealthRecord();
    for (const [i, s] of v.steps.entries()) {
      healthStepTs(rec, { ok: s.ok, nowMs: s.now_ms, params: v.params });
      deepStrictEqual(rec, s.expect, `"${v.name}" step ${i}: ${JSON.stringify(rec)}`);
    }
  }
});

Deno.test("WASM health step equals the reference on 5000 random probes", async () => {
  const policy = await PolicyModule.load(await readBuiltWasm("release"));
  const a = newHealthRecord();
  const b = newHealthRecord();
  let seed = 99;
  let t = 0;
  for (let i = 0; i < 5000; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    const ok = (seed >>> 16) % 3 !== 0;
    t += (seed >>> 8) % 700;
    healthStepTs(a, { ok, nowMs: t, params });
    policy.healthStep(b, { ok, nowMs: t, params });
    deepStrictEqual(b, a, `step ${i}: ${JSON.stringify(b)}`);
  }
});
