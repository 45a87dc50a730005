import { deepStrictEqual, throws } from "node:assert/strict";
import {
  HEALTH_CHECK_DEFAULTS,
  HealthCheckError,
  healthCheckFromAnnotations,
  parseHealthCheck,
} from "./health_check.ts";

/** A `throws` check: a HealthCheckError whose message contains `part`. */
const healthCheckError = (part: string) => (e: unknown) =>
  e instanceof HealthCheckError && e.message.includes(part);

Deno.test("a file healthCheck fills every field the operator left out", () => {
  deepStrictEqual(parseHealthCheck("tcp", "$.s"), { ...HEALTH_CHECK_DEFAULTS, kind: "tcp" });
  deepStrictEqual(
    parseHealthCheck(
      { kind: "http", path: "/healthz", expectStatus: 204, port: 8081, intervalMs: 100, fall: 3 },
      "$.s",
    ),
    {
      ...HEALTH_CHECK_DEFAULTS,
      kind: "http",
      path: "/healthz",
      expectStatus: 204,
      port: 8081,
      intervalMs: 100,
      timeoutMs: 100, // clamped to the interval it did not set itself
      fall: 3,
    },
  );
});

Deno.test("an invalid file healthCheck names the field", () => {
  const cases: [unknown, string][] = [
    [{ kind: "icmp" }, '$.s.kind: "icmp" is not tcp or http'],
    [{ kind: "tcp", fall: 0 }, "$.s.fall: 0 is not an integer in 1..1000"],
    [{ kind: "tcp", rise: 1.5 }, "$.s.rise: 1.5 is not an integer"],
    [{ kind: "http", path: "healthz" }, '$.s.path: "healthz" is not a path'],
    [{ kind: "tcp", intervalMs: 100, timeoutMs: 200 }, "$.s.timeoutMs: 200 exceeds the interval"],
    [{ kind: "tcp", backoffBaseMs: 10, backoffMaxMs: 5 }, "$.s.backoffMaxMs: 5 is below"],
    [{ kind: "tcp", intervall: 5 }, "$.s.intervall: unknown key"],
    [[1], "$.s: expected a mapping"],
  ];
  for (const [raw, msg] of cases) {
    throws(() => parseHealthCheck(raw, "$.s"), healthCheckError(msg));
  }
});

Deno.test("annotations: none means no health check; values are read as integers", () => {
  deepStrictEqual(healthCheckFromAnnotations({ "holdfast.io/flow-key": "client-ip" }), undefined);
  deepStrictEqual(
    healthCheckFromAnnotations({
      "holdfast.io/health-check": "http",
      "holdfast.io/health-check-path": "/ready",
      "holdfast.io/health-check-interval-ms": "100",
      "holdfast.io/health-check-rise": "1",
      "holdfast.io/health-check-backoff-max-ms": "5000",
    }),
    {
      ...HEALTH_CHECK_DEFAULTS,
      kind: "http",
      path: "/ready",
      intervalMs: 100,
      timeoutMs: 100,
      rise: 1,
      backoffMaxMs: 5000,
    },
  );
});

Deno.test("an invalid annotation is named in the error", () => {
  throws(
    () => healthCheckFromAnnotations({ "holdfast.io/health-check": "ping" }),
    healthCheckError('annotation holdfast.io/health-check: "ping" is not tcp or http'),
  );
  throws(
    () =>
      healthCheckFromAnnotations({
        "holdfast.io/health-check": "tcp",
        "holdfast.io/health-check-fall": "three",
      }),
    healthCheckError(
      'annotation holdfast.io/health-check-fall: "three" is not an integer in 1..1000',
    ),
  );
  throws(
    () =>
      healthCheckFromAnnotations({
        "holdfast.io/health-check": "tcp",
        "holdfast.io/health-check-falls": "3",
      }),
    healthCheckError("annotation holdfast.io/health-check-falls: unknown health-check setting"),
  );
});

Deno.test("a Service's health check reaches the model agents read, and back", async () => {
  const { createControlPlane } = await import("../control_plane.ts");
  const { MemoryLBMaps } = await import("../maps/memory.ts");
  const { deriveEntry } = await import("../../../controller/model/_derive.ts");
  const { encodeEntry } = await import("../../../controller/model/schema.ts");
  const { parseConfig } = await import("./file_source.ts");
  const { convertService } = await import("./k8s_convert.ts");
  const cp = await createControlPlane(new MemoryLBMaps(), { maglevSize: 251 });
  const svc = convertService({
    metadata: {
      name: "web",
      namespace: "shop",
      annotations: { "holdfast.io/health-check": "tcp", "holdfast.io/health-check-fall": "2" },
    },
  });
  const src = cp.writer.source("k8s");
  let txn = src.txn();
  src.upsertService(txn, svc);
  txn.commit();
  // The model entry, as the controller publishes it and an agent's RedisModelSource parses it.
  const entry = JSON.parse(encodeEntry(deriveEntry(cp.tables, cp.db.readTxn(), "shop/web")!));
  const seen = parseConfig(JSON.stringify({ services: [{ ...entry.service, backends: [] }] }));
  deepStrictEqual(seen.services[0]!.healthCheck, svc.healthCheck);
  // Dropping the annotation drops it from the row.
  txn = src.txn();
  src.upsertService(txn, { ...svc, healthCheck: undefined });
  txn.commit();
  deepStrictEqual(cp.tables.services.all(cp.db.readTxn())[0]!.healthCheck, undefined);
  await cp.stop();
});
