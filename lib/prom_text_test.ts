import { deepStrictEqual } from "node:assert/strict";
import { parsePromText, samplesOf, sampleValue } from "./prom_text.ts";
import { Registry } from "./metrics.ts";

Deno.test("prom text: reads back what the registry exposes, escapes and all", () => {
  const r = new Registry();
  r.gauge("t_owner", "A gauge.", { labelNames: ["address"] }).set({ address: 'a"b\\c' }, 1);
  r.counter("t_total", "A counter.").inc(undefined, 3);
  r.histogram("t_seconds", "A histogram.", { buckets: [1] }).observe(undefined, 0.5);
  const s = parsePromText(r.expose());
  deepStrictEqual(sampleValue(s, "t_owner", { address: 'a"b\\c' }), 1);
  deepStrictEqual(sampleValue(s, "t_total"), 3);
  deepStrictEqual(sampleValue(s, "t_seconds_bucket", { le: "+Inf" }), 1);
  deepStrictEqual(samplesOf(s, "t_seconds_bucket").length, 2);
  deepStrictEqual(sampleValue(s, "missing"), undefined);
});

Deno.test("prom text: skips comments, blank and malformed lines; reads +Inf", () => {
  const s = parsePromText(
    '# TYPE x gauge\n\nnot a sample\nx{a="1"} +Inf\ny oops\nz 4 1700000000\n',
  );
  deepStrictEqual(s.map((x) => [x.name, x.value]), [["x", Infinity], ["z", 4]]);
  deepStrictEqual(sampleValue(s, "x"), Infinity);
});
