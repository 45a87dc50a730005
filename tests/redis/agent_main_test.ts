/**
 * The `agent` subcommand (node/lb/main.ts) in-process against a real redis-server, with the
 * in-memory datapath: ready signalling, /readyz, /metrics, peer flows, clean stop.
 * Run: `deno test -P=redis tests/redis/agent_main_test.ts`.
 */
import { flush } from "../../node/lb/flows/_testing.ts";
import { main } from "../../node/lb/main.ts";
import { FlowSyncAgent } from "../../node/lb/flows/sync_agent.ts";
import { makeFlowKey } from "../../node/bpf/flow.ts";
import { MemoryFlowTable } from "../../node/lb/flows/table.ts";
import { connectRedisStore } from "../../node/lb/flows/redis_store.ts";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { freePort, startRedis } from "../../lab/redis_server.ts";
import { services, until, VIP } from "./_flow_nodes.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

async function get(url: string): Promise<{ status: number; text: string }> {
  try {
    const res = await fetch(url);
    return { status: res.status, text: await res.text() };
  } catch {
    return { status: 0, text: "" };
  }
}

Deno.test("agent subcommand: restores, reports ready, serves /readyz and /metrics, stops on signal", async () => {
  using logs = captureLogs();
  await using redis = await startRedis({
    aclUsers: [{ name: "holdfast", password: "pw", rules: ["~hf:*", "+@all", "-@dangerous"] }],
  });
  // A peer stored a flow before this agent starts: it must be in the map at ready.
  const peerStore = connectRedisStore({ url: redis.url });
  const peerTable = new MemoryFlowTable();
  const peer = new FlowSyncAgent(peerTable, peerStore, {
    node: "lb-a",
    services: services(),
    vips: [VIP],
    registry: new Registry(),
    readBlockMs: 100,
  });
  await peer.start();
  const key = makeFlowKey({ saddr: "10.0.0.1", daddr: VIP, sport: 40000, dport: 80, proto: 6 });
  peer.learn({ key, backend: parseIpv4("10.0.1.2"), serviceId: 1, tsNs: 0 });
  await flush(peer);

  const port = freePort();
  const dir = await Deno.makeTempDir({ prefix: "hf-agent-test-" });
  const config = `${dir}/services.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      services: [{
        name: "default/web",
        frontends: [{ address: `${VIP}:80/TCP` }],
        backends: [{ address: "10.0.1.2:80/TCP" }, { address: "10.0.1.3:80/TCP" }],
      }],
    }),
  );
  const stop = new AbortController();
  const exit = main([
    "--config",
    config,
    "--redis",
    `redis://holdfast:pw@127.0.0.1:${redis.port}`,
    "--vip",
    VIP,
    "--node-name",
    "lb-b",
    "--datapath",
    "memory",
    "--listen",
    `127.0.0.1:${port}`,
  ], { signal: stop.signal });
  try {
    await until(
      "ready log line",
      () => logs.records.some((r) => r.msg === "ready" && r.node === "lb-b"),
    );
    const ready = await get(`http://127.0.0.1:${port}/readyz`);
    if (ready.status !== 200) throw new Error(`/readyz ${ready.status}`);
    const metrics = await get(`http://127.0.0.1:${port}/metrics`);
    for (
      const want of [
        "holdfast_flow_agent_ready 1",
        'holdfast_flows_installed_total{vip="10.0.100.1"} 1',
      ]
    ) {
      if (!metrics.text.includes(want)) throw new Error(`/metrics lacks ${want}:\n${metrics.text}`);
    }
    // Later peer flows arrive too.
    peer.learn({
      key: makeFlowKey({ saddr: "10.0.0.2", daddr: VIP, sport: 1, dport: 80, proto: 6 }),
      backend: parseIpv4("10.0.1.3"),
      serviceId: 1,
      tsNs: 0,
    });
    await until(
      "second flow installed",
      async () =>
        (await get(`http://127.0.0.1:${port}/metrics`)).text.includes(
          'holdfast_flows_installed_total{vip="10.0.100.1"} 2',
        ),
    );
    const line = logs.records.find((r) => r.msg === "starting");
    if (JSON.stringify(line).includes(":pw@")) throw new Error("password logged");
  } finally {
    stop.abort();
    await peer.stop();
    await peerStore.close();
    await Deno.remove(dir, { recursive: true });
  }
  const code = await exit;
  if (code !== 0) throw new Error(`exit code ${code}`);
});
