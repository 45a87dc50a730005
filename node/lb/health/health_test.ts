import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { createControlPlane } from "../control_plane.ts";
import { MemoryLBMaps } from "../maps/memory.ts";
import { FileSource } from "../sources/file_source.ts";
import { captureLogs } from "../../../lib/log.ts";
import { Registry } from "../../../lib/metrics.ts";
import { healthStepTs } from "../../../policy-as/host/health_ts.ts";
import { MemoryFlowStore } from "../flows/_memory_store.ts";
import { MemoryFlowTable } from "../flows/table.ts";
import { FAST_CHECK } from "./_testing.ts";
import {
  type HealthChange,
  HealthChecker,
  healthTargets,
  type ProbeResult,
  startHealth,
} from "./mod.ts";

const CHECK = FAST_CHECK;

function view(check = CHECK) {
  return {
    services: [{
      name: "default/web",
      frontends: [{ address: "10.0.100.1:80/TCP" }],
      backends: ["10.1.0.2", "10.1.0.3"].map((ip) => ({
        address: `${ip}:8080/TCP`,
        portName: "",
      })),
      healthCheck: check,
    }],
    redirects: [],
  };
}

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

Deno.test("health: fall failed probes quarantine, rise good ones bring back; one line each", async () => {
  using logs = captureLogs();
  const down = new Set<string>();
  const changes: HealthChange[] = [];
  const checker = new HealthChecker({
    step: () => healthStepTs,
    prober: (t) =>
      Promise.resolve<ProbeResult>(
        down.has(t.ip) ? { ok: false, reason: "connect refused" } : { ok: true, reason: "ok" },
      ),
    onChange: (c) => void changes.push(c),
    registry: new Registry(),
  });
  try {
    await checker.setTargets(healthTargets(view()));
    await until(() => checker.states().get("default/web|10.1.0.3:8080/TCP") === "active", "rise");
    strictEqual(changes.length, 0, "New → Active changes nothing: it was serving");
    down.add("10.1.0.3");
    await until(() => changes.length === 1, "a quarantine");
    deepStrictEqual(
      [changes[0]!.target.backend, changes[0]!.verdict, changes[0]!.probes],
      ["10.1.0.3:8080/TCP", "quarantined", 3],
    );
    ok(
      logs.records.some((r) =>
        r.msg === "backend 10.1.0.3:8080 unhealthy: 3 failed probes (connect refused)"
      ),
      "the decision's log line",
    );
    deepStrictEqual(checker.states().get("default/web|10.1.0.2:8080/TCP"), "active");
    down.delete("10.1.0.3");
    await until(() => changes.length === 2, "a recovery");
    deepStrictEqual([changes[1]!.verdict, changes[1]!.probes], ["active", 2]);
  } finally {
    await checker.stop();
  }
});

Deno.test("health: the step is looked up per probe, so a swapped policy judges the next one", async () => {
  let strict = false;
  const changes: HealthChange[] = [];
  const checker = new HealthChecker({
    // The "stricter module": one failure is enough.
    step: () =>
      strict
        ? (rec, p) => healthStepTs(rec, { ...p, params: { ...p.params, fall: 1 } })
        : healthStepTs,
    prober: () => Promise.resolve({ ok: false, reason: "timeout" }),
    onChange: (c) => void changes.push(c),
    registry: new Registry(),
  });
  try {
    strict = true;
    await checker.setTargets(healthTargets(view({ ...CHECK, fall: 1000, intervalMs: 10 })));
    await until(() => changes.length === 2, "both quarantined by the strict step");
    deepStrictEqual(changes.map((c) => c.probes), [1, 1]);
  } finally {
    await checker.stop();
  }
});

