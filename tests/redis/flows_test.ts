/**
 * Flow sync against a real redis-server: two agents with in-memory flow tables share one Redis.
 * Run: `deno test -P=redis tests/redis/`.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { flush } from "../../node/lb/flows/_testing.ts";
import { connectRedisStore } from "../../node/lb/flows/redis_store.ts";
import { purgeBackendFlows } from "../../node/lb/flows/purge.ts";
import { captureLogs } from "../../lib/log.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { datapathLearns, event, node, until, VIP } from "./_flow_nodes.ts";
import { flowField } from "../../node/lb/flows/field.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

Deno.test("redis: a flow learned by agent A is installed by agent B", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  await using a = await node("lb-a", redis);
  await using b = await node("lb-b", redis);
  const evs = Array.from({ length: 500 }, (_, i) => event(0x0a010000 + i, 40000, "10.0.1.2"));
  for (const ev of evs) datapathLearns(a, ev);
  await until("B has all 500", () => b.table.size === 500);
  for (const ev of evs) deepStrictEqual(b.table.get(ev.key)?.backend, ev.backend, "backend");
  deepStrictEqual(b.table.get(evs[0]!.key)?.flags, 1, "peer flag");
  ok(
    logs.records.some((r) => r.msg === "flow installed from peer" && r.node === "lb-b"),
    "log",
  );
  ok(
    !logs.records.some((r) => r.msg === "flow installed from peer" && r.node === "lb-a"),
    "own",
  );
});

Deno.test("redis: an agent restores every flow of its LB IPs before it is ready", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  await using a = await node("lb-a", redis, { batchSize: 2000 });
  for (let i = 0; i < 20_000; i++) datapathLearns(a, event(0x0b000000 + i, 1234, "10.0.1.3"));
  await flush(a.agent);
  await using b = await node("lb-b", redis, { start: false });
  deepStrictEqual(b.table.size, 0, "empty before start");
  await b.agent.start();
  deepStrictEqual(b.table.size, 20_000, "complete at ready");
  // And a node whose Redis is down at start waits rather than reporting ready empty.
  await redis.stop();
  await using c = await node("lb-c", redis, { start: false });
  let ready = false;
  const started = c.agent.start().then(() => ready = true);
  await new Promise((r) => setTimeout(r, 300));
  ok(!ready, "not ready while Redis is down");
  await redis.start();
  await flush(a.agent);
  await until("c ready", () => ready, 10_000);
  await started;
  // Redis came back empty; A rewrote its flows (it noticed the restart) — C has them.
  await until("c complete", () => c.table.size === 20_000, 10_000);
});

Deno.test("redis: purging a backend removes its flows everywhere and keeps the others", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  await using a = await node("lb-a", redis);
  await using b = await node("lb-b", redis);
  for (let i = 0; i < 100; i++) {
    datapathLearns(a, event(0x0c000000 + i, 1, i % 2 ? "10.0.1.2" : "10.0.1.3"));
  }
  await until("B has all", () => b.table.size === 100);
  const n = await purgeBackendFlows(`${VIP}:80/TCP`, "10.0.1.2", { store: a.store });
  deepStrictEqual(n, 50, "purged count");
  await until("both maps purged", () => a.table.size === 50 && b.table.size === 50);
  for (const e of b.table.entries()) {
    deepStrictEqual(e.value.backend, parseIpv4("10.0.1.3"), "kept");
  }
  ok(logs.records.some((r) => r.msg === "flow purged" && r.node === "lb-b"), "agent log");
});

Deno.test("redis: idle flows expire in Redis and in both maps; active ones stay", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  // Real time against real Redis, with the limits far apart: a packet on the live flow every
  // 50 ms, its activity reported every 700 ms (idle / 4, in sweeps of 100 ms), the idle timeout
  // 3 s. Only a stall of ~2 s between packets could expire the live flow; the unit tests
  // (node/lb/flows/sync_agent_test.ts) step the same rules on an injected clock.
  const opts = { idleTimeoutMs: 3_000, sweepIntervalMs: 100 };
  await using a = await node("lb-a", redis, opts);
  await using b = await node("lb-b", redis, opts);
  const idle = event("10.0.0.1", 1, "10.0.1.2");
  const live = event("10.0.0.2", 2, "10.0.1.2");
  datapathLearns(a, idle);
  datapathLearns(a, live);
  await until("B has both", () => b.table.size === 2);
  // Traffic on the live flow only, until the idle one is gone everywhere.
  await until("idle gone", () => {
    a.table.touch(live.key);
    return a.table.size === 1 && b.table.size === 1;
  }, 30_000);
  ok(a.table.get(live.key) && b.table.get(live.key), "live stays");
  const [stored] = await a.store.exists(VIP, [flowField(idle.key)]);
  deepStrictEqual(stored, false, "idle gone from Redis");
});

Deno.test("redis: restart mid-stream loses nothing; the queue is bounded and overflow counted", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  await using a = await node("lb-a", redis, { queueCapacity: 1000 });
  await using b = await node("lb-b", redis);
  let next = 0;
  const learnSome = (n: number) => {
    for (let i = 0; i < n; i++, next++) datapathLearns(a, event(0x0d000000 + next, 7, "10.0.1.4"));
  };
  learnSome(300);
  await until("B has 300", () => b.table.size === 300);
  await redis.stop();
  // While Redis is down: learning never waits; 2,500 new flows overflow the 1,000-entry queue.
  // Never waits: all 2,500 are accounted for (queued or dropped) before this test yields once, so
  // no Redis call can have been waited on. (How fast learning is: `./hf bench flows`.)
  learnSome(2500);
  deepStrictEqual([a.agent.queued, a.agent.dropped], [1000, 1500], "accounted for before any wait");
  await until("outage noticed", () => !a.agent.storeUp);
  ok(a.agent.queued <= 1000, `queue bounded: ${a.agent.queued}`);
  deepStrictEqual(a.agent.dropped, 1500, "overflow counted");
  ok(a.registry.expose().includes("holdfast_flow_queue_dropped_total 1500"), "metric");
  ok(logs.records.some((r) => r.msg === "flow queue overflow, oldest flows dropped"), "log");
  await redis.start(); // empty: no persistence
  await until("B has every flow", () => b.table.size === 2800, 15_000);
  await until("Redis has every flow", async () =>
    (await a.store.exists(VIP, [
      flowField(event(0x0d000000, 7, "10.0.1.4").key),
      flowField(event(0x0d000000 + 2799, 7, "10.0.1.4").key),
    ])).every(Boolean));
});

Deno.test("redis: an ACL user with least privilege works; wrong password is reported", async () => {
  using logs = captureLogs();
  const rules = [
    "~hf:*",
    "resetchannels",
    "-@all",
    "+@read",
    "+@write",
    "+@scripting",
    "+@connection",
    "-@dangerous",
  ];
  await using redis = await startRedis({
    password: "admin-secret",
    aclUsers: [{ name: "holdfast", password: "flow-secret", rules }],
  });
  const url = `redis://holdfast:flow-secret@127.0.0.1:${redis.port}`;
  await using a = await node("lb-a", redis, { store: { url } });
  await using b = await node("lb-b", redis, {
    store: { url: redis.url, username: "holdfast", password: "flow-secret" },
  });
  datapathLearns(a, event("10.0.0.9", 9, "10.0.1.2"));
  await until("B has it", () => b.table.size === 1);
  await purgeBackendFlows(`${VIP}:80/TCP`, "10.0.1.2", { store: a.store });
  await until("purged", () => b.table.size === 0);
  const bad = connectRedisStore({ url: `redis://holdfast:wrong@127.0.0.1:${redis.port}` });
  try {
    let msg = "";
    await until("auth failure", async () => {
      try {
        await bad.instanceId([VIP]);
      } catch (e) {
        msg = (e as Error).message;
      }
      return msg.includes("authenticate");
    });
    ok(!msg.includes("wrong"), `password redacted: ${msg}`);
  } finally {
    await bad.close();
  }
  ok(logs.records.some((r) => r.msg === "redis authentication failed"), "logged");
});

Deno.test("redis: an ACL user missing a command gets a logged rejection and a backed-off retry", async () => {
  using logs = captureLogs();
  const rules = ["~hf:*", "+@all", "-@dangerous", "-xadd"];
  await using redis = await startRedis({ aclUsers: [{ name: "narrow", password: "pw", rules }] });
  await using a = await node("lb-a", redis, {
    store: { url: `redis://narrow:pw@127.0.0.1:${redis.port}` },
  });
  datapathLearns(a, event("10.0.0.1", 1, "10.0.1.2"));
  await until(
    "rejection logged",
    () =>
      logs.records.some((r) =>
        r.msg === "flow store rejected a request" && /NOPERM|xadd/i.test(String(r.err))
      ),
  );
  await new Promise((r) => setTimeout(r, 1500));
  const rejections = logs.records.filter((r) => r.msg === "flow store rejected a request").length;
  ok(rejections <= 6, `retries back off: ${rejections} rejections in ~1.5 s`);
  // Between retries the flow is back in the queue (during one it is in the write in flight).
  await until("the flow waits in the queue, not lost", () => a.agent.queued === 1, 10_000);
  deepStrictEqual(a.agent.dropped, 0, "nothing dropped");
});

Deno.test("redis: after Redis restarted empty, the agent's store reports the reconnect and the agent writes its flows back", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  // Sweeps far apart: only a failed call or the reconnect can reveal the restart.
  await using a = await node("lb-a", redis, { sweepIntervalMs: 600_000 });
  let reconnects = 0;
  const unsubscribe = a.store.onReconnect(() => reconnects++);
  const evs = Array.from({ length: 50 }, (_, i) => event(0x0e000000 + i, 1, "10.0.1.2"));
  for (const ev of evs) datapathLearns(a, ev);
  await flush(a.agent);
  await redis.restart(); // empty: no persistence
  await until("the store reported the reconnect", () => reconnects > 0, 10_000);
  unsubscribe();
  await until(
    "Redis has every flow again",
    async () =>
      (await a.store.exists(VIP, evs.map((e) => flowField(e.key))).catch(() => [false]))
        .every(Boolean),
    10_000,
  );
  ok(
    logs.records.some((r) => r.msg === "flow store restarted empty, rewriting local flows"),
    "rewrite logged",
  );
});
