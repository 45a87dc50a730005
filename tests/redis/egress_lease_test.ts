/**
 * The egress lease (`node/egress/lease.ts`) against a real redis-server: epochs only grow, a
 * stale holder can neither renew nor release, a lease expires on its own, a pod that asks for
 * a held address is named to the holder, and after Redis lost its data the next acquire says so.
 * Run: `deno test -P=redis tests/redis/egress_lease_test.ts`.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { captureLogs } from "../../lib/log.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { RedisLeaseStore } from "../../controller/egress/lease.ts";

const ADDR = "198.18.0.100";

/** Polls `ok` every 50 ms for up to 15 s (far above what it takes on an idle machine). */
async function waitFor(what: string, ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (let i = 0; i < 300 && Date.now() < deadline; i++) {
    if (await ok()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`Timed out after 15 s: ${what}`);
}

Deno.test("redis egress lease: epochs grow, stale holders are fenced, leases expire", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  const conn = new RedisConnection({ url: redis.url, logComponent: "egress-lease" });
  try {
    const leases = new RedisLeaseStore(conn, "default/egress");
    deepStrictEqual(await leases.read(ADDR), null);

    // The first acquire seeds the epoch from the server clock and says so.
    const a = await leases.acquire(ADDR, "nat1/b1", 60_000);
    ok(a.acquired && a.fresh === true && a.epoch > Date.now() - 60_000, JSON.stringify(a));
    const e = a.epoch;
    const busy = await leases.acquire(ADDR, "nat2/b1", 60_000, "nat2");
    deepStrictEqual(busy, { acquired: false, epoch: e, holder: "nat1/b1" });
    deepStrictEqual(await leases.renew(ADDR, "nat1/b1", e, 60_000), {
      renewed: true,
      wantedBy: "nat2",
    });
    const read = await leases.read(ADDR);
    ok(read?.holder === "nat1/b1" && read.epoch === e && read.ttlMs > 30_000, `${read}`);

    // A non-holder, or the holder with a wrong epoch, cannot release.
    deepStrictEqual(await leases.release(ADDR, "nat2/b1", e), false);
    deepStrictEqual(await leases.release(ADDR, "nat1/b1", e + 1), false);
    deepStrictEqual(await leases.release(ADDR, "nat1/b1", e), true);
    deepStrictEqual(await leases.read(ADDR), null);

    // Every acquisition gets a larger epoch; the previous holder is stale.
    const b = await leases.acquire(ADDR, "nat2/b1", 60_000);
    deepStrictEqual(b, { acquired: true, epoch: e + 1 });
    deepStrictEqual((await leases.renew(ADDR, "nat1/b1", e, 60_000)).renewed, false);
    deepStrictEqual(await leases.release(ADDR, "nat1/b1", e), false);
    // (renewed to a short ttl only now: the steps above may take long on a loaded machine)
    deepStrictEqual((await leases.renew(ADDR, "nat2/b1", e + 1, 150)).renewed, true);

    // Not renewed: it expires by itself, and then nobody can renew it.
    await waitFor("the lease to expire", async () => await leases.read(ADDR) === null);
    deepStrictEqual((await leases.renew(ADDR, "nat2/b1", e + 1, 150)).renewed, false);
    const c = await leases.acquire(ADDR, "nat1/b2", 60_000);
    deepStrictEqual(c, { acquired: true, epoch: e + 2 });

    // Redis loses everything (restart without persistence): the holder's renew fails, and the
    // next acquire is fresh (the ownership waits a ttl) with an epoch still above the old ones.
    await redis.restart();
    await waitFor("reconnected", async () => await leases.read(ADDR).then(() => true, () => false));
    deepStrictEqual((await leases.renew(ADDR, "nat1/b2", e + 2, 60_000)).renewed, false);
    const f = await leases.acquire(ADDR, "nat2/b2", 60_000);
    ok(f.acquired && f.fresh === true && f.epoch > e + 2, JSON.stringify(f));

    // Another EgressNAT's leases are separate keys in their own hash slot.
    const other = new RedisLeaseStore(conn, "team/egress");
    const d = await other.acquire(ADDR, "nat9/b1", 60_000);
    ok(d.acquired && d.fresh === true, JSON.stringify(d));
    deepStrictEqual(leases.keys(ADDR).lease, "hf:egress:{default/egress}:lease:198.18.0.100");
  } finally {
    await conn.close();
  }
});
