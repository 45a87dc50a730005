/**
 * The trust boundary against a real redis-server: a flow written to Redis whose backend does not
 * serve its frontend (or whose frontend is unknown) is not installed — neither from the stream
 * nor by a restore — and is counted; valid flows install. Run:
 * `deno test -P=redis tests/redis/trust_test.ts`.
 */
import { ok } from "node:assert/strict";
import { makeFlowKey } from "../../node/bpf/flow.ts";
import { flowField } from "../../node/lb/flows/field.ts";
import { connectRedisStore } from "../../node/lb/flows/redis_store.ts";
import { captureLogs } from "../../lib/log.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { node, until, VIP } from "./_flow_nodes.ts";

const valid = makeFlowKey({ saddr: "10.5.0.1", daddr: VIP, sport: 1000, dport: 80, proto: 6 });
const hijack = makeFlowKey({ saddr: "10.5.0.2", daddr: VIP, sport: 1000, dport: 80, proto: 6 });
const nowhere = makeFlowKey({ saddr: "10.5.0.3", daddr: VIP, sport: 1000, dport: 81, proto: 6 });
/** Not a backend of any service (the config's backends are 10.0.1.x and 10.0.2.x). */
const ROGUE = parseIpv4("10.66.6.6");

Deno.test("redis trust: bogus flows written to Redis are counted and not installed; valid ones are", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  await using a = await node("lb-a", redis);
  // Anyone with write access to Redis, writing as a peer would.
  const rogue = connectRedisStore({ url: redis.url });
  try {
    const write = (flows: { field: string; backend: number }[]) =>
      rogue.learn(VIP, flows, { node: "lb-x", nowMs: Date.now(), idleTimeoutMs: 60_000 });
    await write([
      { field: flowField(hijack), backend: ROGUE },
      { field: flowField(nowhere), backend: parseIpv4("10.0.1.2") },
      { field: flowField(valid), backend: parseIpv4("10.0.1.3") },
    ]);
    // Followed from the stream: the valid flow installs, the others do not.
    await until("valid flow installed", () => a.table.get(valid) !== undefined);
    ok(a.table.get(hijack) === undefined, "hijacking flow installed from the stream");
    ok(a.table.get(nowhere) === undefined, "flow of an unknown frontend installed");
    const metrics = a.registry.expose();
    for (const reason of ["backend_not_serving", "unknown_frontend"]) {
      ok(
        metrics.includes(`holdfast_flows_rejected_total{vip="${VIP}",reason="${reason}"} 1`),
        `${reason} not counted:\n${metrics}`,
      );
    }
    const line = logs.records.find((r) =>
      r.msg === "flow rejected: backend not serving this frontend"
    );
    ok(line, "no rejection log line");
    ok(
      line.backend === "10.66.6.6" && line.frontend === `${VIP}:80/TCP` &&
        line.flow === "10.5.0.2:1000->10.0.100.1:80/6",
      `rejection line: ${JSON.stringify(line)}`,
    );

    // Restored by a node that starts later: the same verdicts.
    await using b = await node("lb-b", redis);
    ok(b.table.get(valid)?.backend === parseIpv4("10.0.1.3"), "valid flow not restored");
    ok(b.table.get(hijack) === undefined, "hijacking flow restored");
    ok(b.table.get(nowhere) === undefined, "flow of an unknown frontend restored");
    ok(
      b.registry.expose().includes(
        `holdfast_flows_rejected_total{vip="${VIP}",reason="backend_not_serving"} 1`,
      ),
      "restore rejection not counted",
    );
  } finally {
    await rogue.close();
  }
});
