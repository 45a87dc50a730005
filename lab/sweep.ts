/**
 * Removes what crashed earlier lab runs (tests, demo, chaos, benches) left behind: `hf-`
 * namespaces, redis-servers, cluster directories, pinned maps and bpffs mounts whose creating
 * process is gone. Run at the
 * start of `scripts/test.sh`, or as `deno task sweep`.
 *
 * @module
 */
import { processAlive, run } from "./command.ts";
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

/** The creating process of an `hf-…` name: its first all-digit part (`hf-bench-cost-26463-x`). */
function ownerPid(name: string): number | null {
  const part = name.split("-").slice(1).find((p) => /^\d+$/.test(p));
  return part === undefined ? null : Number(part);
}

/**
 * Removes pinned-map directories `/sys/fs/bpf/hf-…-<pid>…` and bpffs mounts under
 * `$TMPDIR/hf-<pid>-…` (then the directory) of dead processes: a lab process killed before its
 * cleanup ran leaves them (a rehearsal stopped halfway did).
 */
async function sweepStalePins(): Promise<string[]> {
  const removed: string[] = [];
  const dead = async (name: string) => {
    const pid = ownerPid(name);
    return pid !== null && pid > 1 && !(await processAlive(pid));
  };
  // Through ls and rm: Deno asks for every permission to read or write under /sys.
  const listed = await run(["bash", "-c", "ls -1 /sys/fs/bpf"], { check: false });
  for (const name of listed.stdout.split("\n")) {
    if (!name.startsWith("hf-") || !(await dead(name))) continue;
    const path = `/sys/fs/bpf/${name}`;
    await run(["bash", "-c", 'rm -rf -- "$1"', "bash", path], { check: false });
    removed.push(path);
  }
  const tmp = Deno.env.get("TMPDIR") ?? "/tmp";
  for (const entry of Deno.readDirSync(tmp)) {
    if (!/^hf-\d+-/.test(entry.name) || !(await dead(entry.name))) continue;
    await unmountUnder(`${tmp}/${entry.name}`);
    await Deno.remove(`${tmp}/${entry.name}`, { recursive: true }).catch(() => {});
    removed.push(`${tmp}/${entry.name}`);
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
  const leftovers = Deno.uid() === 0 ? await sweepStalePins() : [];
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
      leftovers,
    }),
  );
}
