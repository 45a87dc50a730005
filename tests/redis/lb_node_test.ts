/**
 * An LB node (node/flows/lb_node.ts) with the control plane following a services file and flow
 * sync through a real redis-server; in-memory datapath. Backend removal purges its flows on
 * every node; backend addition keeps existing flows. Run: `deno test -P=redis tests/redis/`.
 */
import { type LbNode, startLbNode } from "../../node/flows/lb_node.ts";
import { connectRedisStore } from "../../node/flows/redis_store.ts";
import { flowField, makeFlowKey, parseIpv4 } from "../../node/flows/flow.ts";
import { captureLogs } from "../../node/log.ts";
import { Registry } from "../../node/metrics.ts";
import { startRedis } from "../harness/redis.ts";

const VIP = "10.0.100.1";

async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function writeServices(path: string, backends: string[]): Promise<void> {
  const config = {
    services: [{
      name: "default/web",
      flowKeyMode: "five-tuple",
      frontends: [{ address: `${VIP}:8080/TCP`, portName: "http" }],
      backends: backends.map((b) => ({ address: `${b}:8080/TCP`, portName: "http" })),
    }],
  };
  await Deno.writeTextFile(`${path}.tmp`, JSON.stringify(config));
  await Deno.rename(`${path}.tmp`, path);
}

Deno.test("lb node: services file drives the maps; a removed backend's flows are purged everywhere", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  const dir = await Deno.makeTempDir({ prefix: `hf-lbnode-${Deno.pid}-` });
  const path = `${dir}/services.json`;
  const nodes: LbNode[] = [];
  const store = connectRedisStore({ url: redis.url });
  try {
    await writeServices(path, ["10.3.1.2", "10.3.2.2"]);
    for (const name of ["lb1", "lb2"]) {
      nodes.push(
        await startLbNode({
          nodeName: name,
          vips: [], // from the services file
          datapath: "memory",
          redis: { url: redis.url },
          config: path,
          configPollMs: 50,
          registry: new Registry(),
        }),
      );
    }
    const [a, b] = nodes as [LbNode, LbNode];
    if (a.vips.join() !== VIP) throw new Error(`LB IPs from the file: ${a.vips}`);
    const keys = Array.from(
      { length: 20 },
      (_, i) =>
        makeFlowKey({ saddr: 0x0a010000 + i, daddr: VIP, sport: 40000, dport: 8080, proto: 6 }),
    );
    keys.forEach((key, i) => {
      const backend = parseIpv4(i % 2 ? "10.3.1.2" : "10.3.2.2");
      a.table.put(key, { backend, flags: 0, lastSeenNs: a.table.nowNs() });
      a.agent!.learn({ key, backend, serviceId: 1, tsNs: 0 });
    });
    await until("b has all 20", () => keys.every((k) => b.table.get(k) !== undefined));

    // A backend is added: nothing moves.
    await writeServices(path, ["10.3.1.2", "10.3.2.2", "10.3.3.2"]);
    await until(
      "reload",
      () => logs.records.filter((r) => r.msg === "services reloaded").length >= 2,
    );
    await new Promise((r) => setTimeout(r, 200));
    if (!keys.every((k) => b.table.get(k) !== undefined)) throw new Error("flows lost on add");

    // A backend goes away: its 10 flows are purged from Redis and both maps, the rest stay.
    await writeServices(path, ["10.3.2.2", "10.3.3.2"]);
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
    for (const n of nodes) await n.close();
    await store.close();
    await Deno.remove(dir, { recursive: true });
  }
});
