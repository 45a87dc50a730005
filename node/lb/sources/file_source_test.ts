import { deepStrictEqual, throws } from "node:assert/strict";
import { waitUntil } from "../_testing.ts";
import { DEFAULT_CONFIG_YAML, parseConfig } from "./file_source.ts";

Deno.test("file source: the embedded default config parses", () => {
  const cfg = parseConfig(DEFAULT_CONFIG_YAML);
  deepStrictEqual(cfg.services.map((s) => [s.name, s.frontends.length, s.backends.length]), [[
    "default/demo",
    1,
    2,
  ]]);
});

Deno.test("file source: JSON works and errors name the offending path", () => {
  const cfg = parseConfig(
    '{"services":[{"name":"a/b","frontends":["10.0.0.1:80/TCP"],"backends":[{"address":"10.1.0.1:80/TCP","weight":5}]}]}',
    { format: "json" },
  );
  deepStrictEqual(cfg.services[0]!.backends[0]!.weight, 5);
  throws(
    () => parseConfig("services:\n  - name: a/b\n    frontends: [10.0.0.1:99999/TCP]\n"),
    /\$\.services\[0\]\.frontends\[0\]\.address/,
  );
  throws(
    () => parseConfig("services:\n  - name: nons\n"),
    /"nons" is not namespace\/name/,
  );
  throws(
    () => parseConfig("services:\n  - name: a/b\n    maglevSize: 1000\n"),
    /must be prime/,
  );
  throws(() => parseConfig("servces: []\n"), /\$\.servces: unknown key/);
});

Deno.test("file source: no prune before the first config loads (restart keeps the maps)", async () => {
  const { createControlPlane } = await import("../control_plane.ts");
  const { MemoryLBMaps } = await import("../maps/memory.ts");
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
  const cp = await createControlPlane(maps, { maglevSize: 251 });
  const file = new FileSource(cp.writer);
  cp.start();
  await cp.reconciler.waitIdle();
  deepStrictEqual(maps.services.size, 1, "pruned before the config loaded");
  throws(() => file.load("services: [1]"), /Invalid config/);
  await cp.reconciler.waitIdle();
  deepStrictEqual(maps.services.size, 1, "pruned after a rejected config");
  file.load("services: []");
  await cp.reconciler.waitIdle();
  deepStrictEqual(maps.services.size, 0, "not pruned after the first good config");
  await cp.stop();
});

Deno.test("file source: Maglev limits are refused at load, naming the service and path", () => {
  const svc = (extra: string, backends: string) =>
    `services:\n  - name: shop/web\n    frontends: [10.0.0.1:80/TCP]\n${extra}    backends:\n${backends}`;
  const many = (n: number, weight: (i: number) => number) =>
    Array.from(
      { length: n },
      (_, i) => `      - { address: 10.1.${i >> 8}.${i & 255}:80/TCP, weight: ${weight(i)} }\n`,
    ).join("");
  throws(
    () => parseConfig(svc("    maglevSize: 1000\n", many(1, () => 1))),
    (e: unknown) =>
      e instanceof Error && e.message.includes("$.services[0].maglevSize") &&
      e.message.includes('service "shop/web": Invalid Maglev table size'),
  );
  throws(
    () => parseConfig(svc("", many(1, () => 70000))),
    /\$\.services\[0\]\.backends\[0\]\.weight: service "shop\/web": 70000 is not an integer in 0\.\.65535/,
  );
  throws(
    () => parseConfig(svc("    maglevSize: 251\n", many(252, () => 1))),
    /backends: service "shop\/web": 252 backends exceed its Maglev table size 251/,
  );
  // One heavy backend among 1,000 light ones at the default M: too slow to build, refused.
  throws(
    () => parseConfig(svc("", many(1000, (i) => (i === 0 ? 65535 : 1)))),
    /\$\.services\[0\]\.backends: service "shop\/web": Weights too uneven for a Maglev table/,
  );
  // The same weights at a smaller M build within budget: accepted.
  parseConfig(svc("    maglevSize: 2003\n", many(1000, (i) => (i === 0 ? 65535 : 1))));
});

Deno.test("file source: a service the Maglev builder refuses shows the reason in its row", async () => {
  const { createControlPlane } = await import("../control_plane.ts");
  const { MemoryLBMaps } = await import("../maps/memory.ts");
  const { FileSource } = await import("./file_source.ts");
  const { frontendByAddress } = await import("../tables/frontend.ts");
  const { captureLogs } = await import("../../../lib/log.ts");
  using logs = captureLogs();
  const cp = await createControlPlane(new MemoryLBMaps(), {
    retry: { minMs: 10_000, maxMs: 10_000 },
  });
  const file = new FileSource(cp.writer);
  cp.start();
  try {
    // 200 backends from the file (M=251, accepted at load), 100 more from another source: the
    // service as a whole cannot be built.
    const addrs = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => `10.1.${(from + i) >> 8}.${(from + i) & 255}:80/TCP`);
    file.load(
      `services:\n  - name: shop/web\n    maglevSize: 251\n    frontends: [10.0.0.1:80/TCP]\n` +
        `    backends: [${addrs(0, 200).join(", ")}]\n`,
    );
    const other = cp.writer.source("other");
    const txn = other.txn();
    other.setBackends(txn, {
      service: "shop/web",
      backends: addrs(200, 100).map((address) => ({ address })),
    });
    txn.commit();
    let error: string | undefined;
    await waitUntil(() => {
      const fe = cp.tables.frontends.get(cp.db.readTxn(), frontendByAddress("10.0.0.1:80/TCP"));
      if (fe?.status.kind === "error") error = fe.status.error;
      return error !== undefined;
    }, "the frontend's error");
    deepStrictEqual(
      error,
      'Cannot reconcile frontend "10.0.0.1:80/TCP" of service "shop/web": ' +
        "Cannot build Maglev table: 300 backends exceed table size M=251",
    );
    deepStrictEqual(logs.records.some((r) => r.msg === "update failed, will retry"), true);
  } finally {
    await cp.stop();
  }
});

Deno.test("file source: a service's healthCheck is parsed; a bad one names its field", () => {
  const cfg = parseConfig(
    "services:\n  - name: a/b\n    frontends: [10.0.0.1:80/TCP]\n" +
      "    healthCheck: { kind: http, path: /healthz, intervalMs: 100, fall: 3 }\n",
  );
  deepStrictEqual(
    [cfg.services[0]!.healthCheck?.kind, cfg.services[0]!.healthCheck?.intervalMs],
    ["http", 100],
  );
  deepStrictEqual(parseConfig("services:\n  - name: a/b\n").services[0]!.healthCheck, undefined);
  throws(
    () => parseConfig("services:\n  - name: a/b\n    healthCheck: { kind: tcp, rise: 0 }\n"),
    /Invalid config at \$\.services\[0\]\.healthCheck\.rise: 0 is not an integer in 1\.\.1000 \(service "a\/b"\)/,
  );
});
