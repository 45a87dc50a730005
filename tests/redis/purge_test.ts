/**
 * Backend removal from a services config purges that backend's flows in Redis and in every
 * agent's flow map — only for the frontend that lost it; adding a backend purges nothing. Real redis-server, in-memory flow maps.
 * Run: `deno test -P=redis tests/redis/purge_test.ts`.
 */
import { FlowSyncAgent } from "../../node/lb/flows/sync_agent.ts";
import { makeFlowKey } from "../../node/bpf/flow.ts";
import { MemoryFlowTable } from "../../node/lb/flows/table.ts";
import { connectRedisStore, type RedisFlowStore } from "../../node/lb/flows/redis_store.ts";
import { purgeRemovedBackends } from "../../node/lb/flows/purge.ts";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { datapathLearns, node, until, VIP } from "./_flow_nodes.ts";
import { flowField } from "../../node/lb/flows/field.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

/** The services file format (node/lb/sources/file_source.ts), one service. */
function oneService(backends: string[]) {
  return {
    services: [{
      name: "default/web",
      frontends: [{ address: `${VIP}:8080/TCP` }],
      backends: backends.map((b) => ({ address: `${b}:8080/TCP` })),
    }],
  };
}

Deno.test("redis purge: a backend leaving the config loses its flows everywhere; adding one moves nothing", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  const stores: RedisFlowStore[] = [];
  const nodes: { agent: FlowSyncAgent; table: MemoryFlowTable }[] = [];
  try {
    for (const name of ["lb1", "lb2"]) {
      const store = connectRedisStore({ url: redis.url });
      stores.push(store);
      const table = new MemoryFlowTable();
      const agent = new FlowSyncAgent(table, store, {
        node: name,
        vips: [VIP],
        services: oneService(["10.3.1.2", "10.3.2.2", "10.3.3.2"]),
        registry: new Registry(),
        readBlockMs: 100,
      });
      await agent.start();
      nodes.push({ agent, table });
    }
    const [a, b] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];
    const keys = Array.from(
      { length: 20 },
      (_, i) =>
        makeFlowKey({ saddr: 0x0a010000 + i, daddr: VIP, sport: 40000, dport: 8080, proto: 6 }),
    );
    keys.forEach((key, i) => {
      const backend = parseIpv4(i % 2 ? "10.3.1.2" : "10.3.2.2");
      a.table.put(key, { backend, flags: 0, lastSeenNs: a.table.nowNs() });
      a.agent.learn({ key, backend, serviceId: 1, tsNs: 0 });
    });
    await until("b has all 20", () => keys.every((k) => b.table.get(k) !== undefined));

    const v1 = oneService(["10.3.1.2", "10.3.2.2"]);
    const v2 = oneService(["10.3.1.2", "10.3.2.2", "10.3.3.2"]);
    const v3 = oneService(["10.3.2.2", "10.3.3.2"]);
    const store = stores[0]!;
    if (await purgeRemovedBackends(v1, v2, { store, node: "lb1" }) !== 0) {
      throw new Error("adding a backend purged flows");
    }
    // Every node reacts to the same file change; the second purge finds nothing.
    const first = await purgeRemovedBackends(v2, v3, { store, node: "lb1" });
    const second = await purgeRemovedBackends(v2, v3, { store: stores[1]!, node: "lb2" });
    if (first !== 10 || second !== 0) throw new Error(`purged ${first} then ${second}`);
    const gone = keys.filter((_, i) => i % 2 === 1);
    const kept = keys.filter((_, i) => i % 2 === 0);
    await until(
      "purged from both maps",
      () => gone.every((k) => a.table.get(k) === undefined && b.table.get(k) === undefined),
    );
    if (!kept.every((k) => a.table.get(k) && b.table.get(k))) throw new Error("other flows lost");
    const stored = await store.exists(VIP, keys.map(flowField));
    if (stored.filter(Boolean).length !== 10) throw new Error(`stored: ${stored}`);
    if (!logs.records.some((r) => r.msg === "flows purged" && r.backend === "10.3.1.2")) {
      throw new Error("no purge log line");
    }
  } finally {
    for (const n of nodes) await n.agent.stop();
    for (const s of stores) await s.close();
  }
});

/** Two services on one LB IP (ports 9000 and 8000), both served by the same backends. */
function sharedIp(backends8000: string[]) {
  const backends = (ips: string[]) => ips.map((b) => ({ address: `${b}:7000/TCP` }));
  return {
    services: [
      {
        name: "default/nine",
        frontends: [{ address: `${VIP}:9000/TCP` }],
        backends: backends(["10.3.1.2", "10.3.2.2"]),
      },
      {
        name: "default/eight",
        frontends: [{ address: `${VIP}:8000/TCP` }],
        backends: backends(backends8000),
      },
    ],
  };
}

Deno.test("redis purge: a backend leaving one service keeps another service's flows to it on the same LB IP", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  const before = sharedIp(["10.3.1.2", "10.3.2.2"]);
  const after = sharedIp(["10.3.2.2"]);
  await using a = await node("lb1", redis, { services: before });
  await using b = await node("lb2", redis, { services: before });
  const backend = parseIpv4("10.3.1.2");
  const flowsTo = (dport: number) =>
    Array.from(
      { length: 10 },
      (_, i) => makeFlowKey({ saddr: 0x0a020000 + i, daddr: VIP, sport: 40000, dport, proto: 6 }),
    );
  const nine = flowsTo(9000);
  const eight = flowsTo(8000);
  for (const key of [...nine, ...eight]) datapathLearns(a, { key, backend, serviceId: 1, tsNs: 0 });
  await until("b has all 20", () => [...nine, ...eight].every((k) => b.table.get(k)));

  // The config change removes 10.3.1.2 from the 8000 service only.
  for (const n of [a, b]) n.agent.setServices(after);
  const purged = await purgeRemovedBackends(before, after, { store: a.store, node: "lb1" });
  if (purged !== 10) throw new Error(`purged ${purged} flows, want the 10 of port 8000`);
  await until(
    "port 8000 flows purged from both maps",
    () => eight.every((k) => a.table.get(k) === undefined && b.table.get(k) === undefined),
  );
  const kept = nine.filter((k) => a.table.get(k) && b.table.get(k));
  if (kept.length !== 10) throw new Error(`port 9000 kept ${kept.length} of 10 flows in both maps`);
  const stored = await a.store.exists(VIP, nine.map(flowField));
  if (!stored.every(Boolean)) throw new Error(`port 9000 flows lost in Redis: ${stored}`);
});
