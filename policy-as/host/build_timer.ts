/**
 * How long a Maglev build took, for the policy module's time budget: by default the lesser of its
 * wall time and the CPU time this process spent meanwhile. Other processes taking the CPUs (a busy
 * node, a loaded CI machine) stretch wall time but not this process's CPU time, so they cannot
 * push a module over its budget; a build that really computes that long still goes over. Tests
 * pass a clock, so a verdict depends on nothing outside them.
 *
 * @module
 */
import process from "node:process";

/**
 * Starts timing a build; the returned function gives the ms since. With `now` (a clock in ms) it
 * is that clock's difference.
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
