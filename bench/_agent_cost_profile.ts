/**
 * CPU profiles of the agents of `bench/agent_cost.ts --profile`: each agent process runs with
 * `--inspect=127.0.0.1:0`; the bench connects to its inspector (Chrome DevTools protocol over a
 * WebSocket), samples with V8's Profiler for one phase, saves the `.cpuprofile` (open it in
 * Chrome DevTools) and summarizes self time by function and by file.
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

/** One agent's inspector session. */
export class InspectorSession {
  readonly #ws: WebSocket;
  #id = 0;
  readonly #pending = new Map<number, (r: { result?: unknown; error?: unknown }) => void>();

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.onmessage = (e) => {
      const msg = JSON.parse(String(e.data));
      const done = this.#pending.get(msg.id);
      if (done) {
        this.#pending.delete(msg.id);
        done(msg);
      }
    };
  }

  /** Connects to the inspector at `url` (`ws://…`, from the process's stderr). */
  static async connect(url: string): Promise<InspectorSession> {
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = (e) => reject(new Error(`Cannot connect to inspector "${url}": ${e}`));
    });
    return new InspectorSession(ws);
  }

  /** Sends one protocol command and waits for its answer. */
  call(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = ++this.#id;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, (r) => {
        if (r.error) reject(new Error(`${method} failed: ${JSON.stringify(r.error)}`));
        else resolve(r.result);
      });
      this.#ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** Starts sampling every `intervalUs`. */
  async start(intervalUs = 200): Promise<void> {
    await this.call("Profiler.enable");
    await this.call("Profiler.setSamplingInterval", { interval: intervalUs });
    await this.call("Profiler.start");
  }

  /** Stops sampling and returns the profile. */
  async stop(): Promise<CpuProfile> {
    const r = await this.call("Profiler.stop") as { profile: CpuProfile };
    return r.profile;
  }

  close(): void {
    this.#ws.close();
  }
}

/** Reads the inspector URL a process printed on stderr, then keeps draining it. */
export async function inspectorUrl(stderr: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stderr.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  for (let i = 0; i < 1000; i++) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
    const m = /ws:\/\/[^\s]+/.exec(text);
    if (m) {
      void (async () => {
        for (let j = 0; j < 1e9; j++) if ((await reader.read()).done) return;
      })();
      return m[0];
    }
  }
  throw new Error(`No inspector URL on stderr: ${text.slice(0, 300)}`);
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
