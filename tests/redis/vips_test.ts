/**
 * LB IPs followed live (`FlowSyncAgent.setVips`) against a real redis-server: two agents with
 * in-memory flow tables share one Redis. Run: `deno test -P=redis tests/redis/vips_test.ts`.
 */
import { ok } from "node:assert/strict";
import { flush } from "../../node/lb/flows/_testing.ts";
import { captureLogs } from "../../lib/log.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { datapathLearns, event, node, until, VIP, VIP2 } from "./_flow_nodes.ts";
import { flowField } from "../../node/lb/flows/field.ts";

Deno.test("redis: an LB IP added to two running agents is restored and shared, removal stops it", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  await using a = await node("lb-a", redis, { vips: [VIP] });
  await using b = await node("lb-b", redis, { vips: [VIP] });
  // Another LB node already serves VIP2 and stored a flow.
  await using c = await node("lb-c", redis, { vips: [VIP2] });
  const stored = event("10.1.0.1", 1000, "10.0.2.1", VIP2);
  datapathLearns(c, stored);
  await flush(c.agent);

  // Config reload on both: VIP2 added while running (and while B's XREAD is blocked).
  await Promise.all([a.agent.setVips([VIP, VIP2]), b.agent.setVips([VIP, VIP2])]);
  for (const n of [a, b]) {
    ok(n.table.get(stored.key)?.backend === stored.backend, "restored on setVips");
  }
  ok(
    logs.records.filter((r) => r.msg === "following LB IP" && r.vip === VIP2).length === 2,
    "following logged by both",
  );

  // A flow learned by A on the new LB IP appears in B (and in C).
  const evs = Array.from({ length: 50 }, (_, i) => event(`10.1.1.${i}`, 2000, "10.0.2.2", VIP2));
  for (const ev of evs) datapathLearns(a, ev);
  await until("B has A's VIP2 flows", () => evs.every((ev) => b.table.get(ev.key) !== undefined));
  await until("C has them", () => evs.every((ev) => c.table.get(ev.key) !== undefined));
  ok(b.table.get(evs[0]!.key)?.flags === 1, "installed from peer");
  const inRedis = await b.store.exists(VIP2, evs.map((ev) => flowField(ev.key)));
  ok(inRedis.every(Boolean), "stored in Redis");

  // Removed from B: C's new flows no longer reach B's map; A still follows.
  await b.agent.setVips([VIP]);
  ok(logs.records.some((r) => r.msg === "stopped following LB IP" && r.node === "lb-b"), "log");
  const after = event("10.1.2.1", 3000, "10.0.2.3", VIP2);
  datapathLearns(c, after);
  await until("A installs it", () => a.table.get(after.key) !== undefined);
  const onVip = event("10.1.3.1", 4000, "10.0.1.1", VIP);
  datapathLearns(a, onVip);
  await until("B still follows VIP", () => b.table.get(onVip.key) !== undefined);
  ok(b.table.get(after.key) === undefined, "B no longer follows VIP2");
  ok(b.table.get(evs[0]!.key) !== undefined, "B keeps VIP2 entries until they idle out");
});
