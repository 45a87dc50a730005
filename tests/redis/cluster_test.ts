/**
 * Every Redis user through a real Redis Cluster (three masters with a replica each,
 * `lab/redis_cluster.ts`): flow agents over several LB IPs spread over the masters, the LB model,
 * egress leases; and a master SIGKILLed while agents learn: its replica takes over, the agents
 * keep working and the flows learned meanwhile are written (metric and log line).
 * Run: `deno test -P=redis tests/redis/cluster_test.ts`.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { type RedisCluster, startRedisCluster } from "../../lab/redis_cluster.ts";
import type { RedisServer } from "../../lab/redis_server.ts";
import { vipKeys } from "../../node/lb/flows/schema.ts";
import { flush } from "../../node/lb/flows/_testing.ts";
import { RedisLeaseStore } from "../../controller/egress/lease.ts";
import { connectModelStore, modelKeys, type RedisModelStore } from "../../controller/model/mod.ts";
import {
  MODEL_YAML,
  startTestAgent,
  startTestController,
} from "../../controller/model/_testing.ts";
import { datapathLearns, event, node, until } from "./_flow_nodes.ts";
import { main } from "../../node/lb/main.ts";
import { freePort } from "../../lab/redis_server.ts";

/** LB IPs whose keys land on every master (at most 64 candidates tried), two per master. */
async function spreadVips(cluster: RedisCluster): Promise<string[]> {
  const byMaster = new Map<RedisServer, string[]>();
  for (let i = 1; i <= 64; i++) {
    const vip = `10.0.100.${i}`;
    const m = await cluster.masterOf(vipKeys(vip).flows);
    const list = byMaster.get(m) ?? [];
    if (list.length < 2) byMaster.set(m, [...list, vip]);
    if (byMaster.size === 3 && [...byMaster.values()].every((l) => l.length === 2)) break;
  }
  deepStrictEqual(byMaster.size, 3, "masters covered");
  return [...byMaster.values()].flat();
}

function services(vips: readonly string[]) {
  const backends = Array.from({ length: 10 }, (_, i) => `10.0.1.${i + 1}:8080/TCP`);
  return {
    services: vips.map((vip, i) => ({
      name: `default/web${i}`,
      frontends: [{ address: `${vip}:80/TCP` }],
      backends: backends.map((address) => ({ address })),
    })),
  };
}

Deno.test("redis cluster: flows of LB IPs on every master reach the other agent", async () => {
  using _logs = captureLogs();
  await using cluster = await startRedisCluster();
  const vips = await spreadVips(cluster);
  const opts = { vips, services: services(vips) };
  await using a = await node("lb-a", cluster, opts);
  await using b = await node("lb-b", cluster, opts);
  const evs = vips.flatMap((vip, v) =>
    Array.from({ length: 100 }, (_, i) => event(0x0a010000 + v * 1000 + i, 40000, "10.0.1.2", vip))
  );
  for (const ev of evs) datapathLearns(a, ev);
  await until("B has every flow", () => b.table.size === evs.length);
  for (const ev of evs) deepStrictEqual(b.table.get(ev.key)?.backend, ev.backend, "backend");
  // Each LB IP's hash is on its own master.
  for (const vip of vips) {
    const m = await cluster.masterOf(vipKeys(vip).flows);
    deepStrictEqual((await m.cli("hlen", vipKeys(vip).flows)).trim(), "100", vip);
  }
  // A node joining later restores all of them.
  await using c = await node("lb-c", cluster, opts);
  deepStrictEqual(c.table.size, evs.length, "restored");
});

Deno.test("redis cluster: the model is published and read, egress leases are fenced", async () => {
  using _logs = captureLogs();
  await using cluster = await startRedisCluster();
  const stores: RedisModelStore[] = [];
  const open = () => {
    const s = connectModelStore({ url: cluster.url });
    stores.push(s);
    return s;
  };
  const conn = new RedisConnection({ url: cluster.url, logComponent: "egress-lease" });
  try {
    await using _ctl = await startTestController(open(), MODEL_YAML);
    await using agent = await startTestAgent(open());
    await agent.source.ready();
    await agent.cp.waitFrontend("10.0.100.1:80/TCP");
    await agent.cp.waitFrontend("10.0.100.2:53/UDP");

    const leases = new RedisLeaseStore(conn, "default/egress");
    const a = await leases.acquire("198.18.0.100", "nat1/b1", 5_000);
    ok(a.acquired, JSON.stringify(a));
    const busy = await leases.acquire("198.18.0.100", "nat2/b1", 5_000, "nat2");
    deepStrictEqual(busy, { acquired: false, epoch: a.epoch, holder: "nat1/b1" });
    deepStrictEqual(await leases.release("198.18.0.100", "nat1/b1", a.epoch), true);
    // Leases of another EgressNAT are likely on another master; they work the same.
    const other = new RedisLeaseStore(conn, "kube-system/egress");
    ok((await other.acquire("198.18.0.101", "nat3/b1", 5_000)).acquired, "other egress");
  } finally {
    for (const s of stores) await s.close();
    await conn.close();
  }
});