Deno.test("health: probes in flight never exceed maxConcurrent", async () => {
  let inFlight = 0, peak = 0, total = 0;
  const many = {
    services: [{
      name: "default/many",
      frontends: [],
      backends: Array.from({ length: 40 }, (_, i) => ({ address: `10.1.1.${i + 1}:80/TCP` })),
      healthCheck: CHECK,
    }],
  };
  const checker = new HealthChecker({
    step: () => healthStepTs,
    prober: async () => {
      peak = Math.max(peak, ++inFlight);
      await new Promise((r) => setTimeout(r, 3));
      inFlight--;
      total++;
      return { ok: true, reason: "ok" };
    },
    onChange: () => {},
    maxConcurrent: 5,
    registry: new Registry(),
  });
  try {
    await checker.setTargets(healthTargets(many));
    await until(() => total >= 100, "100 probes");
    ok(peak <= 5, `peak ${peak} probes in flight`);
  } finally {
    await checker.stop();
  }
});

Deno.test("health: a quarantine leaves the Maglev table, purges only that backend's flows; recovery returns it", async () => {
  const maps = new MemoryLBMaps();
  const cp = await createControlPlane(maps, { maglevSize: 251 });
  const file = new FileSource(cp.writer);
  cp.start();
  const cfg = view();
  // An IPv6 frontend of the same service over the same (IPv4) backends: its flows go too.
  cfg.services[0]!.frontends.push({ address: "[2001:db8:100::1]:80/TCP" });
  file.load(JSON.stringify({ services: cfg.services }), { format: "json" });
  await cp.reconciler.waitIdle();
  const inTable = () => {
    const ids = new Set(maps.maglev.values().next().value ?? []);
    return [...maps.backends].filter(([id]) => ids.has(id)).map(([, b]) => b.address).sort();
  };
  deepStrictEqual(inTable(), ["10.1.0.2", "10.1.0.3"]);
  const flows = new MemoryFlowTable();
  const flow = (sport: number, backend: number, dport = 80) => {
    flows.put({ saddr: 0x0a010002, daddr: 0x0a006401, sport, dport, proto: 6 }, {
      backend,
      flags: 0,
      lastSeenNs: 1,
    });
  };
  flow(40000, 0x0a010003); // to the backend that dies
  flow(40001, 0x0a010002); // to a live one
  flow(40002, 0x0a010003, 81); // another frontend on the same LB IP
  const flow6 = {
    saddr: "2001:db8::2",
    daddr: "2001:db8:100::1",
    sport: 40003,
    dport: 80,
    proto: 6,
  };
  flows.put(flow6, { backend: 0x0a010003, flags: 0, lastSeenNs: 1 }); // IPv6 frontend, dying backend
  const store = new MemoryFlowStore();
  const down = new Set<string>();
  const health = startHealth({
    cp,
    config: () => cfg,
    flows,
    store: () => store,
    node: "lb1",
    prober: (t) =>
      Promise.resolve(
        down.has(t.ip) ? { ok: false, reason: "timeout" } : { ok: true, reason: "ok" },
      ),
    registry: new Registry(),
  });
  try {
    down.add("10.1.0.3");
    await until(() => inTable().length === 1, "the quarantine in the maps");
    deepStrictEqual(inTable(), ["10.1.0.2"]);
    await until(() => flows.size === 2, "the purge");
    deepStrictEqual([...flows.entries()].map((e) => e.key.sport).sort(), [40001, 40002]);
    down.delete("10.1.0.3");
    await until(() => inTable().length === 2, "the recovery in the maps");
  } finally {
    await health.stop();
    await cp.stop();
  }
});

Deno.test("health: a quarantined backend removed from the config loses its verdict too", async () => {
  const maps = new MemoryLBMaps();
  const cp = await createControlPlane(maps, { maglevSize: 251 });
  cp.start();
  let cfg = view();
  const health = startHealth({
    cp,
    config: () => cfg,
    prober: (t) =>
      Promise.resolve(
        t.ip === "10.1.0.3" ? { ok: false, reason: "timeout" } : { ok: true, reason: "ok" },
      ),
    registry: new Registry(),
  });
  const healthRows = () =>
    cp.tables.backends.all(cp.db.readTxn()).filter((b) =>
      b.instances.some((i) => i.source === "health")
    );
  try {
    await until(() => healthRows().length === 1, "the quarantine row");
    cfg = {
      ...cfg,
      services: [{ ...cfg.services[0]!, backends: [cfg.services[0]!.backends[0]!] }],
    };
    await until(() => healthRows().length === 0, "the verdict released");
  } finally {
    await health.stop();
    await cp.stop();
  }
});
