/**
 * IPv6 flow sharing against a real redis-server: agents with in-memory flow tables following an
 * IPv6 LB IP (and an IPv4 one) share, restore, purge and expire IPv6 flows through one Redis; the
 * stored forms are checked with redis-cli. Run: `deno test -P=redis tests/redis/`.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { flush } from "../../node/lb/flows/_testing.ts";
import { purgeBackendFlows } from "../../node/lb/flows/purge.ts";
import { captureLogs } from "../../lib/log.ts";
import { startRedis } from "../../lab/redis_server.ts";
import {
  datapathLearns,
  event,
  event6,
  node,
  type NodeOptions,
  until,
  VIP,
} from "./_flow_nodes.ts";
import { flowField } from "../../node/lb/flows/field.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

const VIP6 = "2001:db8:100::1";

/** `[VIP6]:80` and `VIP:80`, both served by 2001:db8:2::1–9 and 10.0.1.1–9. */
const DUAL: NodeOptions = {
  vips: [VIP, VIP6],
  services: {
    services: [{
      name: "default/dual",
      frontends: [{ address: `[${VIP6}]:80/TCP` }, { address: `${VIP}:80/TCP` }],
      backends: Array.from({ length: 9 }, (_, i) => [
        { address: `[2001:db8:2::${i + 1}]:8080/TCP` },
        { address: `10.0.1.${i + 1}:8080/TCP` },
      ]).flat(),
    }],
  },
};

Deno.test("redis: IPv6 flows are shared and restored; stored as 42-digit fields, 32-digit backends", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  await using a = await node("lb-a", redis, DUAL);
  await using b = await node("lb-b", redis, DUAL);
  const evs = Array.from(
    { length: 300 },
    (_, i) =>
      event6(
        `2001:db8::${(i + 1).toString(16)}`,
        40000,
        i % 2 ? "2001:db8:2::3" : "10.0.1.3",
        VIP6,
      ),
  );
  const v4 = event(0x0a010001, 40000, "10.0.1.3");
  for (const ev of evs) datapathLearns(a, ev);
  datapathLearns(a, v4);
  await until("B has all", () => b.table.size === 301);
  for (const ev of evs) deepStrictEqual(b.table.get(ev.key)?.backend, ev.backend, "backend");
  const stored = await redis.cli("HGET", `hf:{${VIP6}}:flows`, flowField(evs[1]!.key));
  ok(/^20010db8000200000000000000000003:\d+$/.test(stored.trim()), `v6 backend: ${stored}`);
  const to4 = await redis.cli("HGET", `hf:{${VIP6}}:flows`, flowField(evs[0]!.key));
  ok(/^0a000103:\d+$/.test(to4.trim()), `IPv4 backend of an IPv6 frontend: ${to4}`);
  deepStrictEqual(flowField(evs[0]!.key).length, 42, "field length");
  await flush(a.agent);
  await using c = await node("lb-c", redis, { ...DUAL, start: false });
  await c.agent.start();
  deepStrictEqual(c.table.size, 301, "complete at ready, both families");
});

Deno.test("redis: purging an IPv6 frontend's backend (either family) keeps the IPv4 frontend's flows", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  await using a = await node("lb-a", redis, DUAL);
  await using b = await node("lb-b", redis, DUAL);
  for (let i = 0; i < 40; i++) {
    const backend = ["2001:db8:2::2", "2001:db8:2::3", "10.0.1.2", "10.0.1.3"][i % 4]!;
    datapathLearns(a, event6(`2001:db8::${i + 1}`, 1, backend, VIP6));
  }
  const v4 = event(0x0a010001, 1, "10.0.1.2");
  datapathLearns(a, v4);
  await until("B has all", () => b.table.size === 41);
  deepStrictEqual(
    await purgeBackendFlows(`[${VIP6}]:80/TCP`, "2001:db8:2::2", { store: a.store }),
    10,
  );
  deepStrictEqual(await purgeBackendFlows(`[${VIP6}]:80/TCP`, "10.0.1.2", { store: a.store }), 10);
  await until("both maps purged", () => a.table.size === 21 && b.table.size === 21);
  deepStrictEqual(b.table.get(v4.key)?.backend, parseIpv4("10.0.1.2"), "IPv4 frontend's flow kept");
  for (const e of b.table.entries()) {
    ok(e.value.backend !== "2001:db8:2::2", "no flow to the purged IPv6 backend");
  }
});

Deno.test("redis: idle IPv6 flows expire in Redis and in both maps; active ones stay", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  // The limits far apart (as in flows_test.ts): a packet every 50 ms, activity reported every
  // 700 ms, idle 3 s; only a ~2 s stall between packets could expire the live flow.
  const opts = { ...DUAL, idleTimeoutMs: 3_000, sweepIntervalMs: 100 };
  await using a = await node("lb-a", redis, opts);
  await using b = await node("lb-b", redis, opts);
  const idle = event6("2001:db8::1", 1, "2001:db8:2::3", VIP6);
  const live = event6("2001:db8::2", 2, "2001:db8:2::3", VIP6);
  datapathLearns(a, idle);
  datapathLearns(a, live);
  await until("B has both", () => b.table.size === 2);
  // Traffic on the live flow only, until the idle one is gone everywhere.
  await until("idle gone", () => {
    a.table.touch(live.key);
    return a.table.size === 1 && b.table.size === 1;
  }, 30_000);
  ok(a.table.get(live.key) && b.table.get(live.key), "live stays");
  const [stored] = await a.store.exists(VIP6, [flowField(idle.key)]);
  deepStrictEqual(stored, false, "idle gone from Redis");
});
