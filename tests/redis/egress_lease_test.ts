/**
 * The egress lease (`node/egress/lease.ts`) against a real redis-server: epochs only grow, a
 * stale holder can neither renew nor release, a lease expires on its own, and a pod that asks for
 * a held address is named to the holder.
 * Run: `deno test -P=redis tests/redis/egress_lease_test.ts`.
 */
import { assert, assertEquals } from "../../controller/_testing.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { captureLogs } from "../../lib/log.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { RedisLeaseStore } from "../../node/egress/lease.ts";

const ADDR = "198.18.0.100";

Deno.test("redis egress lease: epochs grow, stale holders are fenced, leases expire", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  const conn = new RedisConnection({ url: redis.url, logComponent: "egress-lease" });
  try {
    const leases = new RedisLeaseStore(conn, "default/egress");
    assertEquals(await leases.read(ADDR), null);

    const a = await leases.acquire(ADDR, "nat1/b1", 5_000);
    assert(a.acquired && a.epoch === 1, JSON.stringify(a));
    const busy = await leases.acquire(ADDR, "nat2/b1", 5_000, "nat2");
    assertEquals(busy, { acquired: false, epoch: 1, holder: "nat1/b1" });
    assertEquals(await leases.renew(ADDR, "nat1/b1", 1, 5_000), {
      renewed: true,
      wantedBy: "nat2",
    });
    const read = await leases.read(ADDR);
    assert(read?.holder === "nat1/b1" && read.epoch === 1 && read.ttlMs > 4_000, `${read}`);

    // A non-holder, or the holder with a wrong epoch, cannot release.
    assertEquals(await leases.release(ADDR, "nat2/b1", 1), false);
    assertEquals(await leases.release(ADDR, "nat1/b1", 2), false);
    assertEquals(await leases.release(ADDR, "nat1/b1", 1), true);
    assertEquals(await leases.read(ADDR), null);

    // Every acquisition gets a larger epoch; the previous holder is stale.
    const b = await leases.acquire(ADDR, "nat2/b1", 150);
    assert(b.acquired && b.epoch === 2, JSON.stringify(b));
    assertEquals((await leases.renew(ADDR, "nat1/b1", 1, 5_000)).renewed, false);
    assertEquals(await leases.release(ADDR, "nat1/b1", 1), false);
    assertEquals((await leases.renew(ADDR, "nat2/b1", 2, 150)).renewed, true);

    // Not renewed: it expires by itself, and then nobody can renew it.
    await new Promise((r) => setTimeout(r, 300));
    assertEquals(await leases.read(ADDR), null);
    assertEquals((await leases.renew(ADDR, "nat2/b1", 2, 150)).renewed, false);
    const c = await leases.acquire(ADDR, "nat1/b2", 5_000);
    assert(c.acquired && c.epoch === 3, JSON.stringify(c));

    // Another EgressNAT's leases are separate keys in their own hash slot.
    const other = new RedisLeaseStore(conn, "team/egress");
    const d = await other.acquire(ADDR, "nat9/b1", 5_000);
    assert(d.acquired && d.epoch === 1, JSON.stringify(d));
    assertEquals(leases.keys(ADDR).lease, "hf:egress:{default/egress}:lease:198.18.0.100");
  } finally {
    await conn.close();
  }
});
