/**
 * How long a Maglev build took, for the policy module's time budget: by default the lesser of its
 * wall time and the CPU time this process spent meanwhile. Other processes taking the CPUs (a busy
 * node, a loaded CI machine) stretch wall time but not this process's CPU time, so they cannot
 * push a module over its budget; a build that really computes that long still goes over. Tests
 * pass a clock, so a verdict depends on nothing outside them.
 *
 * The CPU clock (`process.cpuUsage`: a `getrusage` over every thread of the process, 2–6 µs a
 * read on the 2-CPU CI machine) is read only where it is worth it: {@linkcode timedBuild} times a
 * small table (M below {@linkcode CPU_TIMED_M}: tens to hundreds of µs, the agents' tables) by
 * wall time alone and runs such a build again, timed on both clocks, only when its wall time is
 * over the budget (a build within budget by wall time is within it by the lesser of the two as
 * well, so the verdict is the same); a large table is timed on both clocks from the start, so a
 * long build on a loaded node is never run twice.
 *
 * @module
 */
import process from "node:process";

/**
 * Starts timing a build; the returned function gives the ms since: the lesser of wall and
 * process CPU time. With `now` (a clock in ms) it is that clock's difference.
 *
 * @example
 * ```ts
 * import { startBuildTimer } from "./build_timer.ts";
 * let t = 0;
 * const elapsed = startBuildTimer(() => (t += 5));
 * if (elapsed() !== 5) throw new Error("one step of the clock");
 * ```
 */
export function startBuildTimer(now: (() => number) | undefined): () => number {
  if (now) {
    const t0 = now();
    return () => now() - t0;
  }
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  return () => {
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    return Math.min(wall, (cpu.user + cpu.system) / 1000);
  };
}

/** Tables of this size (slots) and up are timed on both clocks from the start. */
export const CPU_TIMED_M = 16_384;

/**
 * Runs `build` of a table of `m` slots (deterministic: same input, same result) and times it
 * against `budgetMs`. With `now`, that clock's difference over one run. Without it: M from
 * {@linkcode CPU_TIMED_M} up, the lesser of wall and CPU time of one run; below, the wall time
 * when within budget, and when over it the second run's lesser of wall and CPU time.
 *
 * @example
 * ```ts
 * import { timedBuild } from "./build_timer.ts";
 * let runs = 0;
 * const { value, ms } = timedBuild(undefined, 1_000, 1021, () => ++runs);
 * if (value !== 1 || runs !== 1 || !(ms >= 0 && ms < 1_000)) throw new Error("one run");
 * ```
 */
export function timedBuild<T>(
  now: (() => number) | undefined,
  budgetMs: number,
  m: number,
  build: () => T,
): { value: T; ms: number } {
  if (now || m >= CPU_TIMED_M) {
    const elapsed = startBuildTimer(now);
    const value = build();
    return { value, ms: elapsed() };
  }
  const t0 = performance.now();
  const first = build();
  const wall = performance.now() - t0;
  if (wall <= budgetMs) return { value: first, ms: wall };
  const elapsed = startBuildTimer(undefined);
  const value = build();
  return { value, ms: elapsed() };
}
