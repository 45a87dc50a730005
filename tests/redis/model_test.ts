/**
 * The LB model through a real redis-server (ACL user limited to `hf:*`, no @dangerous): the
 * controller's publisher and an agent's RedisModelSource over in-memory BPF maps.
 * Run: `deno test -P=redis tests/redis/model_test.ts`.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { startRedis } from "../../lab/redis_server.ts";
import {
  HeldStore,
  MODEL_YAML,
  startTestAgent,
  startTestController,
  waitUntil,
} from "../../controller/model/_testing.ts";
import { connectModelStore, modelKeys, type RedisModelStore } from "../../controller/model/mod.ts";

const WEB = "10.0.100.1:80/TCP", DNS = "10.0.100.2:53/UDP";
const USER = { name: "holdfast", password: "pw", rules: ["~hf:*", "+@all", "-@dangerous"] };

async function withRedis(
  fn: (
    open: () => RedisModelStore,
    redis: Awaited<ReturnType<typeof startRedis>>,
  ) => Promise<void>,
): Promise<void> {
  await using redis = await startRedis({ aclUsers: [USER] });
  const stores: RedisModelStore[] = [];
  const open = () => {
    const s = connectModelStore({ url: redis.url, username: USER.name, password: USER.password });
    stores.push(s);
    return s;
  };
  try {
    await fn(open, redis);
  } finally {
    for (const s of stores) await s.close();
  }
}

Deno.test("model in Redis: publish, update, delete reach the agent; keys and values as documented", () =>
  withRedis(async (open, redis) => {
    const ctlStore = open();
    await using ctl = await startTestController(ctlStore, MODEL_YAML);
    await using agent = await startTestAgent(open());
    await agent.source.ready();
    await agent.cp.waitFrontend(WEB);
    await agent.cp.waitFrontend(DNS);
    const k = modelKeys();
    deepStrictEqual(await redis.cli("GET", k.rev), "2\n");
    deepStrictEqual((await redis.cli("HKEYS", k.services)).trim().split("\n").sort(), [
      "default/dns",
      "default/web",
    ]);
    const dns = JSON.parse(await redis.cli("HGET", k.services, "default/dns"));
    deepStrictEqual(dns, {
      service: {
        name: "default/dns",
        flowKeyMode: "client-ip",
        maglevSize: 251,
        frontends: [{ address: DNS, portName: "" }],
      },
      backends: [{ address: "10.1.0.3:53/UDP", portName: "", state: "active", weight: 100 }],
    });
    ctl.file.load(MODEL_YAML.slice(0, MODEL_YAML.indexOf("  - name: default/dns")));
    await agent.cp.waitFrontend(DNS, { absent: true });
    deepStrictEqual(agent.source.rev, 3);
    deepStrictEqual(agent.maps.services.size, 1);
  }));

Deno.test("model in Redis: a controller restart does not change a single map entry on the agent", () =>
  withRedis(async (open) => {
    await using agent = await startTestAgent(open());
    {
      await using _ctl = await startTestController(open(), MODEL_YAML);
      await agent.source.ready();
      await agent.cp.waitFrontend(WEB);
      await agent.cp.waitFrontend(DNS);
    }
    const before = await agent.maps.dump();
    const writes = agent.writes(), rev = agent.source.rev;
    ok(writes > 0, "the first publication wrote the maps");
    using logs = captureLogs();
    {
      await using ctl = await startTestController(open(), MODEL_YAML);
      deepStrictEqual(ctl.pub.publisher.rev, rev);
      await new Promise((r) => setTimeout(r, 300));
    }
    ok(!logs.records.some((r) => r.msg === "model published"), "nothing published");
    deepStrictEqual(agent.source.rev, rev);
    deepStrictEqual(agent.writes(), writes, "map writes");
    deepStrictEqual(await agent.maps.dump(), before);
  }));

Deno.test("model in Redis: a trimmed stream makes a lagging agent re-read", () =>
  withRedis(async (open, redis) => {
    await using ctl = await startTestController(open(), MODEL_YAML);
    const held = new HeldStore(open());
    await using agent = await startTestAgent(held);
    await agent.source.ready();
    await agent.cp.waitFrontend(DNS);
    held.hold();
    // The agent's next read is held (its read in flight, which could see the changes, is over).
    await waitUntil(() => held.parked === 1, "the agent's next read held");
    using logs = captureLogs();
    ctl.file.load(MODEL_YAML.replace("10.0.100.2:53/UDP", "10.0.100.3:53/UDP"));
    await waitUntil(async () => (await redis.cli("GET", modelKeys().rev)) === "3\n", "rev 3");
    ctl.file.load(MODEL_YAML.replace("10.0.100.2:53/UDP", "10.0.100.4:53/UDP"));
    await waitUntil(async () => (await redis.cli("GET", modelKeys().rev)) === "4\n", "rev 4");
    await redis.cli("XTRIM", modelKeys().changes, "MAXLEN", "1");
    held.release();
    await agent.cp.waitFrontend("10.0.100.4:53/UDP");
    deepStrictEqual(
      logs.records.find((r) => r.msg === "model re-read")?.why,
      "gap: rev 3..3 missed",
    );
    deepStrictEqual(agent.source.rev, 4);
    deepStrictEqual(agent.maps.services.size, 2);
  }));

Deno.test("model in Redis: Redis restarted empty → agent keeps serving, re-reads the republished model, no map write", () =>
  withRedis(async (open, redis) => {
    await using _ctl = await startTestController(open(), MODEL_YAML, { epochCheckMs: 200 });
    await using agent = await startTestAgent(open());
    await agent.source.ready();
    await agent.cp.waitFrontend(WEB);
    await agent.cp.waitFrontend(DNS);
    const epoch = agent.source.epoch, writes = agent.writes(), before = await agent.maps.dump();
    using logs = captureLogs();
    await redis.restart();
    await waitUntil(() => agent.source.epoch !== epoch, "the agent on the new epoch", 15_000);
    ok(logs.records.some((r) => r.msg === "model re-read"), "re-read logged");
    deepStrictEqual(agent.writes(), writes, "map writes");
    deepStrictEqual(await agent.maps.dump(), before);
    deepStrictEqual(agent.source.view?.services.length, 2);
  }));

Deno.test("model in Redis: a bad entry is logged naming its service and skipped", () =>
  withRedis(async (open, redis) => {
    await using _ctl = await startTestController(open(), MODEL_YAML);
    await using agent = await startTestAgent(open());
    await agent.source.ready();
    using logs = captureLogs();
    const store = open();
    const epoch = await store.epoch();
    await store.write(epoch, { op: "upsert", service: "default/bad", entry: "{oops" });
    await store.write(epoch, {
      op: "upsert",
      service: "default/ok",
      entry: JSON.stringify({
        service: { name: "default/ok", frontends: [{ address: "10.0.100.7:80/TCP" }] },
        backends: [{ address: "10.1.0.7:80/TCP" }],
      }),
    });
    await agent.cp.waitFrontend("10.0.100.7:80/TCP");
    const bad = logs.records.find((r) => r.msg === "model entry rejected, skipped");
    deepStrictEqual(bad?.service, "default/bad");
    deepStrictEqual(agent.maps.services.size, 3);
    // A stale epoch cannot write.
    let refused = "";
    await store.write("stale", { op: "delete", service: "default/ok" }).catch((e) =>
      refused = e.name
    );
    deepStrictEqual(refused, "ModelEpochError");
    deepStrictEqual(await redis.cli("HEXISTS", modelKeys().services, "default/ok"), "1\n");
  }));

Deno.test("agent --model redis: ready with the model's frontends in its maps; follows their LB IPs and changes", () =>
  withRedis(async (open, redis) => {
    const { main } = await import("../../node/lb/main.ts");
    const { freePort } = await import("../../lab/redis_server.ts");
    await using ctl = await startTestController(open(), MODEL_YAML);
    using logs = captureLogs();
    const port = freePort();
    const metric = async (line: string) => {
      try {
        return (await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).includes(line);
      } catch {
        return false;
      }
    };
    const stop = new AbortController();
    const exit = main([
      "--model",
      "redis",
      "--redis",
      `redis://${USER.name}:${USER.password}@127.0.0.1:${redis.port}`,
      "--node-name",
      "lb-m",
      "--datapath",
      "memory",
      "--listen",
      `127.0.0.1:${port}`,
    ], { signal: stop.signal });
    try {
      await waitUntil(
        () => logs.records.some((r) => r.msg === "ready" && r.node === "lb-m"),
        "ready",
      );
      const ready = logs.records.find((r) => r.msg === "ready" && r.node === "lb-m");
      deepStrictEqual(ready?.vips, ["10.0.100.1", "10.0.100.2"]);
      ok(await metric('holdfast_lb_frontends{status="done"} 2'), "two frontends programmed");
      // A new service in the model: programmed, and its LB IP followed.
      ctl.file.load(
        MODEL_YAML + "  - name: default/new\n    frontends: [10.0.100.5:80/TCP]\n" +
          "    backends: [10.1.0.5:80/TCP]\n",
      );
      await waitUntil(() => metric('holdfast_lb_frontends{status="done"} 3'), "third frontend");
      await waitUntil(
        () => logs.records.some((r) => r.msg === "following LB IP" && r.vip === "10.0.100.5"),
        "10.0.100.5 followed",
      );
    } finally {
      stop.abort();
    }
    deepStrictEqual(await exit, 0);
  }));
