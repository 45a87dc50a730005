/**
 * Cleaning up after anycast labs whose process died: their temp directories and the bird
 * daemons they started (orphans in deleted namespaces, which a namespace sweep cannot see).
 *
 * @module
 */

import { processAlive, run } from "./command.ts";

/** Temp directories of anycast labs are `/tmp/hf-anycast-<pid>-…`. */
export const ANYCAST_DIR_PREFIX = "hf-anycast-";

/**
 * Kills the bird whose pid is in `pidFile` if that pid still runs a bird whose command line
 * names `dir` (a reused pid is left alone). Returns whether one was killed.
 */
export async function killBird(pidFile: string, dir: string): Promise<boolean> {
  const pid = (await Deno.readTextFile(pidFile).catch(() => "")).trim();
  if (!/^\d+$/.test(pid)) return false;
  const { stdout } = await run(["ps", "-o", "args=", "-p", pid], { check: false });
  if (!stdout.includes("bird") || !stdout.includes(dir)) return false;
  await run(["kill", "-KILL", pid], { check: false });
  return true;
}

/** Kills the bird daemons whose pid files are in `dir`, if that pid still runs a bird of `dir`. */
async function killBirdsOf(dir: string): Promise<void> {
  const pidFiles = [`${dir}/router.pid`];
  for (const e of Deno.readDirSync(dir)) {
    if (e.name.endsWith(".bird")) pidFiles.push(`${dir}/${e.name}/bird.pid`);
  }
  for (const file of pidFiles) await killBird(file, dir);
}

/**
 * Removes `/tmp/hf-anycast-<pid>-*` directories of processes that are gone, after killing the
 * bird daemons they left (orphans in deleted namespaces that a namespace sweep cannot see).
 */
export async function sweepStaleAnycastDirs(): Promise<string[]> {
  const removed: string[] = [];
  const tmp = Deno.env.get("TMPDIR") ?? "/tmp";
  for (const entry of Deno.readDirSync(tmp)) {
    const m = new RegExp(`^${ANYCAST_DIR_PREFIX}(\\d+)-`).exec(entry.name);
    if (!m || await processAlive(Number(m[1]))) continue;
    await killBirdsOf(`${tmp}/${entry.name}`);
    await unmountUnder(`${tmp}/${entry.name}`); // flow redirection's bpffs mounts
    await Deno.remove(`${tmp}/${entry.name}`, { recursive: true }).catch(() => {});
    removed.push(entry.name);
  }
  return removed;
}

/** Unmounts every mount below `dir` (LB nodes' and anycast nodes' bpffs), deepest first. */
export async function unmountUnder(dir: string): Promise<void> {
  const { stdout } = await run(["findmnt", "-rn", "-o", "TARGET"], { check: false });
  const targets = stdout.split("\n").filter((t) => t.startsWith(`${dir}/`)).sort().reverse();
  for (const t of targets) await run(["umount", t], { check: false });
}
