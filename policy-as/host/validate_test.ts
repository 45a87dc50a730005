import { allExportsTrapping, handMadeWasm, readBuiltWasm } from "./_testing.ts";
import { PolicyRejectedError, type RejectReason } from "./policy_module.ts";
import { validatePolicyModule } from "./validate.ts";
import { loadVectors } from "./vectors.ts";

const vectors = await loadVectors();

async function expectRejected(
  file: string,
  reason: RejectReason,
  fragment: string,
  limits = {},
): Promise<void> {
  try {
    await validatePolicyModule(await readBuiltWasm(file), vectors, { limits });
  } catch (e) {
    if (!(e instanceof PolicyRejectedError)) throw e;
    if (e.reason !== reason || !e.message.includes(fragment)) {
      throw new Error(`expected ${reason} with "${fragment}", got ${e.reason}: ${e.message}`);
    }
    return;
  }
  throw new Error(`${file} was accepted; expected rejection "${reason}"`);
}

Deno.test("release and debug builds pass every golden vector within the budget", async () => {
  for (const target of ["release", "debug"]) {
    const { report } = await validatePolicyModule(await readBuiltWasm(target), vectors);
    if (report.flowHashVectors !== vectors.flowHash.length) throw new Error("flow vectors");
    if (report.maglevVectors !== vectors.maglev.length) throw new Error("maglev vectors");
    if (report.healthSteps === 0) throw new Error("no health steps ran");
    if (report.maxBuildMs > 50) throw new Error(`${target} build ${report.maxBuildMs} ms`);
  }
});

Deno.test("a module with a different flow hash is rejected, quoting the vector", async () => {
  await expectRejected("fixtures/wrong_hash", "vectors", "five-tuple flow hash of");
});

Deno.test("a module that traps in the Maglev build is rejected as a trap", async () => {
  await expectRejected("fixtures/trap_build", "trap", `Maglev "paper 1000"`);
});

Deno.test("a module over the build time budget is rejected", async () => {
  await expectRejected("fixtures/slow_build", "time-budget", "> 5 ms", { buildBudgetMs: 5 });
});

Deno.test("vectors that disagree with a correct module reject it (the check has teeth)", async () => {
  const tampered = structuredClone(vectors);
  tampered.maglev[1]!.sha256 = "0".repeat(64);
  try {
    await validatePolicyModule(await readBuiltWasm("release"), tampered);
  } catch (e) {
    if (e instanceof PolicyRejectedError && e.reason === "vectors") return;
    throw e;
  }
  throw new Error("tampered Maglev digest was not noticed");
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
    const ms = performance.now() - started;
    if (ms > 5000) throw new Error(`took ${ms} ms to stop`);
    return;
  }
  throw new Error("a hanging module was accepted");
});
