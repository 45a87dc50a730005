/**
 * Removes what crashed earlier lab runs (tests, demo, chaos, benches) left behind: `hf-`
 * namespaces, redis-servers and cluster directories whose creating process is gone. Run at the
 * start of `scripts/test.sh`, or as `deno task sweep`.
 *
 * @module
 */
import { processAlive } from "./command.ts";
import { sweepStaleNamespaces } from "./netns.ts";
import { sweepStaleRedis } from "./redis_server.ts";
import { unmountUnder } from "./cluster.ts";
import { sweepStaleAnycastDirs } from "./anycast.ts";
import { readCommandLineOrExit } from "../lib/args.ts";

/** Removes `/tmp/hf-cluster-<pid>-*` dirs (and their bpffs mounts) of dead processes. */
async function sweepStaleClusters(): Promise<string[]> {
  const removed: string[] = [];
  const tmp = Deno.env.get("TMPDIR") ?? "/tmp";
  for (const entry of Deno.readDirSync(tmp)) {
    const m = /^hf-cluster-(\d+)-/.exec(entry.name);
    if (!m || await processAlive(Number(m[1]))) continue;
    await unmountUnder(`${tmp}/${entry.name}`);
    await Deno.remove(`${tmp}/${entry.name}`, { recursive: true }).catch(() => {});
    removed.push(entry.name);
  }
  return removed;
}

if (import.meta.main) {
  readCommandLineOrExit(Deno.args, {
    command: "sweep",
    usage: `usage: deno task sweep   (as root for namespaces and cluster directories)
  Removes what crashed lab runs left behind: hf- namespaces, redis-servers and cluster
  directories whose creating process is gone.`,
    options: {},
  }, () => undefined);
  const namespaces = Deno.uid() === 0 ? await sweepStaleNamespaces() : [];
  const redis = await sweepStaleRedis();
  const clusters = Deno.uid() === 0 ? await sweepStaleClusters() : [];
  // bird daemons of dead anycast labs die with their namespaces above; their dirs go here.
  const anycast = await sweepStaleAnycastDirs();
  console.log(
    JSON.stringify({
      level: "info",
      msg: "swept stale lab resources",
      namespaces,
      redis_pids: redis,
      clusters,
      anycast,
    }),
  );
}
