/**
 * The owner records NAT pods publish for client steering (controller/egress/owners.ts) and the
 * node agent's reader of them (node/egress_steer/source.ts) against a real redis-server: a stale
 * `assumed` never overwrites a newer owner, the snapshot and the stream miss nothing, and the
 * reader follows configs and owner changes, re-reading everything after Redis restarts.
 * Run: `deno test -P=redis tests/redis/egress_owners_test.ts`.
 */
import { ok } from "node:assert/strict";
import { startRedis } from "../../lab/redis_server.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { log } from "../../lib/log.ts";
import {
  type OwnerChange,
  type OwnerRecord,
  ownersKeys,
  publishOwnerChange,
  readOwnersSnapshot,
} from "../../controller/egress/owners.ts";
import { publishEgressConfig } from "../../controller/egress/redis_config.ts";
import { parseEgressConfig } from "../../controller/egress/config.ts";
import { type SteerEgress, SteerSource } from "../../node/egress_steer/source.ts";

async function until(what: string, ok: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; i < 10_000 && Date.now() < deadline; i++) {
    if (ok()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`Timed out (${timeoutMs} ms) waiting for: ${what}`);
}

const EGRESS = "lab/egress";
const change = (event: OwnerChange["event"], pod: string, epoch: number): OwnerChange => ({
  event,
  address: "198.18.0.100",
  pod,
  ip: pod === "nat1" ? "10.244.2.2" : "10.244.3.2",
  epoch,
});

Deno.test("redis: owner records — a stale assume never wins; snapshot then stream misses nothing", async () => {
  await using redis = await startRedis();
  const conn = new RedisConnection({ url: redis.url });
  try {
    const empty = await readOwnersSnapshot(conn, EGRESS);
    ok(empty.lastId === "0-0" && empty.owners.size === 0, JSON.stringify([...empty.owners]));
    ok(await publishOwnerChange(conn, EGRESS, change("assumed", "nat1", 7)), "first assume");
    ok(await publishOwnerChange(conn, EGRESS, change("assumed", "nat2", 8)), "newer assume");
    // nat1's late message (an older epoch) is refused whole: no hash write, no stream entry.
    ok(!await publishOwnerChange(conn, EGRESS, change("assumed", "nat1", 7)), "stale refused");
    const snap = await readOwnersSnapshot(conn, EGRESS);
    const rec = snap.owners.get("198.18.0.100");
    ok(rec?.pod === "nat2" && rec.epoch === 8 && rec.ip === "10.244.3.2", JSON.stringify(rec));
    await publishOwnerChange(conn, EGRESS, change("forfeited", "nat2", 8));
    const after = await conn.command([
      "XREAD",
      "STREAMS",
      ownersKeys(EGRESS).stream,
      snap.lastId,
    ]) as [string, [string, string[]][]][];
    const fields = after[0]![1].map(([, f]) => f.join(" "));
    ok(fields.length === 1 && fields[0]!.startsWith("event forfeited"), fields.join(" | "));
    const still = await readOwnersSnapshot(conn, EGRESS);
    ok(still.owners.get("198.18.0.100")?.pod === "nat2", "a forfeit leaves the hash alone");
  } finally {
    await conn.close();
  }
});

Deno.test("redis: the steering source follows configs and owner changes, and re-reads after Redis restarts", async () => {
  await using redis = await startRedis();
  const conn = new RedisConnection({ url: redis.url });
  const events: string[] = [];
  let egresses: readonly SteerEgress[] = [];
  const owners = new Map<string, OwnerRecord>();
  const source = new SteerSource({
    redis: conn,
    log,
    pollMs: 100,
    discoverMs: 200,
    blockMs: 200,
    sink: {
      egresses: (list) => {
        egresses = list;
        events.push(`egresses ${list.map((e) => `${e.name}:${e.clients.length}`).join()}`);
      },
      owners: (egress, recs) => {
        for (const [a, r] of recs) owners.set(`${egress}|${a}`, r);
        events.push(`snapshot ${egress}`);
      },
      change: (egress, c) => {
        if (c.event === "assumed") owners.set(`${egress}|${c.address}`, c);
        events.push(`change ${c.event} ${c.pod} ${c.epoch}`);
      },
    },
  });
  try {
    const config = parseEgressConfig({
      name: EGRESS,
      destinations: ["198.18.0.0/24"],
      addresses: [{ address: "198.18.0.100", gateway: "10.244.9.100" }],
      sources: [{ prefix: "10.244.1.2/32" }],
      peers: [{ name: "nat1", address: "10.244.2.2" }, { name: "nat2", address: "10.244.3.2" }],
    });
    await publishOwnerChange(conn, EGRESS, change("assumed", "nat1", 1));
    await publishEgressConfig(conn, config, undefined, [
      { pod: "lab/c1", node: "cn1", ips: ["10.244.1.2"], address: "198.18.0.100" },
    ]);
    await source.start();
    // The owners come before the EgressNAT that uses them.
    ok(events.join() === `snapshot ${EGRESS},egresses ${EGRESS}:1`, events.join());
    ok(owners.get(`${EGRESS}|198.18.0.100`)?.pod === "nat1", "owner from the snapshot");

    await publishOwnerChange(conn, EGRESS, change("assumed", "nat2", 2));
    await until("the change", () => events.includes("change assumed nat2 2"));

    // A second client: the revision changes, the source re-reads.
    await publishEgressConfig(conn, config, undefined, [
      { pod: "lab/c1", node: "cn1", ips: ["10.244.1.2"], address: "198.18.0.100" },
      { pod: "lab/c2", node: "cn2", ips: ["10.244.5.2"], address: "198.18.0.100" },
    ]);
    await until("two clients", () => egresses[0]?.clients.length === 2);

    // Redis restarts empty (the config gone: steering for it stops); the controller publishes
    // the config again, a NAT pod its next owner change: the source snapshots and follows.
    await redis.restart();
    await until("connection back", () => conn.ready, 15_000);
    await until("the config gone", () => egresses.length === 0, 15_000);
    await publishEgressConfig(conn, config, undefined, [
      { pod: "lab/c1", node: "cn1", ips: ["10.244.1.2"], address: "198.18.0.100" },
    ]);
    await until("the config back", () => egresses.length === 1, 15_000);
    await publishOwnerChange(conn, EGRESS, change("assumed", "nat1", 3));
    await until(
      "nat1 again",
      () => owners.get(`${EGRESS}|198.18.0.100`)?.epoch === 3,
      15_000,
    );
  } finally {
    await source.stop();
    await conn.close();
  }
});
