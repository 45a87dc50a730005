/**
 * Runs last in `scripts/test.sh`: proves the suite cleaned up after itself — no `hf-` network
 * namespace and no harness redis-server left by a test process that has finished. In CI, also none
 * held by a process of this run that still lives (a leaked child keeps `HF_TEST_RUN`, which
 * `scripts/test.sh` exports): processes of another run on the same machine (a developer's tests
 * beside a CI rehearsal) are not this run's leftovers. Run outside `scripts/test.sh` in CI, every
 * live owner counts.
 */
import { inCI, rootTest } from "../harness/mod.ts";
import { labRedisPids, listHfNamespaces, processAlive, run } from "../../lab/mod.ts";

const RUN = Deno.env.get("HF_TEST_RUN");

/** Whether live process `pid` belongs to this test run (in CI; elsewhere none does). */
async function ofThisRun(pid: number): Promise<boolean> {
  if (!inCI()) return false;
  if (!RUN) return true;
  const { code, stdout } = await run(["ps", "eww", "-o", "args=", "-p", String(pid)], {
    check: false,
  });
  return code !== 0 || stdout.split(/\s+/).includes(`HF_TEST_RUN=${RUN}`);
}

rootTest("hygiene: no hf- namespace left behind by finished test processes", async () => {
  const leftovers: string[] = [];
  for (const name of await listHfNamespaces()) {
    const m = /^hf-(\d+)-/.exec(name);
    const pid = Number(m?.[1]);
    if (!m || !(await processAlive(pid)) || await ofThisRun(pid)) leftovers.push(name);
  }
  if (leftovers.length) throw new Error(`namespaces left behind: ${leftovers.join(", ")}`);
});

Deno.test("hygiene: no redis-server started by tests still runs", async () => {
  const stale = await labRedisPids({ staleOnly: true });
  const live = await labRedisPids({ owner: ofThisRun });
  const pids = [...new Set([...stale, ...live])];
  if (pids.length) throw new Error(`lab redis-servers still running: ${pids.join(", ")}`);
});
