/**
 * `main.ts status` and its model (controller/status/) against a real redis-server and a real LB
 * agent (`main.ts agent`, in-process, in-memory datapath) serving /metrics: the model the
 * controller publishes, flows per LB IP and per backend, the policy module in the model and the
 * one the agent serves, an egress owner with its epoch, a health report — as one JSON object.
 * Run: `deno test -P=redis tests/redis/status_test.ts`.
 */
import { assert, assertEquals } from "../../controller/_testing.ts";
import { main as agentMain } from "../../node/agent.ts";
import { main as statusMain } from "../../controller/status/main.ts";
import { readStatus } from "../../controller/status/collect.ts";
import { RedisStatusStore } from "../../controller/status/redis_status_store.ts";
import type { StatusSnapshot } from "../../controller/status/model.ts";
import { connectModelStore, encodeEntry, sha256Hex } from "../../controller/model/mod.ts";
import { appendReport } from "../../controller/model/reports.ts";
import { RedisLeaseStore } from "../../controller/egress/lease.ts";
import { FlowSyncAgent } from "../../node/flows/agent.ts";
import { MemoryFlowTable } from "../../node/flows/table.ts";
import { connectRedisStore } from "../../node/flows/redis_store.ts";
import { flush } from "../../node/flows/_testing.ts";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { freePort, startRedis } from "../../lab/redis_server.ts";
import { event, until, VIP } from "./_flow_nodes.ts";

const WEB = {
  name: "default/web",
  frontends: [{ address: `${VIP}:80/TCP` }],
  backends: [{ address: "10.0.1.2:8080/TCP" }, { address: "10.0.1.3:8080/TCP" }],
};
const EGRESS_ADDR = "198.18.0.100";

