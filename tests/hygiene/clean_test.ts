/**
 * Runs last in `scripts/test.sh`: proves the suite cleaned up after itself — no `hf-` network
 * namespace and no harness redis-server left by a test process that has finished. In CI, where
 * nothing else runs, no `hf-` namespace may exist at all.
 */
import { inCI, rootTest } from "../harness/mod.ts";
import { labRedisPids, listHfNamespaces, processAlive } from "../../lab/mod.ts";

rootTest("hygiene: no hf- namespace left behind by finished test processes", async () => {
  const leftovers: string[] = [];
  for (const name of await listHfNamespaces()) {
    const m = /^hf-(\d+)-/.exec(name);
    if (inCI() || !m || !(await processAlive(Number(m[1])))) leftovers.push(name);
  }
  if (leftovers.length) throw new Error(`namespaces left behind: ${leftovers.join(", ")}`);
});

Deno.test("hygiene: no redis-server started by tests still runs", async () => {
  const pids = await labRedisPids({ staleOnly: !inCI() });
  if (pids.length) throw new Error(`lab redis-servers still running: ${pids.join(", ")}`);
});
