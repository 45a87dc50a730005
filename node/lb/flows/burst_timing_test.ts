import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { FLOW_EVENT_IDLE_WAIT_MS, flowEventReader, LEARN_BURST_FLOWS } from "./burst_timing.ts";

Deno.test("flow event reader: 20–200 ms bursts of ~200 flows by default; --learn-window-ms; a small ring shortens the wait", () => {
  const reader = (coalesceMs: number, coalesceMaxMs: number, coalesceRecords: number) => ({
    coalesceMs,
    coalesceMaxMs,
    coalesceRecords,
    pollMs: FLOW_EVENT_IDLE_WAIT_MS,
  });
  deepStrictEqual(flowEventReader(), reader(20, 200, LEARN_BURST_FLOWS));
  strictEqual(LEARN_BURST_FLOWS, 200);
  deepStrictEqual(flowEventReader(1000), reader(20, 1000, 1000), "1 s: bursts of ~1,000 flows");
  deepStrictEqual(flowEventReader(0), reader(0, 0, 1), "no gathering");
  // A 1 MiB ring pinned by an older version holds an eighth of the default ring's 1 s.
  deepStrictEqual(flowEventReader(1000, 1 << 20), reader(20, 125, 125));
  deepStrictEqual(flowEventReader(200, 1 << 20), reader(20, 125, 125));
  deepStrictEqual(flowEventReader(5000, 16 << 20), reader(20, 2000, 2000));
});
