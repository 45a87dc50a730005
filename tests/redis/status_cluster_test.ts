/**
 * `main.ts status` on a Redis Cluster (issue 28: every Redis user takes one): SCAN walks one
 * node's keys, so the status store scans every master — flows of an LB IP spread over flow
 * buckets on several masters are summed into one row, and every EgressNAT's config and lease is
 * found whichever master holds it. Run: `deno test -P=redis tests/redis/status_cluster_test.ts`.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { RedisStatusStore } from "../../controller/status/redis_status_store.ts";
import { main as statusMain } from "../../controller/status/main.ts";
import { startRedisCluster } from "../../lab/redis_cluster.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { bucketTags } from "../../node/lb/flows/buckets.ts";
import { vipKeys } from "../../node/lb/flows/schema.ts";

const VIP = "10.0.100.1";
/** A flow map value: the backend's address as 8 hex digits, then the rest (schema.ts). */
const flowTo = (hex: string) => `${hex}:1:0`;

Deno.test("status on a Redis Cluster: every master scanned, flow buckets summed per LB IP", async () => {
  await using cluster = await startRedisCluster();
  const redis = new RedisConnection({ url: cluster.url });
  const store = new RedisStatusStore({ url: cluster.url });
  try {
    // 16 buckets of one LB IP: one flow in each, to 10.0.1.2 (0a000102) or 10.0.1.3 (0a000103).
    const tags = bucketTags(VIP, 16);
    for (const [b, tag] of tags.entries()) {
      const backend = b % 4 === 0 ? "0a000103" : "0a000102";
      await redis.command(["HSET", vipKeys(tag).flows, `flow-${b}`, flowTo(backend)]);
    }
    const masters = new Set<number>();
    for (const tag of tags) masters.add((await cluster.masterOf(vipKeys(tag).flows)).port);
    ok(masters.size > 1, `the buckets sit on one master only: ${[...masters]}`);
    // Two EgressNATs, whose configs land on different masters (different hash tags).
    const names = ["egress/a", "egress/b", "egress/c", "egress/d"];
    for (const [i, name] of names.entries()) {
      const address = `198.18.0.${100 + i}`;
      await redis.command([
        "HSET",
        `hf:egress:{${name}}:config`,
        "json",
        JSON.stringify({ name, addresses: [{ address, gateway: `10.8.0.${100 + i}` }] }),
      ]);
      await redis.command(["SET", `hf:egress:{${name}}:lease:${address}`, `nat${i}/boot 7`]);
    }
    const state = await store.read();
    deepStrictEqual(state.flows, [
      { lbIp: VIP, total: 16, byBackend: { "10.0.1.2": 12, "10.0.1.3": 4 } },
    ]);
    deepStrictEqual(
      state.egress.map((e) => [e.egress, e.address, e.holder]).sort(),
      names.map((n, i) => [n, `198.18.0.${100 + i}`, `nat${i}/boot`]),
    );
    // The command itself takes the cluster URL.
    const code = await statusMain(["--redis", cluster.url, "--json", "--timeout-ms", "2000"]);
    deepStrictEqual(code, 0);
  } finally {
    await store.close();
    await redis.close();
  }
});