Deno.test("redis cluster: a master killed, its replica promoted; flows learned meanwhile are written", async () => {
  using logs = captureLogs();
  await using cluster = await startRedisCluster();
  const vips = await spreadVips(cluster);
  const opts = { vips, services: services(vips) };
  await using a = await node("lb-a", cluster, opts);
  await using b = await node("lb-b", cluster, opts);
  const batch = (base: number) =>
    vips.flatMap((vip, v) =>
      Array.from({ length: 50 }, (_, i) => event(base + v * 1000 + i, 40000, "10.0.1.3", vip))
    );
  const before = batch(0x0b000000);
  for (const ev of before) datapathLearns(a, ev);
  await until("B has the first flows", () => b.table.size === before.length);

  const victim = await cluster.masterOf(vipKeys(vips[0]!).flows);
  await victim.stop("SIGKILL");
  // Learned while the shard fails over: the writes for its LB IPs fail, the agent queues them.
  const during = batch(0x0c000000);
  for (const ev of during) datapathLearns(a, ev);
  await cluster.waitHealthy();
  const promoted = await cluster.masterOf(vipKeys(vips[0]!).flows);
  ok(promoted !== victim, "a replica took the slots over");

  // Learned after the failover, and everything reaches B through the new topology.
  const after = batch(0x0d000000);
  for (const ev of after) datapathLearns(a, ev);
  const all = before.length + during.length + after.length;
  await until("B has every flow", () => b.table.size === all, 30_000);
  await until("A in sync", () => a.agent.ready, 30_000);
  await flush(a.agent);
  for (const vip of vips) {
    const m = await cluster.masterOf(vipKeys(vip).flows);
    deepStrictEqual((await m.cli("hlen", vipKeys(vip).flows)).trim(), "150", vip);
  }
  // The outage was noticed and its flows counted as rewritten or queued and written.
  ok(
    logs.records.some((r) => r.msg === "flow store unavailable" && r.node === "lb-a"),
    "outage logged",
  );
  const text = a.registry.expose();
  const rewritten = /holdfast_flows_rewritten_total\{[^}]*\} (\d+)/g;
  let sum = 0;
  for (const m of text.matchAll(rewritten)) sum += Number(m[1]);
  const restored = logs.records.filter((r) =>
    r.msg === "flows restored" && r.node === "lb-a" && Number(r.published) > 0
  );
  ok(sum > 0 && restored.length > 0, `rewritten ${sum}, log lines ${restored.length}`);
  // The killed master returns as a replica; nothing changes for the agents.
  await victim.start();
  await cluster.waitHealthy();
  deepStrictEqual(b.table.size, all, "B unchanged");
});

Deno.test("redis cluster: a shard back empty (master and replica lost) is rewritten by the agents", async () => {
  using logs = captureLogs();
  await using cluster = await startRedisCluster();
  const vips = await spreadVips(cluster);
  const opts = { vips, services: services(vips) };
  await using a = await node("lb-a", cluster, opts);
  const evs = vips.flatMap((vip, v) =>
    Array.from({ length: 20 }, (_, i) => event(0x0e000000 + v * 1000 + i, 1, "10.0.1.4", vip))
  );
  for (const ev of evs) datapathLearns(a, ev);
  await flush(a.agent);
  const master = await cluster.masterOf(vipKeys(vips[0]!).flows);
  const topo = await cluster.topology();
  const masterId = topo.find((t) => t.port === master.port)!.id;
  const replicaPort = Number(
    (await master.cli("cluster", "replicas", masterId)).split(/\s+/)[1]!.split(":")[1]!
      .split("@")[0],
  );
  const replica = cluster.nodes.find((n) => n.port === replicaPort)!;
  // The whole shard goes; its master returns without data (no persistence) with its slots.
  await replica.stop("SIGKILL");
  await master.stop("SIGKILL");
  await master.start();
  await replica.start();
  await cluster.waitHealthy();
  const k = vipKeys(vips[0]!).flows;
  await until("the shard's flows rewritten", async () => {
    const m = await cluster.masterOf(k);
    return (await m.cli("hlen", k)).trim() === "20";
  }, 30_000);
  ok(
    logs.records.some((r) =>
      (r.msg === "flow store restarted empty, rewriting local flows" ||
        r.msg === "flow store lost its data") && r.node === "lb-a"
    ),
    "the empty shard was noticed",
  );
});

Deno.test("redis cluster: the model's master killed; the publisher and the agent follow its replica", async () => {
  using _logs = captureLogs();
  await using cluster = await startRedisCluster();
  const stores: RedisModelStore[] = [];
  const open = () => {
    const s = connectModelStore({ url: cluster.url });
    stores.push(s);
    return s;
  };
  try {
    await using ctl = await startTestController(open(), MODEL_YAML);
    await using agent = await startTestAgent(open());
    await agent.source.ready();
    await agent.cp.waitFrontend("10.0.100.2:53/UDP");
    // The agent is blocked reading the change stream on the master that dies.
    await cluster.kill(await cluster.masterOf(modelKeys().changes));
    ctl.file.load(MODEL_YAML.slice(0, MODEL_YAML.indexOf("  - name: default/dns")));
    await agent.cp.waitFrontend("10.0.100.2:53/UDP", { absent: true });
    await agent.cp.waitFrontend("10.0.100.1:80/TCP");
  } finally {
    for (const s of stores) await s.close();
  }
});

