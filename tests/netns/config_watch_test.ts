/**
 * The agent's services-file watch (node/lb/_config_watch.ts) as an operator relies on it: a file
 * rewritten in place or replaced by a rename (editors, a Kubernetes ConfigMap volume) is seen
 * within a fraction of a second although the slow safety poll is seconds away, and nothing is
 * checked once the watch stopped. Needs /tmp (the netns permission set), not root.
 */
import { ok, strictEqual } from "node:assert/strict";
import { watchConfigFile } from "../../node/lb/_config_watch.ts";
import { log } from "../../lib/log.ts";

/**
 * Waits for `pred`, at most `timeoutMs`. The watch sees a change in milliseconds and the safety
 * poll is an hour away: 10 s is orders of magnitude from both, so load does not flip the verdict.
 */
async function until(pred: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (let i = 0; i < 10_000 && !pred(); i++) {
    if (performance.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  if (!pred()) throw new Error(`Timed out after ${timeoutMs} ms: ${what}`);
}

Deno.test("config watch: in-place writes and renames over the file are seen at once", async () => {
  const dir = await Deno.makeTempDir({ prefix: "hf-config-watch-" });
  const path = `${dir}/services.json`;
  await Deno.writeTextFile(path, "{}");
  let checks = 0;
  let contents = "";
  const stop = watchConfigFile(path, async () => {
    checks++;
    contents = await Deno.readTextFile(path);
  }, { pollMs: 3_600_000, log });
  try {
    await Deno.writeTextFile(path, '{"v":1}');
    await until(() => contents === '{"v":1}', "an in-place write seen");

    await Deno.writeTextFile(`${dir}/.tmp`, '{"v":2}');
    await Deno.rename(`${dir}/.tmp`, path);
    await until(() => contents === '{"v":2}', "a rename over the file seen");
  } finally {
    stop();
  }
  const after = checks;
  await Deno.writeTextFile(path, '{"v":3}');
  await new Promise((r) => setTimeout(r, 200));
  strictEqual(checks, after, "checked after stop");
  ok(after <= 6, `${after} checks for two changes`);
  await Deno.remove(dir, { recursive: true });
});
