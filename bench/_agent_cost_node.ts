/**
 * One LB node of `bench/agent_cost.ts`: the real agent (`node/agent.ts` `main`, the code
 * `main.ts agent` runs) in a process of its own, which also answers the bench on stdin:
 * `cpu` → one stdout line `{"bench_cpu_us": N}` (user + system CPU of the whole process, every
 * thread, since it started: `getrusage`), `stop` → the agent stops and the process exits.
 * Everything else on stdout is the agent's own log.
 *
 * @module
 */

import process from "node:process";
import { main } from "../node/agent.ts";

const stop = new AbortController();
const exit = main(Deno.args, { signal: stop.signal });

async function commands(): Promise<void> {
  let buffer = "";
  for await (const chunk of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
    buffer += chunk;
    for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (line === "cpu") {
        const u = process.cpuUsage();
        console.log(JSON.stringify({ bench_cpu_us: u.user + u.system }));
      } else if (line === "stop") {
        stop.abort();
        return;
      }
    }
  }
  stop.abort(); // the bench went away
}

void commands();
Deno.exit(await exit);