Deno.test("status: Redis and an agent's /metrics, as tables' data and as --json", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  const conn = new RedisConnection({ url: redis.url, logComponent: "test" });
  const model = connectModelStore({ url: redis.url });
  const flowStore = connectRedisStore({ url: redis.url });
  const peer = new FlowSyncAgent(new MemoryFlowTable(), flowStore, {
    node: "lb-a",
    services: { services: [WEB] },
    vips: [VIP],
    registry: new Registry(),
    readBlockMs: 100,
  });
  const stop = new AbortController();
  const dir = await Deno.makeTempDir({ prefix: "hf-status-test-" });
  const port = freePort();
  let agent: Promise<number> | undefined;
  const store = new RedisStatusStore({ url: redis.url });
  try {
    // The controller's side: the model with its policy module.
    const wasm = await Deno.readFile(
      new URL("../../policy-as/build/release.wasm", import.meta.url),
    );
    const sha256 = await sha256Hex(wasm);
    const epoch = await model.initEpoch("epoch-1");
    await model.write(epoch, {
      op: "upsert",
      service: WEB.name,
      entry: encodeEntry({
        service: { name: WEB.name, frontends: WEB.frontends },
        backends: WEB.backends,
      }),
    });
    await model.writePolicy(epoch, { sha256, wasm });
    // Flows learned by a peer LB node: three to 10.0.1.2, one to 10.0.1.3.
    await peer.start();
    for (
      const [port, backend] of [[1, "10.0.1.2"], [2, "10.0.1.2"], [3, "10.0.1.2"], [4, "10.0.1.3"]]
    ) {
      peer.learn(event("10.0.0.1", 40000 + Number(port), String(backend)));
    }
    await flush(peer);
    // An egress NAT pod holds an address; its EgressNAT's config names a second, free one.
    const lease = await new RedisLeaseStore(conn, "ns/nat").acquire(
      EGRESS_ADDR,
      "nat1/boot",
      60_000,
    );
    assert(lease.acquired);
    await conn.command([
      "HSET",
      "hf:egress:{ns/nat}:config",
      "json",
      JSON.stringify({ addresses: [{ address: EGRESS_ADDR }, { address: "198.18.0.101" }] }),
    ]);
    // An LB node without /metrics here reported 10.0.1.3 unhealthy.
    await appendReport(conn, {
      kind: "health",
      node: "lb-c",
      service: WEB.name,
      backend: "10.0.1.3:8080",
      state: "unhealthy",
      reason: "3 failed probes (connect refused)",
    });

    // An LB agent serving the LB IP, with /metrics.
    const config = `${dir}/services.json`;
    await Deno.writeTextFile(config, JSON.stringify({ services: [WEB] }));
    agent = agentMain([
      ...["--config", config, "--redis", redis.url, "--node-name", "lb-b"],
      ...["--datapath", "memory", "--listen", `127.0.0.1:${port}`, "--health", "off"],
    ], { signal: stop.signal });
    await until(
      "agent ready",
      () => logs.records.some((r) => r.msg === "ready" && r.node === "lb-b"),
    );

    const agents = [`http://127.0.0.1:${port}/metrics`, `http://127.0.0.1:${freePort()}/metrics`];
    let s: StatusSnapshot | undefined;
    await until("the agent serves the LB IP in the status", async () => {
      s = await readStatus(store, agents);
      return s.addresses[0]?.nodes.length === 1;
    });
    assertEquals(s!.redis, { up: true });
    assertEquals(s!.model.services, 1);
    assertEquals(s!.addresses, [
      { address: VIP, frontends: [`${VIP}:80/TCP default/web`], nodes: ["lb-b"], flows: 4 },
    ]);
    assertEquals(s!.backends.map((b) => [b.address, b.flows, b.health]), [
      ["10.0.1.2:8080/TCP", 3, "unknown"],
      ["10.0.1.3:8080/TCP", 1, "quarantined"],
    ]);
    assertEquals(s!.backends[1]!.healthBy, { "lb-c": "quarantined" });
    assertEquals(s!.policy.model, sha256);
    assertEquals(s!.policy.nodes, [{ node: "lb-b", digest: sha256 }]);
    assertEquals(s!.egress.map((e) => [e.egress, e.address, e.holder, e.epoch]), [
      ["ns/nat", EGRESS_ADDR, "nat1/boot", lease.epoch],
      ["ns/nat", "198.18.0.101", null, null],
    ]);
    assertEquals(s!.nodes.map((n) => [n.node, n.role, n.up, n.lbIps]), [
      ["lb-b", "lb", true, [VIP]],
      [new URL(agents[1]!).host, "unknown", false, []],
    ]);

    // The command: one JSON object with the same picture; tables otherwise.
    const printed = await captureStdout(() =>
      statusMain(["--redis", redis.url, "--agents", agents[0]!, "--json"])
    );
    assertEquals(printed.code, 0);
    const json = JSON.parse(printed.text) as StatusSnapshot;
    assertEquals(json.egress[0]!.holder, "nat1/boot");
    assertEquals(json.addresses[0]!.nodes, ["lb-b"]);
    const tables = await captureStdout(() =>
      statusMain(["--redis", redis.url, "--agents", agents[0]!])
    );
    assert(
      /^198\.18\.0\.100\s+nat1\/boot/m.test(tables.text.replace(/^ns\/nat\s+/gm, "")),
      tables.text,
    );
    // Redis gone: still prints, exits 1.
    const down = await captureStdout(() =>
      statusMain(["--redis", `redis://127.0.0.1:${freePort()}`, "--timeout-ms", "500"])
    );
    assertEquals(down.code, 1);
    assert(down.text.includes("Redis: down"), down.text);
  } finally {
    stop.abort();
    await agent;
    await peer.stop();
    await store.close();
    await flowStore.close();
    await model.close();
    await conn.close();
    await Deno.remove(dir, { recursive: true });
  }
});

async function captureStdout(fn: () => Promise<number>): Promise<{ code: number; text: string }> {
  const lines: string[] = [];
  const original = console.log;
  console.log = (...args: unknown[]) => void lines.push(args.join(" "));
  try {
    return { code: await fn(), text: lines.join("\n") };
  } finally {
    console.log = original;
  }
}
