/**
 * The standby side of the sync benchmark (`bench/_egress_sync.ts`), in its own process as on a
 * real NAT pod: `deno run … bench/_egress_sync_receiver.ts NS` opens conntrack in namespace NS,
 * runs a SyncReceiver on 127.0.0.1, prints `{"port":P}`, answers each `c` on stdin with its CPU time
 * so far, and stops when stdin closes. {@linkcode spawnReceiver} starts it.
 *
 * @module
 */

import { Conntrack } from "../node/conntrack/mod.ts";
import { SyncReceiver } from "../node/egress/sync.ts";
import { setLogLevel } from "../lib/log.ts";
import { cpuUsage } from "node:process";

/**
 * The standby side in its own process (as on a real pod, so the owner's dump and the standby's
 * injection run in parallel): `_egress_sync_receiver.ts NS` prints `{"port":P}` and serves until stdin closes.
 */
export async function spawnReceiver(
  netns: string,
): Promise<{ port: number; cpuUs(): Promise<number> } & AsyncDisposable> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      "--allow-ffi",
      "--allow-read",
      "--allow-env",
      "--allow-sys",
      "--allow-net=127.0.0.1",
      new URL(import.meta.url).pathname,
      netns,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stdin = child.stdin.getWriter();
  let buffered = "";
  const nextLine = async () => {
    const deadline = Date.now() + 30_000;
    while (!buffered.includes("\n") && Date.now() < deadline) {
      const { value, done } = await lines.read();
      if (done) break;
      buffered += value;
    }
    const i = buffered.indexOf("\n");
    const line = i < 0 ? buffered : buffered.slice(0, i);
    buffered = i < 0 ? "" : buffered.slice(i + 1);
    return line;
  };
  const text = await nextLine();
  const port = Number(/"port":(\d+)/.exec(text)?.[1] ?? 0);
  const cpuUs = async () => {
    await stdin.write(new TextEncoder().encode("c"));
    return Number(/"cpu_us":(\d+)/.exec(await nextLine())?.[1] ?? NaN);
  };
  const stop = async () => {
    await stdin.close().catch(() => {});
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await child.status;
    clearTimeout(timer);
    await lines.cancel().catch(() => {});
  };
  if (!port) {
    await stop();
    throw new Error(`Sync bench: the receiver process did not start: ${JSON.stringify(text)}`);
  }
  return { port, cpuUs, [Symbol.asyncDispose]: stop };
}

async function receive(netns: string): Promise<void> {
  const ct = Conntrack.open({ netns });
  const receiver = new SyncReceiver({ ct, listen: { host: "127.0.0.1", port: 0 } });
  await receiver.start();
  console.log(JSON.stringify({ port: receiver.port }));
  // Until the parent closes stdin; each "c" asks for this process's CPU time so far.
  for await (const chunk of Deno.stdin.readable) {
    for (const byte of chunk) {
      if (byte !== 0x63) continue;
      const { user, system } = cpuUsage();
      console.log(JSON.stringify({ cpu_us: user + system }));
    }
  }
  await receiver.stop();
  ct.close();
}

if (import.meta.main) {
  const [netns] = Deno.args;
  if (!netns) {
    console.error("usage: bench/_egress_sync_receiver.ts NETNS (started by bench/_egress_sync.ts)");
    Deno.exit(2);
  }
  setLogLevel("warn");
  await receive(netns);
}
