import { deepStrictEqual, ok } from "node:assert/strict";
import { createControlPlane } from "./control_plane.ts";
import { MemoryLBMaps } from "./maps/memory.ts";
import { MODEL_YAML, waitUntil } from "../../controller/model/_testing.ts";
import { FileSource } from "./sources/file_source.ts";
import { captureLogs, log } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { PolicyHost, TsMaglevBuilder, WasmMaglevBuilder } from "../../policy-as/host/mod.ts";
import { FAST_CHECK } from "./health/_testing.ts";
import {
  type HealthChange,
  HealthChecker,
  policyHealthStep,
  type ProbeResult,
} from "./health/mod.ts";
import { policySwapper } from "./policy_swap.ts";

const build = (name: string) =>
  Deno.readFile(new URL(`../../policy-as/build/${name}`, import.meta.url));

/**
 * The build time budget (50 ms by default) is wall time: on a loaded machine a valid module's
 * Maglev build can pass it and be rejected. These tests are about swapping, not the budget
 * (policy-as/host/validate_test.ts is): a budget far from any build.
 */
const LIMITS = { buildBudgetMs: 10_000 };

Deno.test("agent policy swap: an accepted module rebuilds every Maglev table; a rejected one changes nothing", async () => {
  using logs = captureLogs();
  const registry = new Registry();
  const host = await PolicyHost.create({ registry, limits: LIMITS });
  ok((await host.swap(await build("release.wasm"))).ok);
  const maps = new MemoryLBMaps();
  const cp = await createControlPlane(maps, {
    maglev: new WasmMaglevBuilder(host, { fallback: new TsMaglevBuilder(), registry }),
  });
  const file = new FileSource(cp.writer);
  cp.start();
  try {
    file.load(MODEL_YAML);
    await cp.waitFrontend("10.0.100.1:80/TCP");
    await cp.waitFrontend("10.0.100.2:53/UDP");
    await cp.reconciler.waitIdle();
    const m = cp.ops.metrics;
    // Rebuilt tables are written, or counted unchanged when equal to the installed one.
    const rebuilt = () =>
      m.holdfast_lbmaps_maglev_writes_total + m.holdfast_lbmaps_maglev_unchanged_total;
    const writes = rebuilt();
    const swap = policySwapper(host, cp, log);

    const accepted = await swap(await build("debug.wasm"), "test");
    ok(accepted.ok);
    await waitUntil(() => rebuilt() === writes + 2, "both frontends' tables rebuilt");
    // The debug build fills tables as the release one does: nothing to write again.
    deepStrictEqual(m.holdfast_lbmaps_maglev_unchanged_total, 2);
    await cp.reconciler.waitIdle();
    const swapped = logs.records.find((r) => r.msg === "policy swapped");
    deepStrictEqual([swapped?.sha256, swapped?.rebuild_frontends], [accepted.digest, 2]);

    const before = m.holdfast_lbmaps_maglev_writes_total, dump = await maps.dump();
    const rejected = await swap(await build("fixtures/wrong_hash.wasm"), "test");
    deepStrictEqual([rejected.ok, !rejected.ok && rejected.reason], [false, "vectors"]);
    cp.reconciler.triggerFullReconcile();
    await new Promise((r) => setTimeout(r, 50));
    await cp.reconciler.waitIdle();
    deepStrictEqual(m.holdfast_lbmaps_maglev_writes_total, before, "no table written");
    deepStrictEqual(await maps.dump(), dump);
    deepStrictEqual(host.current.digest, accepted.digest, "the accepted module keeps serving");
    ok(logs.records.some((r) => r.msg === "policy rejected" && r.reason === "vectors"));
    ok(registry.expose().includes('holdfast_policy_rejections_total{reason="vectors"} 1'));
  } finally {
    await cp.stop();
  }
});

Deno.test("agent policy swap: a stricter health module judges the next probes without a restart — same probes, later return", async () => {
  using _logs = captureLogs();
  const registry = new Registry();
  const host = await PolicyHost.create({ registry, limits: LIMITS });
  ok((await host.swap(await build("release.wasm"))).ok);
  const cp = await createControlPlane(new MemoryLBMaps(), {
    maglev: new WasmMaglevBuilder(host, { fallback: new TsMaglevBuilder(), registry }),
  });
  const swap = policySwapper(host, cp, log);
  let down = false;
  const changes: HealthChange[] = [];
  // One checker for the whole test: the module is looked up per probe, never restarted.
  const checker = new HealthChecker({
    step: () => policyHealthStep(host, log),
    prober: () =>
      Promise.resolve<ProbeResult>(
        down ? { ok: false, reason: "connect refused" } : { ok: true, reason: "ok" },
      ),
    onChange: (c) => void changes.push(c),
    registry,
  });
  /** The backend dies until quarantined, then recovers: probes it took to come back. */
  const outage = async (): Promise<[number, number]> => {
    const from = changes.length;
    down = true;
    await waitUntil(() => changes.length === from + 1, "a quarantine");
    down = false;
    await waitUntil(() => changes.length === from + 2, "a recovery");
    deepStrictEqual(changes.slice(from).map((c) => c.verdict), ["quarantined", "active"]);
    return [changes[from]!.probes, changes[from + 1]!.probes];
  };
  try {
    await checker.setTargets([{
      service: "default/web",
      backend: "10.1.0.2:8080/TCP",
      portName: "http",
      frontends: [],
      ip: "10.1.0.2",
      probePort: 8080,
      check: FAST_CHECK,
    }]);
    await waitUntil(() => checker.states().get("default/web|10.1.0.2:8080/TCP") === "active", "up");
    deepStrictEqual(await outage(), [3, 2], "release: out after fall 3, back after rise 2");

    const strict = await swap(await build("fixtures/strict_health.wasm"), "test");
    ok(
      strict.ok && !strict.report.healthEqualsReference && strict.report.maglevEqualsReference,
    );
    deepStrictEqual(await outage(), [3, 4], "strict_health: back after 2 × rise");

    ok((await swap(await build("release.wasm"), "rollback")).ok);
    deepStrictEqual(await outage(), [3, 2], "rolled back: rise 2 again");
  } finally {
    await checker.stop();
    await cp.stop();
  }
});

Deno.test("agent Maglev builder: the reference tables while no module serves (one rejected at start), the module's once one is accepted", async () => {
  using _logs = captureLogs();
  const host = await PolicyHost.create({ registry: new Registry(), limits: LIMITS });
  const rejected = await host.swap(await build("fixtures/wrong_hash.wasm"));
  ok(!rejected.ok && !host.ready, "no module serves");
  const builder = new WasmMaglevBuilder(host, { fallback: new TsMaglevBuilder() }); // the agent's
  const keys = [{ key: "10.1.0.1:80", weight: 100 }, { key: "10.1.0.2:80", weight: 100 }];
  const reference = new TsMaglevBuilder().build(keys, 251, undefined, [7, 9]);
  deepStrictEqual([...builder.build(keys, 251, undefined, [7, 9])], [...reference]);
  deepStrictEqual(builder.fillModule?.(), undefined, "nothing to build ahead on workers");
  ok((await host.swap(await build("release.wasm"))).ok);
  deepStrictEqual(builder.fillModule?.()?.digest, host.current.digest, "the serving module's");
  const wasm = new WasmMaglevBuilder(host).build(keys, 251, undefined, [7, 9]);
  deepStrictEqual([...builder.build(keys, 251, undefined, [7, 9])], [...wasm]);
});
