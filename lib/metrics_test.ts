import { deepStrictEqual } from "node:assert/strict";
import { Registry } from "./metrics.ts";

Deno.test("registry exposes counters, gauges and histograms in text format", () => {
  const r = new Registry();
  const c = r.counter("t_total", "A counter.", { labelNames: ["vip"] });
  c.inc({ vip: "a" });
  c.inc({ vip: "a" }, 2);
  const g = r.gauge("t_queue", "A gauge.");
  let n = 0;
  g.onCollect(() => g.set(undefined, ++n));
  const h = r.histogram("t_seconds", "A histogram.", { buckets: [0.1, 1] });
  h.observe(undefined, 0.05);
  h.observe(undefined, 5);
  deepStrictEqual(r.expose().split("\n"), [
    "# HELP t_total A counter.",
    "# TYPE t_total counter",
    't_total{vip="a"} 3',
    "# HELP t_queue A gauge.",
    "# TYPE t_queue gauge",
    "t_queue 1",
    "# HELP t_seconds A histogram.",
    "# TYPE t_seconds histogram",
    't_seconds_bucket{le="0.1"} 1',
    't_seconds_bucket{le="1"} 1',
    't_seconds_bucket{le="+Inf"} 2',
    "t_seconds_sum 5.05",
    "t_seconds_count 2",
    "",
  ]);
  deepStrictEqual(r.counter("t_total", "again", { labelNames: ["vip"] }), c);
});

Deno.test("registry rejects wrong labels and type clashes", () => {
  const r = new Registry();
  const c = r.counter("x_total", "x", { labelNames: ["a"] });
  let threw = 0;
  try {
    c.inc({ b: "1" });
  } catch {
    threw++;
  }
  try {
    r.gauge("x_total", "x");
  } catch {
    threw++;
  }
  try {
    c.inc({ a: "1" }, -1);
  } catch {
    threw++;
  }
  deepStrictEqual(threw, 3);
});
