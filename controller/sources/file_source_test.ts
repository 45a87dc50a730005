import { assertEquals, assertRejects } from "../_testing.ts";
import { DEFAULT_CONFIG_YAML, parseConfig } from "./file_source.ts";

Deno.test("file source: the embedded default config parses", () => {
  const cfg = parseConfig(DEFAULT_CONFIG_YAML);
  assertEquals(cfg.services.map((s) => [s.name, s.frontends.length, s.backends.length]), [[
    "default/demo",
    1,
    2,
  ]]);
});

Deno.test("file source: JSON works and errors name the offending path", async () => {
  const cfg = parseConfig(
    '{"services":[{"name":"a/b","frontends":["10.0.0.1:80/TCP"],"backends":[{"address":"10.1.0.1:80/TCP","weight":5}]}]}',
    { format: "json" },
  );
  assertEquals(cfg.services[0]!.backends[0]!.weight, 5);
  await assertRejects(
    () => parseConfig("services:\n  - name: a/b\n    frontends: [10.0.0.1:99999/TCP]\n"),
    "$.services[0].frontends[0].address",
  );
  await assertRejects(
    () => parseConfig("services:\n  - name: nons\n"),
    '"nons" is not namespace/name',
  );
  await assertRejects(
    () => parseConfig("services:\n  - name: a/b\n    maglevSize: 1000\n"),
    "must be prime",
  );
  await assertRejects(() => parseConfig("servces: []\n"), "$.servces: unknown key");
});

Deno.test("file source: no prune before the first config loads (restart keeps the maps)", async () => {
  const { createControlPlane } = await import("../control_plane.ts");
  const { MemoryLBMaps } = await import("../lbmaps_memory.ts");
  const { FileSource } = await import("./file_source.ts");
  const maps = new MemoryLBMaps();
  // A previous run left a service in the maps.
  await maps.updateBackend(1, { address: "10.0.1.1", port: 8080 });
  await maps.updateMaglev(1, new Uint32Array(251).fill(1));
  await maps.updateService({ address: "10.0.100.1", port: 80, protocol: "TCP" }, {
    serviceId: 1,
    backendCount: 1,
    flowKeyMode: "five-tuple",
    maglevSize: 251,
  });
  const cp = await createControlPlane(maps, { log: () => {}, maglevSize: 251 });
  const file = new FileSource(cp.writer);
  cp.start();
  await cp.reconciler.waitIdle();
  assertEquals(maps.services.size, 1, "pruned before the config loaded");
  await assertRejects(() => file.load("services: [1]"), "Invalid config");
  await cp.reconciler.waitIdle();
  assertEquals(maps.services.size, 1, "pruned after a rejected config");
  file.load("services: []");
  await cp.reconciler.waitIdle();
  assertEquals(maps.services.size, 0, "not pruned after the first good config");
  await cp.stop();
});
