/**
 * One busy LB IP over several Redis Cluster masters (issue 28): with `--flow-buckets 16` its flows
 * spread over 16 hash tags (`node/lb/flows/buckets.ts`). Against a real cluster (three masters with
 * a replica each): a peer follows every bucket's stream, a joining node restores every bucket, a
 * purge reaches every bucket, idle flows expire in every bucket, and every master holds a share.
 * Run: `deno test -P=redis tests/redis/flow_buckets_test.ts`.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { startRedisCluster } from "../../lab/redis_cluster.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { vipKeys } from "../../node/lb/flows/schema.ts";
import { bucketTags } from "../../node/lb/flows/buckets.ts";
import { purgeBackendFlows } from "../../node/lb/flows/purge.ts";
import { flush } from "../../node/lb/flows/_testing.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { datapathLearns, event, node, until, VIP } from "./_flow_nodes.ts";

const store = { buckets: 16 };

Deno.test("flow buckets: one LB IP over every master; followed, restored and purged per bucket", async () => {
  using _logs = captureLogs();
  await using cluster = await startRedisCluster();
  await using a = await node("lb-a", cluster, { store });
  await using b = await node("lb-b", cluster, { store });
  const evs = Array.from(
    { length: 800 },
    (_, i) => event(0x0a010000 + i, 40000 + (i % 7), i % 2 ? "10.0.1.2" : "10.0.1.3"),
  );
  for (const ev of evs) datapathLearns(a, ev);
  await until("B has every flow", () => b.table.size === evs.length);
  for (const ev of evs) deepStrictEqual(b.table.get(ev.key)?.backend, ev.backend, "backend");
  await flush(a.agent);

  // Every master holds some of the LB IP's buckets; together they hold every flow once.
  const perMaster = new Map<number, number>();
  let total = 0;
  for (const tag of bucketTags(VIP, 16)) {
    const k = vipKeys(tag).flows;
    const m = await cluster.masterOf(k);
    const n = Number((await m.cli("hlen", k)).trim());
    perMaster.set(m.port, (perMaster.get(m.port) ?? 0) + n);
    total += n;
  }
  deepStrictEqual(total, evs.length, "flows stored once");
  deepStrictEqual(perMaster.size, 3, `masters holding flows: ${JSON.stringify([...perMaster])}`);
  // The single-tag layout holds nothing: bucketed agents write only bucket tags.
  const plain = vipKeys(VIP).flows;
  deepStrictEqual(
    (await (await cluster.masterOf(plain)).cli("hlen", plain)).trim(),
    "0",
    "plain key",
  );

  // A node joining later restores every bucket.
  await using c = await node("lb-c", cluster, { store });
  deepStrictEqual(c.table.size, evs.length, "restored");

  // A purge walks every bucket; every node's map follows.
  const n = await purgeBackendFlows(`${VIP}:80/TCP`, "10.0.1.2", { store: a.store });
  deepStrictEqual(n, evs.length / 2, "purged count");
  await until("maps purged", () => b.table.size === evs.length / 2 && c.table.size === n);
  for (const e of c.table.entries()) {
    deepStrictEqual(e.value.backend, parseIpv4("10.0.1.3"), "kept");
  }
});

Deno.test("flow buckets: idle flows expire in every bucket (one Redis)", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  const opts = { store, idleTimeoutMs: 1_000, sweepIntervalMs: 100 };
  await using a = await node("lb-a", redis, opts);
  await using b = await node("lb-b", redis, opts);
  const evs = Array.from({ length: 64 }, (_, i) => event(0x0b000000 + i, 1, "10.0.1.2"));
  for (const ev of evs) datapathLearns(a, ev);
  await until("B has every flow", () => b.table.size === evs.length);
  const buckets = new Set<string>();
  for (const tag of bucketTags(VIP, 16)) {
    if (Number(await redis.cli("hlen", vipKeys(tag).flows)) > 0) buckets.add(tag);
  }
  ok(buckets.size > 8, `64 flows in only ${buckets.size} of 16 buckets`);
  // No packets: every flow goes idle, is swept from every bucket and leaves both maps.
  await until("both maps empty", () => a.table.size === 0 && b.table.size === 0, 20_000);
  for (const tag of bucketTags(VIP, 16)) {
    deepStrictEqual(Number(await redis.cli("hlen", vipKeys(tag).flows)), 0, tag);
  }
});
