/**
 * A V8 CPU profile and allocation sampling of part of a benchmark, through the inspector
 * protocol (`node:inspector`, in process: no file; needs `--allow-sys`), summarised as self time
 * per function and per file, and bytes allocated per function. Used by
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
  stop(top?: number): Promise<
    { functions: ProfileEntry[]; files: ProfileEntry[]; ms: number; allocations: AllocEntry[] }
  >;
}

/** Bytes allocated by a function (sampled: allocations still alive or not when it stopped). */
export interface AllocEntry {
  name: string;
  pct: number;
  bytes: number;
}

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
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
  await post("HeapProfiler.enable");
  // Every allocation sampled, collected or not (the flags keep what the GC took).
  await post("HeapProfiler.startSampling", {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await post("Profiler.start");
  return {
    async stop(top = 25) {
      const { profile } = await post<{ profile: Profile }>("Profiler.stop");
      const heap = await post<{ profile: { head: HeapNode } }>("HeapProfiler.stopSampling");
      session.disconnect();
      return { ...summarise(profile, top), allocations: allocations(heap.profile.head, top) };
    },
  };
}

/**
 * Sampled bytes allocated per function (self), largest first; a built-in (`push`, `slice`, a
 * constructor) is named with the function that called it.
 */
function allocations(head: HeapNode, top: number): AllocEntry[] {
  const by = new Map<string, number>();
  let total = 0;
  const walk = (n: HeapNode, caller: string) => {
    const own = frameName(n.callFrame);
    const name = n.callFrame.url === "" ? `${n.callFrame.functionName} ← ${caller}` : own;
    if (n.selfSize > 0) {
      by.set(name, (by.get(name) ?? 0) + n.selfSize);
      total += n.selfSize;
    }
    for (const c of n.children) walk(c, n.callFrame.url === "" ? caller : own);
  };
  walk(head, "(root)");
  return [...by].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, bytes]) => ({
    name,
    pct: Number((100 * bytes / (total || 1)).toFixed(1)),
    bytes,
  }));
}

const REPO = new URL("../", import.meta.url).href;
const fileOf = (url: string) => url.startsWith(REPO) ? url.slice(REPO.length) : url || "(native)";
const frameName = (f: { functionName: string; url: string; lineNumber: number }) =>
  `${f.functionName || "(anonymous)"} ${fileOf(f.url)}${f.url ? `:${f.lineNumber + 1}` : ""}`;

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
    const file = fileOf(f.url);
    const fn = frameName(f);
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
