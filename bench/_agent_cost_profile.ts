/**
 * CPU profiles of the agents of `bench/agent_cost.ts --profile`: each agent process samples
 * itself with V8's Profiler (`node:inspector`, `_agent_cost_node.ts`) for one phase and saves a
 * `.cpuprofile` (open it in Chrome DevTools); the bench summarizes self time by function and by
 * file.
 *
 * @module
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  hitCount?: number;
}

/** A V8 CPU profile (`Profiler.stop`'s result). */
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
}

/** Self time of the top entries by function and by file, in % of all samples. */
export function summarize(p: CpuProfile, top = 15): { functions: string[]; files: string[] } {
  const total = p.nodes.reduce((s, n) => s + (n.hitCount ?? 0), 0) || 1;
  const byFn = new Map<string, number>();
  const byFile = new Map<string, number>();
  for (const n of p.nodes) {
    const hits = n.hitCount ?? 0;
    if (hits === 0) continue;
    const f = n.callFrame;
    const file = f.url.replace(/^.*\/(node_modules|main)\//, "$1/").replace(/^file:\/\//, "") ||
      "(native)";
    const fn = `${f.functionName || "(anonymous)"} ${file}:${f.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + hits);
    byFile.set(file, (byFile.get(file) ?? 0) + hits);
  }
  const fmt = (m: Map<string, number>) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, v]) =>
      `${(100 * v / total).toFixed(1).padStart(5)} %  ${k}`
    );
  return { functions: fmt(byFn), files: fmt(byFile) };
}
