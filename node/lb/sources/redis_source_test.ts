import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs } from "../../../lib/log.ts";
import { MemoryModelStore } from "../../../controller/model/_memory_model_store.ts";
import {
  HeldStore,
  MODEL_YAML,
  startTestAgent,
  startTestController,
  waitUntil,
} from "../../../controller/model/_testing.ts";

const WEB = "10.0.100.1:80/TCP", DNS = "10.0.100.2:53/UDP";

Deno.test("model: published services reach an agent's maps; an update and a delete follow", async () => {
  const store = new MemoryModelStore();
  await using ctl = await startTestController(store, MODEL_YAML);
  await using agent = await startTestAgent(store);
  await agent.source.ready();
  await agent.cp.waitFrontend(WEB);
  await agent.cp.waitFrontend(DNS);
  deepStrictEqual(agent.maps.services.size, 2);
  const txn = agent.cp.db.readTxn();
  deepStrictEqual(agent.cp.tables.services.all(txn).map((s) => [s.name, s.source, s.maglevSize]), [
    ["default/dns", "redis", 251],
    ["default/web", "redis", 0],
  ]);
  deepStrictEqual(agent.cp.tables.backends.all(txn).length, 3);
  deepStrictEqual(store.rev, 2);

  // One backend fewer for web, dns gone.
  ctl.file.load(`
services:
  - name: default/web
    frontends: [{ address: 10.0.100.1:80/TCP, portName: http }]
    backends: [{ address: 10.1.0.1:8080/TCP, portName: http }]
`);
  await waitUntil(() => agent.source.rev === 4, "rev 4 applied");
  await agent.cp.waitFrontend(DNS, { absent: true });
  await agent.cp.waitFrontend(WEB);
  deepStrictEqual(agent.maps.services.size, 1);
  deepStrictEqual(agent.maps.backends.size, 1);
  deepStrictEqual(agent.source.view?.services.map((s) => s.name), ["default/web"]);
});

Deno.test("model: a publisher restart with the same inputs writes nothing and changes no map entry", async () => {
  const store = new MemoryModelStore();
  await using agent = await startTestAgent(store);
  {
    await using _ctl = await startTestController(store, MODEL_YAML);
    await agent.source.ready();
    await agent.cp.waitFrontend(WEB);
    await agent.cp.waitFrontend(DNS);
  }
  const before = await agent.maps.dump();
  const writes = agent.writes(), storeWrites = store.writes, rev = store.rev;
  using logs = captureLogs();
  {
    await using ctl = await startTestController(store, MODEL_YAML);
    deepStrictEqual(ctl.pub.publisher.rev, rev);
    await new Promise((r) => setTimeout(r, 200)); // the agent's reads and epoch checks go on
  }
  deepStrictEqual(store.writes, storeWrites, "store writes");
  deepStrictEqual(store.rev, rev);
  deepStrictEqual(agent.writes(), writes, "map writes");
  deepStrictEqual(await agent.maps.dump(), before);
  const synced = logs.records.find((r) => r.msg === "model synced");
  deepStrictEqual([synced?.upserts, synced?.deletes, synced?.services], [0, 0, 2]);
  ok(!logs.records.some((r) => r.msg === "model published"), "nothing published");
});

Deno.test("model: an agent that missed trimmed changes re-reads the model (gap)", async () => {
  const mem = new MemoryModelStore();
  const held = new HeldStore(mem);
  await using ctl = await startTestController(mem, MODEL_YAML);
  await using agent = await startTestAgent(held);
  await agent.source.ready();
  await agent.cp.waitFrontend(DNS);
  held.hold();
  // The agent's next read is held (its read in flight, which could see the changes, is over).
  await waitUntil(() => held.parked === 1, "the agent's next read held");
  using logs = captureLogs();
  ctl.file.load(
    MODEL_YAML.replace("10.0.100.2:53/UDP", "10.0.100.3:53/UDP")
      .replace("10.1.0.2:8080/TCP", "10.1.0.9:8080/TCP"),
  );
  await waitUntil(() => mem.rev === 4, "two changes published");
  mem.trim(1);
  held.release();
  await waitUntil(() => agent.source.rev === 4, "the agent at rev 4");
  const reread = logs.records.find((r) => r.msg === "model re-read");
  deepStrictEqual(reread?.why, "gap: rev 3..3 missed");
  await agent.cp.waitFrontend(DNS, { absent: true });
  await agent.cp.waitFrontend("10.0.100.3:53/UDP");
  const addrs = agent.cp.tables.backends.all(agent.cp.db.readTxn()).map((b) => b.address).sort();
  deepStrictEqual(addrs, ["10.1.0.1:8080/TCP", "10.1.0.3:53/UDP", "10.1.0.9:8080/TCP"]);
});

