/**
 * One LB node of `bench/agent_cost.ts`: the real agent (`node/lb/main.ts` `main`, the code
 * `main.ts agent` runs) in a process of its own, which also answers the bench on stdin:
 * `cpu` → one stdout line `{"bench_cpu_us": N}` (user + system CPU of the whole process, every
 * thread, since it started: `getrusage`), `stop` → the agent stops and the process exits.
 * Everything else on stdout is the agent's own log.
 *
 * @module
 */

import process from "node:process";
import { Session } from "node:inspector";
import { main } from "../node/lb/main.ts";

const stop = new AbortController();
const exit = main(Deno.args, { signal: stop.signal });

let session: Session | null = null;
function post(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
  session ??= new Session();
  if (method === "Profiler.enable") session.connect();
  return new Promise((resolve, reject) =>
    session!.post(method, params, (err, r) => err ? reject(err) : resolve(r))
  );
}

async function profile(command: string, path: string): Promise<void> {
  if (command === "profile-start") {
    await post("Profiler.enable");
    await post("Profiler.setSamplingInterval", { interval: 200 });
    await post("Profiler.start");
    return;
  }
  const r = await post("Profiler.stop") as { profile: unknown };
  await Deno.writeTextFile(path, JSON.stringify(r.profile));
  session?.disconnect();
  session = null;
  console.log(JSON.stringify({ bench_profile: path }));
}

async function commands(): Promise<void> {
  let buffer = "";
  for await (const chunk of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
    buffer += chunk;
    for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (line === "cpu") {
        const u = process.cpuUsage();
        console.log(JSON.stringify({ bench_cpu_us: u.user + u.system, user_us: u.user }));
      } else if (line.startsWith("profile-")) {
        const [command = "", path = ""] = line.split(" ");
        await profile(command, path);
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
