/**
 * The model's settings (issue 10) through a real redis-server, with `main.ts agent --model redis`
 * (in-memory datapath): a node `lbNodes` leaves out programs no frontend, answers `/readyz` 503
 * and says why; selected again it programs them and gets ready. The settings key and its stream
 * entry are as documented (`controller/model/schema.ts`).
 * Run: `deno test -P=redis tests/redis/model_settings_test.ts`.
 */
import { deepStrictEqual } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { freePort, startRedis } from "../../lab/redis_server.ts";
import { MODEL_YAML, startTestController, waitUntil } from "../../controller/model/_testing.ts";
import { connectModelStore, modelKeys } from "../../controller/model/mod.ts";

Deno.test("agent --model redis: left out by lbNodes it serves nothing and is not ready; selected again it serves", async () => {
  const { main } = await import("../../node/lb/main.ts");
  await using redis = await startRedis();
  const store = connectModelStore({ url: redis.url });
  using logs = captureLogs();
  const stop = new AbortController();
  let exit: Promise<number> | undefined;
  try {
    await using ctl = await startTestController(store, MODEL_YAML);
    ctl.pub.setSettings({ encapPort: 7000, lbNodes: ["lb-a"] });
    await waitUntil(async () => (await store.snapshot()).settings !== "", "settings written");
    const k = modelKeys();
    deepStrictEqual(await redis.cli("GET", k.settings), '{"encapPort":7000,"lbNodes":["lb-a"]}\n');

    const port = freePort();
    const get = async (path: string) => {
      try {
        const r = await fetch(`http://127.0.0.1:${port}${path}`);
        return { status: r.status, text: await r.text() };
      } catch {
        return { status: 0, text: "" };
      }
    };
    exit = main([
      "--model",
      "redis",
      "--redis",
      redis.url,
      "--node-name",
      "lb-b",
      "--datapath",
      "memory",
      "--no-flow-sync",
      "--listen",
      `127.0.0.1:${port}`,
    ], { signal: stop.signal });
    await waitUntil(() => logs.records.some((r) => r.msg === "ready"), "agent started");
    const line = "not an LB node: lbNodeSelector does not select node lb-b";
    deepStrictEqual(logs.records.some((r) => r.msg === line), true, line);
    deepStrictEqual((await get("/readyz")).status, 503);
    const metrics = (await get("/metrics")).text;
    deepStrictEqual(
      metrics.includes("\nholdfast_lb_services 0\n"),
      true,
      "no service in the tables",
    );
    deepStrictEqual(
      metrics.includes('holdfast_lb_frontends{status="done"} 0'),
      true,
      "none programmed",
    );
    deepStrictEqual((await get("/metrics")).text.includes("holdfast_agent_lb_node 0"), true);

    ctl.pub.setSettings({ encapPort: 7000, lbNodes: ["lb-a", "lb-b"] });
    await waitUntil(async () => (await get("/readyz")).status === 200, "ready once selected");
    await waitUntil(
      async () => (await get("/metrics")).text.includes('holdfast_lb_frontends{status="done"} 2'),
      "both frontends programmed",
    );
    deepStrictEqual(
      logs.records.some((r) => r.msg === "LB node: lbNodeSelector selects node lb-b"),
      true,
    );
  } finally {
    stop.abort();
    if (exit) deepStrictEqual(await exit, 0);
    await store.close();
  }
});
