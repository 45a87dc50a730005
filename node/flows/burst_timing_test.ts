import { deepStrictEqual } from "node:assert/strict";
import { FLOW_EVENT_IDLE_WAIT_MS, flowEventReader, LEARN_BURST_FLOWS } from "./burst_timing.ts";

Deno.test("flow event reader: 20 ms to 1 s bursts by default; --learn-window-ms; a small ring shortens the wait", () => {
  const base = { coalesceRecords: LEARN_BURST_FLOWS, pollMs: FLOW_EVENT_IDLE_WAIT_MS };
  deepStrictEqual(flowEventReader(), { coalesceMs: 20, coalesceMaxMs: 1000, ...base });
  deepStrictEqual(flowEventReader(200), { coalesceMs: 20, coalesceMaxMs: 200, ...base });
  deepStrictEqual(flowEventReader(0), { coalesceMs: 0, coalesceMaxMs: 0, ...base }, "no gathering");
  // A 1 MiB ring pinned by an older version holds an eighth of the default's window.
  deepStrictEqual(flowEventReader(1000, 1 << 20), { coalesceMs: 20, coalesceMaxMs: 125, ...base });
  deepStrictEqual(flowEventReader(5000, 16 << 20), {
    coalesceMs: 20,
    coalesceMaxMs: 2000,
    ...base,
  });
});
