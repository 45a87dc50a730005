import { ok } from "node:assert/strict";
import { Registry } from "../../lib/metrics.ts";
import { createControlPlane } from "./control_plane.ts";
import { MemoryLBMaps } from "./maps/memory.ts";
import { exportControlPlaneMetrics } from "./metrics.ts";
import { DEFAULT_CONFIG_YAML, FileSource } from "./sources/file_source.ts";

Deno.test("metrics: control-plane state and counters in the Prometheus exposition", async () => {
  const maps = new MemoryLBMaps();
  const cp = await createControlPlane(maps, { maglevSize: 251 });
  const file = new FileSource(cp.writer);
  cp.start();
  file.load(DEFAULT_CONFIG_YAML);
  await cp.waitFrontend("10.0.100.1:80/TCP");
  await cp.reconciler.waitIdle();
  const reg = new Registry();
  exportControlPlaneMetrics(cp, reg);
  const text = reg.expose();
  for (
    const line of [
      'holdfast_lb_frontends{status="done"} 1',
      "holdfast_lb_services 1",
      "holdfast_lb_backends 2",
      'holdfast_reconciler_updates_total{reconciler="bpf-lbmaps"} 1',
      "holdfast_lbmaps_backend_writes_total 2",
    ]
  ) ok(text.includes(line), `missing "${line}" in:\n${text}`);
  // Counters keep counting across scrapes.
  reg.expose();
  ok(reg.expose().includes("holdfast_lbmaps_backend_writes_total 2"));
  // A service entry deleted behind the control plane's back is repaired and counted.
  maps.services.clear();
  cp.reconciler.triggerFullReconcile();
  await cp.reconciler.waitIdle();
  const after = reg.expose();
  ok(after.includes('holdfast_reconciler_repairs_total{reconciler="bpf-lbmaps"} 1'), after);
  ok(maps.services.size === 1, "service entry not rewritten");
  await cp.stop();
});
