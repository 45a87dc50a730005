/**
 * A V8 CPU profile of part of a benchmark, through the inspector protocol (`node:inspector`,
 * in process: no flag, no file), summarised as self time per function and per file. Used by
 * `bench/control_plane.ts --profile`.
 *
 * @module
 */

import { Session } from "node:inspector";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples?: number[];
  timeDeltas?: number[];
}

/** One line of a summary: a function (or file) and its share of the samples. */
export interface ProfileEntry {
  name: string;
  selfPct: number;
  selfMs: number;
}

/** A running profile: `stop()` ends it and returns the top entries. */
export interface CpuProfiler {
  stop(top?: number): Promise<{ functions: ProfileEntry[]; files: ProfileEntry[]; ms: number }>;
}

/** Starts sampling every `intervalUs` µs (default 100). */
export async function startCpuProfile(intervalUs = 100): Promise<CpuProfiler> {
  const session = new Session();
  session.connect();
  const post = <T>(method: string, params: object = {}) =>
    new Promise<T>((resolve, reject) =>
      session.post(method, params, (err: Error | null, r: unknown) => {
        if (err) reject(err);
        else resolve(r as T);
      })
    );
  await post("Profiler.enable");
  await post("Profiler.setSamplingInterval", { interval: intervalUs });
  await post("Profiler.start");
  return {
    async stop(top = 25) {
      const { profile } = await post<{ profile: Profile }>("Profiler.stop");
      session.disconnect();
      return summarise(profile, top);
    },
  };
}

const REPO = new URL("../", import.meta.url).href;

/** Self time per function (`name file:line`) and per file, largest first. */
export function summarise(profile: Profile, top: number) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>(); // node id → µs
  const samples = profile.samples ?? [], deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    // A sample's time is the delta to the next one.
    const us = deltas[i + 1] ?? 0;
    self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + us);
  }
  let total = 0;
  const fns = new Map<string, number>(), files = new Map<string, number>();
  for (const [id, us] of self) {
    total += us;
    const f = byId.get(id)!.callFrame;
    const file = f.url.startsWith(REPO) ? f.url.slice(REPO.length) : f.url || "(native)";
    const fn = `${f.functionName || "(anonymous)"} ${file}${f.url ? `:${f.lineNumber + 1}` : ""}`;
    fns.set(fn, (fns.get(fn) ?? 0) + us);
    files.set(file, (files.get(file) ?? 0) + us);
  }
  const rank = (m: Map<string, number>): ProfileEntry[] =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, us]) => ({
      name,
      selfPct: Number((100 * us / (total || 1)).toFixed(1)),
      selfMs: Number((us / 1000).toFixed(1)),
    }));
  return { functions: rank(fns), files: rank(files), ms: total / 1000 };
}
