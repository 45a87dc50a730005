import { allExportsTrapping, handMadeWasm, readBuiltWasm } from "./_testing.ts";
import { PolicyRejectedError, type RejectReason } from "./policy_module.ts";
import { type ValidateOptions, validatePolicyModule } from "./validate.ts";
import { loadVectors } from "./vectors.ts";

const vectors = await loadVectors();

/** A clock that advances `stepMs` at every reading: build times no load can change. */
function steppingClock(stepMs: number): () => number {
  let t = 0;
  return () => (t += stepMs);
}

async function expectRejected(
  file: string,
  reason: RejectReason,
  fragment: string,
  options: ValidateOptions = {},
): Promise<void> {
  try {
    await validatePolicyModule(await readBuiltWasm(file), vectors, options);
  } catch (e) {
    if (!(e instanceof PolicyRejectedError)) throw e;
    if (e.reason !== reason || !e.message.includes(fragment)) {
      throw new Error(`expected ${reason} with "${fragment}", got ${e.reason}: ${e.message}`);
    }
    return;
  }
  throw new Error(`${file} was accepted; expected rejection "${reason}"`);
}

Deno.test("release and debug builds pass every check within the budget and equal the reference", async () => {
  for (const target of ["release", "debug"]) {
    // Each build "takes" 1 ms of a 50 ms budget: how fast they really are is bench:policy's job.
    const { report } = await validatePolicyModule(await readBuiltWasm(target), vectors, {
      now: steppingClock(1),
    });
    if (report.flowHashVectors !== vectors.flowHash.length) throw new Error("flow vectors");
    if (report.maglevVectors !== vectors.maglev.length) throw new Error("maglev vectors");
    if (report.healthSequences <= vectors.health.length) throw new Error("no generated sequences");
    if (report.healthSteps === 0) throw new Error("no health steps ran");
    if (report.maxBuildMs !== 1) throw new Error(`${target} build ${report.maxBuildMs} ms`);
    if (!report.maglevEqualsReference || !report.healthEqualsReference) {
      throw new Error(`${target} differs from the reference: ${JSON.stringify(report)}`);
    }
  }
});

Deno.test("a module with another table fill or stricter health passes, reported as differing from the reference", async () => {
  const fill = (await validatePolicyModule(await readBuiltWasm("fixtures/rotated_fill"), vectors))
    .report;
  if (fill.maglevEqualsReference || !fill.healthEqualsReference) {
    throw new Error(JSON.stringify(fill));
  }
  const strict =
    (await validatePolicyModule(await readBuiltWasm("fixtures/strict_health"), vectors))
      .report;
  if (!strict.maglevEqualsReference || strict.healthEqualsReference) {
    throw new Error(JSON.stringify(strict));
  }
});

Deno.test("a health module that keeps every backend Active is rejected, naming the check and the sequence", async () => {
  await expectRejected(
    "fixtures/always_active",
    "vectors",
    'health check "active-needs-ok-run" fails on sequence "new backend rises after 2 oks" step 0',
  );
});

Deno.test("a Maglev fill that ignores the weights is rejected, naming the check and the vector", async () => {
  await expectRejected(
    "fixtures/ignore_weights",
    "vectors",
    'Maglev check "weight-share" fails on Maglev vector "weighted with a zero weight"',
  );
});

Deno.test("a module with a different flow hash is rejected, quoting the vector", async () => {
  await expectRejected("fixtures/wrong_hash", "vectors", "five-tuple flow hash of");
});

Deno.test("a module that traps in the Maglev build is rejected as a trap", async () => {
  await expectRejected("fixtures/trap_build", "trap", `Maglev vector "paper 1000"`);
});

Deno.test("a module over the build time budget is rejected", async () => {
  // Driven by the clock: every build takes 10 ms against a 5 ms budget.
  await expectRejected("release", "time-budget", "took 10.00 ms > 5 ms", {
    limits: { buildBudgetMs: 5 },
    now: steppingClock(10),
  });
});

Deno.test("a really slow module is rejected by the budget, not taken for a runaway loop", async () => {
  // slow_build takes ~40 ms a build on a quiet machine, more on a busy one: 80× a 0.5 ms budget,
  // while the pre-flight allows any one call 2 s. Load widens both gaps; neither verdict flips.
  await expectRejected("fixtures/slow_build", "time-budget", "> 0.5 ms", {
    limits: { buildBudgetMs: 0.5 },
  });
});

Deno.test("flow-hash vectors that disagree with a correct module reject it; a Maglev digest only informs", async () => {
  const tampered = structuredClone(vectors);
  tampered.flowHash[3]!.client_ip ^= 1;
  try {
    await validatePolicyModule(await readBuiltWasm("release"), tampered);
    throw new Error("tampered flow hash was not noticed");
  } catch (e) {
    if (!(e instanceof PolicyRejectedError) || e.reason !== "vectors") throw e;
  }
  const digest = structuredClone(vectors);
  digest.maglev[1]!.sha256 = "0".repeat(64);
  const { report } = await validatePolicyModule(await readBuiltWasm("release"), digest);
  if (report.maglevEqualsReference) throw new Error("tampered Maglev digest was not reported");
});

Deno.test("a module that never returns is stopped in the pre-flight worker and rejected", async () => {
  const bytes = handMadeWasm({
    functions: { ...allExportsTrapping(), flow_hash_5tuple: "hang" },
    memoryPages: 1,
  });
  const started = performance.now();
  try {
    await validatePolicyModule(bytes, vectors, { preflightDeadlineMs: 300 });
  } catch (e) {
    if (!(e instanceof PolicyRejectedError) || e.reason !== "time-budget") throw e;
    if (!e.message.includes("within 300 ms (runaway loop?)")) throw e;
    // Stopped at all is the point; a minute only catches a watchdog that never fires.
    const ms = performance.now() - started;
    if (ms > 60_000) throw new Error(`took ${ms} ms to stop`);
    return;
  }
  throw new Error("a hanging module was accepted");
});
