/**
 * `main.ts status` and its model (controller/status/) against a real redis-server and a real LB
 * agent's /metrics (`_status_scene.ts`): the model the controller publishes, flows per LB IP and
 * per backend, the policy module in the model and the one the agent serves, an egress owner with
 * its epoch and a free address, a health report — as data, as one JSON object and as tables.
 * Run: `deno test -P=redis tests/redis/status_test.ts`.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { main as statusMain } from "../../controller/status/main.ts";
import { readStatus } from "../../controller/status/collect.ts";
import { dashboardHandler, StatusFeed } from "../../controller/status/dashboard.ts";
import { serveOps } from "../../lib/ops_http.ts";
import { RedisStatusStore } from "../../controller/status/redis_status_store.ts";
import type { StatusSnapshot } from "../../controller/status/model.ts";
import { captureLogs } from "../../lib/log.ts";
import { freePort, startRedis } from "../../lab/redis_server.ts";
import { until, VIP } from "./_flow_nodes.ts";
import { EGRESS, EGRESS_ADDR, startStatusScene } from "./_status_scene.ts";

Deno.test("status: Redis and an agent's /metrics, as data, --json and tables", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  await using scene = await startStatusScene(redis.url, logs);
  const store = new RedisStatusStore({ url: redis.url });
  try {
    const agents = [scene.agentUrl, `http://127.0.0.1:${freePort()}/metrics`];
    let s: StatusSnapshot | undefined;
    await until("the agent serves the LB IP in the status", async () => {
      s = await readStatus(store, agents);
      return s.addresses[0]?.nodes.length === 1;
    });
    deepStrictEqual(s!.redis, { up: true });
    deepStrictEqual(s!.model.services, 1);
    deepStrictEqual(s!.addresses, [
      { address: VIP, frontends: [`${VIP}:80/TCP default/web`], nodes: ["lb-b"], flows: 4 },
    ]);
    deepStrictEqual(s!.backends.map((b) => [b.address, b.flows, b.health]), [
      ["10.0.1.2:8080/TCP", 3, "unknown"],
      ["10.0.1.3:8080/TCP", 1, "quarantined"],
    ]);
    deepStrictEqual(s!.backends[1]!.healthBy, { "lb-c": "quarantined" });
    deepStrictEqual(s!.policy.model, scene.sha256);
    deepStrictEqual(s!.policy.nodes, [{ node: "lb-b", digest: scene.sha256 }]);
    deepStrictEqual(s!.egress.map((e) => [e.egress, e.address, e.holder, e.epoch]), [
      [EGRESS, EGRESS_ADDR, "nat1/boot-a", scene.lease.epoch],
      [EGRESS, "198.18.0.101", null, null],
    ]);
    deepStrictEqual(s!.nodes.map((n) => [n.node, n.role, n.up, n.lbIps]), [
      ["lb-b", "lb", true, [VIP]],
      [new URL(agents[1]!).host, "unknown", false, []],
    ]);

    // The command: one JSON object with the same picture; tables otherwise.
    const printed = await captureStdout(() =>
      statusMain(["--redis", redis.url, "--agents", scene.agentUrl, "--json"])
    );
    deepStrictEqual(printed.code, 0);
    const json = JSON.parse(printed.text) as StatusSnapshot;
    deepStrictEqual(json.egress[0]!.holder, "nat1/boot-a");
    deepStrictEqual(json.addresses[0]!.nodes, ["lb-b"]);
    const tables = await captureStdout(() =>
      statusMain(["--redis", redis.url, "--agents", scene.agentUrl])
    );
    ok(
      new RegExp(`^${EGRESS}\\s+${EGRESS_ADDR}\\s+nat1/boot-a`, "m").test(tables.text),
      tables.text,
    );
    ok(new RegExp(`^${VIP}\\s+lb-b\\s+4\\s`, "m").test(tables.text), tables.text);
    // Redis gone: the rest still prints, exit 1.
    const down = await captureStdout(() =>
      statusMain(["--redis", `redis://127.0.0.1:${freePort()}`, "--timeout-ms", "500"])
    );
    deepStrictEqual(down.code, 1);
    ok(down.text.includes("Redis: down"), down.text);
  } finally {
    await store.close();
  }
});

Deno.test("status: an ops server (the controller's) serves /dashboard beside /metrics", async () => {
  using _logs = captureLogs();
  await using redis = await startRedis();
  const store = new RedisStatusStore({ url: redis.url });
  const feed = new StatusFeed(() => readStatus(store, []), { lazy: true });
  feed.start();
  const port = freePort();
  const server = serveOps({ hostname: "127.0.0.1", port }, () => true, {
    routes: dashboardHandler(feed),
  });
  try {
    const get = async (path: string) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      return { status: res.status, type: res.headers.get("content-type"), text: await res.text() };
    };
    const page = await get("/dashboard");
    deepStrictEqual([page.status, page.type], [200, "text/html; charset=utf-8"]);
    ok(page.text.includes('<ol id="timeline"'), page.text);
    ok(!/https?:\/\//.test(page.text), "the page loads nothing from elsewhere");
    deepStrictEqual((await get("/dashboard/app.js")).status, 200);
    deepStrictEqual((await get("/dashboard/style.css")).status, 200);
    const status = JSON.parse((await get("/dashboard/status.json")).text) as StatusSnapshot;
    deepStrictEqual(status.redis, { up: true });
    deepStrictEqual((await get("/metrics")).status, 200);
    deepStrictEqual((await get("/nothing")).status, 404);
  } finally {
    await feed.stop();
    await server.shutdown();
    await store.close();
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
