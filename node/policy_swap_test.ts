import { assert, assertEquals } from "../controller/_testing.ts";
import { createControlPlane } from "../controller/control_plane.ts";
import { MemoryLBMaps } from "../controller/lbmaps_memory.ts";
import { MODEL_YAML, waitUntil } from "../controller/model/_testing.ts";
import { FileSource } from "../controller/sources/file_source.ts";
import { captureLogs, log } from "../lib/log.ts";
import { Registry } from "../lib/metrics.ts";
import { PolicyHost, TsMaglevBuilder, WasmMaglevBuilder } from "../policy-as/host/mod.ts";
import { policySwapper } from "./policy_swap.ts";

const build = (name: string) =>
  Deno.readFile(new URL(`../policy-as/build/${name}`, import.meta.url));

Deno.test("agent policy swap: an accepted module rebuilds every Maglev table; a rejected one changes nothing", async () => {
  using logs = captureLogs();
  const registry = new Registry();
  const host = await PolicyHost.create({ registry });
  assert((await host.swap(await build("release.wasm"))).ok);
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
    const writes = m.holdfast_lbmaps_maglev_writes_total;
    const swap = policySwapper(host, cp, log);

    const accepted = await swap(await build("debug.wasm"), "test");
    assert(accepted.ok);
    await waitUntil(
      () => m.holdfast_lbmaps_maglev_writes_total === writes + 2,
      "both frontends' tables rebuilt",
    );
    await cp.reconciler.waitIdle();
    const swapped = logs.records.find((r) => r.msg === "policy swapped");
    assertEquals([swapped?.sha256, swapped?.rebuild_frontends], [accepted.digest, 2]);

    const before = m.holdfast_lbmaps_maglev_writes_total, dump = await maps.dump();
    const rejected = await swap(await build("fixtures/wrong_hash.wasm"), "test");
    assertEquals([rejected.ok, !rejected.ok && rejected.reason], [false, "vectors"]);
    cp.reconciler.triggerFullReconcile();
    await new Promise((r) => setTimeout(r, 50));
    await cp.reconciler.waitIdle();
    assertEquals(m.holdfast_lbmaps_maglev_writes_total, before, "no table written");
    assertEquals(await maps.dump(), dump);
    assertEquals(host.current.digest, accepted.digest, "the accepted module keeps serving");
    assert(logs.records.some((r) => r.msg === "policy rejected" && r.reason === "vectors"));
    assert(registry.expose().includes('holdfast_policy_rejections_total{reason="vectors"} 1'));
  } finally {
    await cp.stop();
  }
});