Deno.test("redis cluster: the agent subcommand with --redis redis+cluster:// restores and follows", async () => {
  using logs = captureLogs();
  await using cluster = await startRedisCluster();
  const vips = await spreadVips(cluster);
  await using peer = await node("lb-a", cluster, { vips, services: services(vips) });
  const first = vips.map((vip, v) => event(0x0f000000 + v, 1, "10.0.1.5", vip));
  for (const ev of first) datapathLearns(peer, ev);
  await flush(peer.agent);
  const dir = await Deno.makeTempDir({ prefix: "hf-agent-test-" });
  const config = `${dir}/services.json`;
  await Deno.writeTextFile(config, JSON.stringify(services(vips)));
  const port = freePort();
  const stop = new AbortController();
  // One seed is enough: the client learns the other nodes from it.
  const oneSeed = cluster.url.replace(/,.*$/, "");
  const exit = main([
    ...["--config", config, "--redis", oneSeed, "--vip", vips.join(",")],
    ...["--node-name", "lb-b", "--datapath", "memory", "--listen", `127.0.0.1:${port}`],
  ], { signal: stop.signal });
  const installed = async () => {
    const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text(), () => "");
    let sum = 0;
    for (const m of text.matchAll(/holdfast_flows_installed_total\{[^}]*\} (\d+)/g)) {
      sum += Number(m[1]);
    }
    return sum;
  };
  try {
    await until("ready", () => logs.records.some((r) => r.msg === "ready" && r.node === "lb-b"));
    deepStrictEqual(await installed(), vips.length, "restored at ready");
    for (const ev of vips.map((vip, v) => event(0x0f100000 + v, 1, "10.0.1.6", vip))) {
      datapathLearns(peer, ev);
    }
    await until("followed", async () => await installed() === 2 * vips.length);
  } finally {
    stop.abort();
    await Deno.remove(dir, { recursive: true });
  }
  deepStrictEqual(await exit, 0, "exit code");
});

Deno.test("redis cluster: an LB IP's slot moved to another master while agents learn (ASK, MOVED)", async () => {
  using _logs = captureLogs();
  await using cluster = await startRedisCluster();
  const vips = await spreadVips(cluster);
  const opts = { vips, services: services(vips) };
  await using a = await node("lb-a", cluster, opts);
  await using b = await node("lb-b", cluster, opts);
  const batch = (base: number) =>
    vips.flatMap((vip, v) =>
      Array.from({ length: 30 }, (_, i) => event(base + v * 1000 + i, 2, "10.0.1.7", vip))
    );
  const first = batch(0x10000000);
  for (const ev of first) datapathLearns(a, ev);
  await until("B has the first flows", () => b.table.size === first.length);
  const key = vipKeys(vips[0]!).flows;
  const from = await cluster.masterOf(key);
  const to = await cluster.masterOf(vipKeys(vips.at(-1)!).flows);
  ok(from !== to, "another master");
  const moving = cluster.migrateSlotOf(key, to);
  const during = batch(0x11000000);
  for (const ev of during) datapathLearns(a, ev);
  await moving;
  deepStrictEqual(await cluster.masterOf(key), to, "slot moved");
  const after = batch(0x12000000);
  for (const ev of after) datapathLearns(a, ev);
  const all = first.length + during.length + after.length;
  await until("B has every flow", () => b.table.size === all, 30_000);
  await until("A in sync", () => a.agent.ready, 30_000);
  await flush(a.agent);
  deepStrictEqual((await to.cli("hlen", key)).trim(), "90", "the moved LB IP's flows");
  const slot = (await to.cli("cluster", "keyslot", key)).trim();
  deepStrictEqual((await from.cli("cluster", "countkeysinslot", slot)).trim(), "0", "left behind");
});

Deno.test("redis cluster: credentials in the URL reach every node; wrong ones are reported, not retried", async () => {
  using logs = captureLogs();
  await using cluster = await startRedisCluster();
  for (const n of cluster.nodes) {
    await n.cli("config", "set", "masterauth", "s3cret");
    await n.cli("config", "set", "requirepass", "s3cret");
  }
  const url = cluster.url.replace("//", "//:s3cret@");
  const good = new RedisConnection({ url, logComponent: "test" });
  const bad = new RedisConnection({ url: cluster.url.replace("//", "//:wrong@") });
  try {
    // Keys on every master: each node connection authenticates.
    for (let i = 0; i < 30; i++) await good.command(["SET", `k${i}`, "v"]);
    deepStrictEqual(await good.command(["GET", "k7"]), "v");
    let err = "";
    try {
      await bad.command(["GET", "k7"]);
    } catch (e) {
      err = (e as Error).message;
    }
    ok(/authenticate|WRONGPASS/.test(err) && !err.includes("wrong@"), err);
    ok(!JSON.stringify(logs.records).includes("s3cret"), "password logged");
  } finally {
    await good.close();
    await bad.close();
  }
});
