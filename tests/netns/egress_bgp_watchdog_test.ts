/**
 * The bird watchdog of a NAT pod in BGP mode (node/egress/_bgp_watchdog.ts): a real `bash`
 * watching a stand-in `sleep` process for bird. A deadline that passes kills it, a renewed one
 * does not, `exit` leaves it, and the end of the agent's pipe (the agent died) kills it.
 */
import { ok as assert } from "node:assert/strict";
import { log } from "../../lib/log.ts";
import { BirdWatchdog, WATCHDOG_SCRIPT } from "../../node/egress/_bgp_watchdog.ts";

async function gone(child: Deno.ChildProcess, timeoutMs: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const r = await Promise.race([
    child.status.then(() => true),
    new Promise<boolean>((res) => timer = setTimeout(() => res(false), timeoutMs)),
  ]);
  clearTimeout(timer);
  return r;
}

function standIn(): Deno.ChildProcess {
  return new Deno.Command("bash", {
    args: ["-c", "exec sleep 300"],
    stdout: "null",
    stderr: "null",
  }).spawn();
}

Deno.test("bird watchdog: a passed deadline kills bird; a fed one does not; exit leaves it", async () => {
  const bird = standIn();
  const dog = BirdWatchdog.start(bird.pid, log);
  try {
    // Fed with a deadline 3 s ahead every 50 ms for 600 ms: still alive.
    for (let i = 0; i < 12; i++) {
      dog.feed(performance.now() + 3_000);
      await new Promise((r) => setTimeout(r, 50));
    }
    assert(!(await gone(bird, 10)), "bird was killed while its deadline was being renewed");
    // Feeding stops (the agent is stopped): killed once the deadline passes.
    dog.feed(performance.now() + 100);
    assert(await gone(bird, 10_000), "bird outlived its deadline");
  } finally {
    try {
      bird.kill("SIGKILL");
    } catch { /* gone */ }
    await bird.status;
    await dog.stop();
  }
  const spared = standIn();
  const dog2 = BirdWatchdog.start(spared.pid, log);
  dog2.feed(performance.now() + 50);
  await dog2.stop();
  assert(!(await gone(spared, 300)), "exit killed bird");
  spared.kill("SIGKILL");
  await spared.status;
});

Deno.test("bird watchdog: the end of the agent's pipe (the agent died) kills bird", async () => {
  const bird = standIn();
  // Its input is already at its end, as when the agent that held the pipe is gone.
  const agent = new Deno.Command("bash", {
    args: ["-c", WATCHDOG_SCRIPT, "hf-bird-watchdog", String(bird.pid)],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    assert(await gone(bird, 10_000), "bird outlived its agent");
  } finally {
    try {
      bird.kill("SIGKILL");
    } catch { /* gone */ }
    await bird.status;
    await agent.status;
  }
});
