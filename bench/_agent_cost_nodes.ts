/**
 * The LB nodes of `bench/agent_cost.ts`: each the real agent in a process of its own
 * (`_agent_cost_node.ts`) with its own pinned maps, its stdout read line by line (its CPU, its
 * profile, its warnings), stopped and unpinned at the end.
 *
 * @module
 */

import { BpfMap, Datapath } from "../node/bpf/mod.ts";
import type { CpuProfile } from "./_agent_cost_profile.ts";
import { type Family, PORT, VIP, VIP6 } from "./_agent_cost_gen.ts";

const MAIN = new URL("./_agent_cost_node.ts", import.meta.url).pathname;

/** One LB node's agent process. */
export class Node {
  lines = 0;
  #buffer = "";
  #shown = 0;
  /** User-mode part of the last {@link cpuUs} reading. */
  userUs = 0;
  #waiters: { pred: (l: string) => boolean; resolve: (l: string) => void }[] = [];
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;
  readonly #pump: Promise<void>;

  constructor(readonly name: string, readonly pinDir: string, readonly child: Deno.ChildProcess) {
    this.#stdin = child.stdin.getWriter();
    this.#pump = this.#read();
  }

  async #read(): Promise<void> {
    for await (const chunk of this.child.stdout.pipeThrough(new TextDecoderStream())) {
      this.#buffer += chunk;
      for (let nl = this.#buffer.indexOf("\n"); nl >= 0; nl = this.#buffer.indexOf("\n")) {
        const line = this.#buffer.slice(0, nl);
        this.#buffer = this.#buffer.slice(nl + 1);
        this.lines++;
        // What an operator would look at: warnings, errors, state changes (bounded).
        if (this.#shown < 50 && /"level":"(warn|error)"|"flow agent state"/.test(line)) {
          this.#shown++;
          console.error(`${this.name}: ${line.slice(0, 400)}`);
        }
        for (const w of [...this.#waiters]) {
          if (!w.pred(line)) continue;
          this.#waiters.splice(this.#waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  }

  /** The next stdout line matching `pred` (within `timeoutMs`). */
  waitLine(pred: (l: string) => boolean, timeoutMs: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.name}: no matching line within ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.#waiters.push({ pred, resolve: (l) => (clearTimeout(timer), resolve(l)) });
    });
  }

  async #send(line: string): Promise<void> {
    await this.#stdin.write(new TextEncoder().encode(line + "\n"));
  }

  /** CPU µs (user + system, whole process) since it started. */
  async cpuUs(): Promise<number> {
    const reply = this.waitLine((l) => l.startsWith('{"bench_cpu_us"'), 5000);
    await this.#send("cpu");
    const r = JSON.parse(await reply);
    this.userUs = r.user_us;
    return r.bench_cpu_us;
  }

  /** Starts sampling this agent's CPU (V8 profiler). */
  profileStart(): Promise<void> {
    return this.#send("profile-start");
  }

  /** Stops sampling; returns the profile (also written to `path`). */
  async profileStop(path: string): Promise<CpuProfile> {
    const done = this.waitLine((l) => l.startsWith('{"bench_profile"'), 30_000);
    await this.#send(`profile-stop ${path}`);
    await done;
    return JSON.parse(await Deno.readTextFile(path));
  }

  /** Flows in this node's maps, both families. */
  flowCount(): number {
    let n = 0;
    for (const name of ["hf_flows", "hf_flows6"]) {
      using map = BpfMap.fromPinned(`${this.pinDir}/${name}`);
      n += map.lookupBatch().count;
    }
    return n;
  }

  async stop(): Promise<void> {
    await this.#send("stop").catch(() => {});
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 10_000);
    await this.child.status;
    clearTimeout(timer);
    await this.#pump.catch(() => {});
    try {
      Datapath.unpin(this.pinDir);
    } catch (err) {
      console.error(`${this.name}: cannot unpin "${this.pinDir}": ${err}`);
    }
  }
}

export async function startNodes(
  mode: string,
  dir: string,
  options: {
    redisUrl: string;
    count: number;
    quick: boolean;
    learnWindowMs?: number;
    /** The frontend's family (IPv6: an IPv6 LB IP over the same IPv4 backends). */
    family?: Family;
  },
): Promise<Node[]> {
  const redisUrl = options.redisUrl;
  const config = `${dir}/services.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      services: [{
        name: "bench/web",
        flowKeyMode: "five-tuple",
        frontends: [{
          address: options.family === 6 ? `[${VIP6}]:${PORT}/TCP` : `${VIP}:${PORT}/TCP`,
        }],
        backends: Array.from({ length: 10 }, (_, i) => ({ address: `10.2.0.${i + 1}:80/TCP` })),
      }],
    }),
  );
  const nodes = Array.from({ length: options.count }, (_, i) => {
    const name = `cost-${mode}-${i}`;
    const pinDir = `/sys/fs/bpf/hf-bench-cost-${Deno.pid}-${mode}-${i}`;
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-P=agent",
        "--quiet",
        MAIN,
        ...["--node-name", name, "--config", config, "--redis", redisUrl],
        ...["--pin-dir", pinDir, "--src-addr", `10.1.1.${i + 2}`, "--listen", "none"],
        ...["--max-flows", String(1 << 20), "--health", "off"],
        // A small Maglev table: its build stays within the policy's time budget on a busy machine.
        ...["--maglev-size", "16381"],
        // A sweep every 5 s (default: idle timeout / 4, at most 30 s): each phase pays for some.
        ...["--sweep-interval-ms", options.quick ? "500" : "5000"],
        ...(mode === "baseline" ? ["--no-flow-sync"] : []),
        ...(options.learnWindowMs === undefined
          ? []
          : ["--learn-window-ms", String(options.learnWindowMs)]),
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    return new Node(name, pinDir, child);
  });
  try {
    await Promise.all(nodes.map((n) => n.waitLine((l) => l.includes('"msg":"ready"'), 60_000)));
  } catch (err) {
    for (const n of nodes) await n.stop();
    throw err;
  }
  return nodes;
}
