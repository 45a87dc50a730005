import { deepStrictEqual } from "node:assert/strict";
import type { HealthReport, Report } from "../model/reports.ts";
import { decodeReport, encodeReport } from "../model/reports.ts";
import { nodeList, ReportAggregator } from "./_report_events.ts";

const down = (node: string, backend = "10.1.0.3:8080"): HealthReport => ({
  kind: "health",
  node,
  service: "shop/web",
  backend,
  state: "unhealthy",
  reason: "3 failed probes (connect refused)",
});

Deno.test("report events: one verdict from two nodes in the window is one Warning naming both", () => {
  const agg = new ReportAggregator({ windowMs: 1000 });
  agg.add(down("lb-node-1"), 0);
  agg.add(down("lb-node-2"), 500);
  agg.add(down("lb-node-2"), 600); // the same node again is named once
  deepStrictEqual(agg.due(999).events, [], "the window is still open");
  const { events, dropped } = agg.due(1000);
  deepStrictEqual(dropped, 0);
  deepStrictEqual(events, [{
    regarding: { kind: "Service", namespace: "shop", name: "web" },
    type: "Warning",
    reason: "BackendUnhealthy",
    note:
      "backend 10.1.0.3:8080 unhealthy on lb-node-1, lb-node-2: 3 failed probes (connect refused)",
    action: "Quarantine",
  }]);
  deepStrictEqual(agg.pending, 0);
});

Deno.test("report events: other backends, states and reasons are separate Events; healthy is Normal", () => {
  const agg = new ReportAggregator({ windowMs: 10 });
  agg.add(down("a"), 0);
  agg.add(down("b", "10.1.0.4:8080"), 0);
  agg.add({ ...down("c"), reason: "3 failed probes (timeout)" }, 0);
  agg.add({ ...down("d"), state: "healthy", reason: "2 successful probes" }, 0);
  const got = agg.due(10).events.map((e) => `${e.type} ${e.reason}: ${e.note}`);
  deepStrictEqual(got, [
    "Warning BackendUnhealthy: backend 10.1.0.3:8080 unhealthy on a: 3 failed probes (connect refused)",
    "Warning BackendUnhealthy: backend 10.1.0.4:8080 unhealthy on b: 3 failed probes (connect refused)",
    "Warning BackendUnhealthy: backend 10.1.0.3:8080 unhealthy on c: 3 failed probes (timeout)",
    "Normal BackendHealthy: backend 10.1.0.3:8080 healthy on d: 2 successful probes",
  ]);
});

Deno.test("report events: past five nodes the note counts them", () => {
  deepStrictEqual(nodeList(["a", "b"]), "a, b");
  deepStrictEqual(nodeList(["a", "b", "c", "d", "e", "f", "g"]), "7 LB nodes (a, b, c, d, e, …)");
});

Deno.test("report events: an object gets at most perObjectPerMinute Events a minute", () => {
  const agg = new ReportAggregator({ windowMs: 1, perObjectPerMinute: 2 });
  for (let i = 0; i < 4; i++) agg.add(down("a", `10.1.0.${i}:80`), 0);
  agg.add({ ...down("a"), service: "shop/other" }, 0); // another object has its own budget
  const first = agg.due(1);
  deepStrictEqual(first.events.length, 3);
  deepStrictEqual(first.dropped, 2);
  agg.add(down("a", "10.1.0.9:80"), 30_000);
  deepStrictEqual(agg.due(30_001).dropped, 1, "still within the minute");
  agg.add(down("a", "10.1.0.9:80"), 61_000);
  deepStrictEqual(agg.due(61_001).events.length, 1, "a minute later it may write again");
});

Deno.test("report events: a policy rejection is a Warning on the policy ConfigMap, dropped without one", () => {
  const r: Report = { kind: "policy", node: "lb-1", sha256: "ab".repeat(32), reason: "abi: x" };
  deepStrictEqual(new ReportAggregator().add(r, 0), false);
  const agg = new ReportAggregator({
    windowMs: 5,
    policyConfigMap: { namespace: "holdfast-system", name: "holdfast-policy" },
  });
  agg.add(r, 0);
  agg.add({ ...r, node: "lb-2" }, 1);
  const [e] = agg.due(5).events;
  deepStrictEqual(e?.regarding, {
    kind: "ConfigMap",
    namespace: "holdfast-system",
    name: "holdfast-policy",
  });
  deepStrictEqual(
    e?.note,
    "Policy module sha256 abababababababab rejected on lb-1, lb-2 (abi: x); the module serving there stays",
  );
});

Deno.test("reports: stream fields round-trip; other entries are not reports", () => {
  const r = down("lb-node-1");
  deepStrictEqual(decodeReport(encodeReport(r)), r);
  deepStrictEqual(decodeReport(["kind", "health", "node", "x"]), undefined);
  deepStrictEqual(decodeReport(["kind", "other", "node", "x"]), undefined);
});
