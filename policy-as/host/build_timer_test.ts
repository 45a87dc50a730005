import { deepStrictEqual, ok } from "node:assert/strict";
import { CPU_TIMED_M, timedBuild } from "./build_timer.ts";

Deno.test("timedBuild with a clock: one run, the clock's difference", () => {
  let t = 0, runs = 0;
  const r = timedBuild(() => (t += 7), 1, 1021, () => ++runs);
  deepStrictEqual({ value: r.value, ms: r.ms, runs }, { value: 1, ms: 7, runs: 1 });
});

Deno.test("timedBuild within budget by wall time: one run, no CPU clock", () => {
  let runs = 0;
  const r = timedBuild(undefined, 60_000, 1021, () => ++runs);
  deepStrictEqual({ value: r.value, runs }, { value: 1, runs: 1 });
  ok(r.ms >= 0 && r.ms <= 60_000, `ms ${r.ms}`);
});

Deno.test("timedBuild over budget by wall time: run again, timed on wall and CPU", () => {
  let runs = 0;
  // A budget below zero: every first run is over it by wall time.
  const r = timedBuild(undefined, -1, 1021, () => ++runs);
  deepStrictEqual({ value: r.value, runs }, { value: 2, runs: 2 });
  ok(r.ms >= 0, `ms ${r.ms}`);
});

Deno.test("timedBuild of a large table: one run on both clocks, even over budget", () => {
  let runs = 0;
  const r = timedBuild(undefined, -1, CPU_TIMED_M, () => ++runs);
  deepStrictEqual({ value: r.value, runs }, { value: 1, runs: 1 });
  ok(r.ms >= 0, `ms ${r.ms}`);
});

Deno.test("timedBuild: a build that throws throws, and is not run again", () => {
  let runs = 0;
  let caught: unknown = null;
  try {
    timedBuild(undefined, -1, 1021, () => {
      runs++;
      throw new Error("bad input");
    });
  } catch (e) {
    caught = e;
  }
  ok(caught instanceof Error && caught.message === "bad input");
  deepStrictEqual(runs, 1);
});
