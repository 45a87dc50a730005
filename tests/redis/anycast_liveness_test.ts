/**
 * The anycast liveness records (node/anycast/liveness.ts) on a real redis-server: a record lapses
 * with its TTL, exactly one watcher claims a lapse, a deregistered owner's lapse is claimed by
 * nobody, and a watcher sees another agent's death and purges once.
 * Run: `deno test -P=redis tests/redis/anycast_liveness_test.ts`.
 */
import { ok } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { OwnerLiveness, RedisLivenessStore } from "../../node/anycast/liveness.ts";

/** Polls `ok` every 50 ms, at most `timeoutMs` (bounded in count too). */
async function until(what: string, ok: () => Promise<boolean> | boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; i < 1_000 && Date.now() < deadline; i++) {
    if (await ok()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
}

Deno.test("anycast liveness on redis: TTL lapse, one claim per registration, deregistration", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  const a = new RedisLivenessStore({ url: redis.url });
  const b = new RedisLivenessStore({ url: redis.url });
  try {
    await a.refresh("10.9.1.2", "n1", 1_000);
    ok((await b.alive(["10.9.1.2", "10.9.2.2"])).join() === "true,false", "n1 alive only");
    await until("n1's record to lapse", async () => !(await b.alive(["10.9.1.2"]))[0]);
    const claims = await Promise.all([a.claim("10.9.1.2"), b.claim("10.9.1.2")]);
    ok(claims.filter((c) => c).length === 1, `one claim wins: ${claims}`);
    await a.refresh("10.9.1.2", "n1", 60_000);
    await a.deregister("10.9.1.2");
    ok(!(await b.claim("10.9.1.2")), "a deregistered owner's lapse is claimed by nobody");
  } finally {
    await a.close();
    await b.close();
  }
});

Deno.test("anycast liveness on redis: a watcher purges once for an agent that stopped refreshing", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  const owners = ["10.9.1.2", "10.9.2.2", "10.9.3.2"];
  const purged: string[][] = [[], [], []];
  const agents = owners.map((self, i) =>
    new OwnerLiveness({
      self,
      node: `n${i + 1}`,
      owners,
      store: new RedisLivenessStore({ url: redis.url }),
      intervalMs: 100,
      ttlMs: 2_000, // far above a refresh interval, so a loaded machine lapses no live agent
      onLapse: (owner) => {
        purged[i]!.push(owner);
        return Promise.resolve();
      },
    })
  );
  try {
    for (const agent of agents) agent.start();
    await until("every agent to see the others", () => agents.every((a) => a.seen.size === 2));
    // n3 dies: no more refreshes, no deregistration.
    await agents[2]!.stop();
    await until("a survivor to purge n3", () => purged[0]!.length + purged[1]!.length > 0);
    // The other survivor has seen the lapse too by now (bounded), and claimed nothing.
    await until(
      "both survivors to drop n3",
      () => agents.slice(0, 2).every((a) => a.seen.size === 1),
    );
    ok(
      [...purged[0]!, ...purged[1]!].join() === "10.9.3.2",
      `n3 purged exactly once: ${JSON.stringify(purged)}`,
    );
  } finally {
    for (const agent of agents) await agent.stop();
  }
});