Deno.test("model: store lost the model → agent keeps its rows, re-reads the republished one, no map write", async () => {
  const store = new MemoryModelStore();
  await using _ctl = await startTestController(store, MODEL_YAML, { epochCheckMs: 100 });
  await using agent = await startTestAgent(store);
  await agent.source.ready();
  await agent.cp.waitFrontend(WEB);
  await agent.cp.waitFrontend(DNS);
  const epoch = agent.source.epoch, writes = agent.writes(), before = await agent.maps.dump();
  using logs = captureLogs();
  store.restartEmpty();
  await waitUntil(() => agent.source.epoch !== epoch && store.epochToken !== "", "new epoch");
  const reread = logs.records.find((r) => r.msg === "model re-read");
  ok(reread?.why === "epoch changed" || reread?.why === "model gone", String(reread?.why));
  deepStrictEqual(agent.writes(), writes, "map writes");
  deepStrictEqual(await agent.maps.dump(), before);
  deepStrictEqual(store.entries.size, 2);
});

Deno.test("model: a bad entry is logged with its service and skipped; the rest applies", async () => {
  const store = new MemoryModelStore();
  await using _ctl = await startTestController(store, MODEL_YAML);
  await using agent = await startTestAgent(store);
  await agent.source.ready();
  using logs = captureLogs();
  const epoch = store.epochToken;
  await store.write(epoch, { op: "upsert", service: "default/json", entry: "{not json" });
  await store.write(epoch, {
    op: "upsert",
    service: "default/addr",
    entry: JSON.stringify({
      service: { name: "default/addr", frontends: [{ address: "10.0.100.9:99999/TCP" }] },
      backends: [],
    }),
  });
  await store.write(epoch, {
    op: "upsert",
    service: "default/ok",
    entry: JSON.stringify({
      service: { name: "default/ok", frontends: [{ address: "10.0.100.7:80/TCP" }] },
      backends: [{ address: "10.1.0.7:80/TCP" }],
    }),
  });
  await agent.cp.waitFrontend("10.0.100.7:80/TCP");
  const rejected = logs.records.filter((r) => r.msg === "model entry rejected, skipped");
  deepStrictEqual(rejected.map((r) => r.service), ["default/json", "default/addr"]);
  deepStrictEqual(agent.maps.services.size, 3);
  deepStrictEqual(agent.source.rev, store.rev);
});

Deno.test("model: no model yet → the agent's initializer stays pending (no prune) until it comes", async () => {
  const store = new MemoryModelStore();
  await using agent = await startTestAgent(store);
  await new Promise((r) => setTimeout(r, 100));
  const txn = agent.cp.db.readTxn();
  deepStrictEqual(agent.cp.tables.frontends.pendingInitializers(txn), ["redis"]);
  deepStrictEqual(agent.source.view, null);
  await using _ctl = await startTestController(store, MODEL_YAML);
  await agent.source.ready();
  deepStrictEqual(agent.cp.tables.frontends.pendingInitializers(agent.cp.db.readTxn()), []);
  await agent.cp.waitFrontend(WEB);
});

Deno.test("model: an agent started before the first model picks it up within its empty poll, not its error backoff", async () => {
  using logs = captureLogs();
  const store = new MemoryModelStore();
  // An error backoff of an hour: before emptyPollMs, an agent waiting for a model slept on it.
  // The empty poll is 100 ms; the bound below (20 s) is two orders of magnitude from both.
  await using agent = await startTestAgent(store, {
    retry: { minMs: 3_600_000, maxMs: 3_600_000 },
  });
  await waitUntil(
    () => logs.records.some((r) => r.msg === "model not in Redis: keeping the rows applied"),
    "the agent waiting for a model",
  );
  await using _ctl = await startTestController(store, MODEL_YAML);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), 20_000));
  try {
    const first = await Promise.race([agent.source.ready().then(() => "ready" as const), late]);
    deepStrictEqual(first, "ready", "the first model applied on the empty poll, not the backoff");
  } finally {
    clearTimeout(timer);
  }
  await agent.cp.waitFrontend(WEB);
});
