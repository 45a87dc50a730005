/**
 * The flow store over TLS to a real redis-server (`--tls-port`), verified against a test CA.
 * Certificates in testdata/tls/ are test-only (valid 2000–2100, SAN 127.0.0.1).
 * Run: `deno test -P=redis tests/redis/tls_test.ts`.
 */
import { FlowSyncAgent } from "../../node/lb/flows/sync_agent.ts";
import { makeFlowKey } from "../../node/bpf/flow.ts";
import { MemoryFlowTable } from "../../node/lb/flows/table.ts";
import { connectRedisStore } from "../../node/lb/flows/redis_store.ts";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { freePort } from "../../lab/redis_server.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { services, VIP } from "./_flow_nodes.ts";
const TLS_DIR = new URL("./testdata/tls/", import.meta.url).pathname;

/** A redis-server serving TLS only, stopped on dispose. */
async function startTlsRedis(): Promise<{ port: number } & AsyncDisposable> {
  const port = freePort();
  const dir = await Deno.makeTempDir({ prefix: `hf-redis-${Deno.pid}-tls-` });
  const child = new Deno.Command("redis-server", {
    args: [
      "--port",
      "0",
      "--tls-port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--tls-cert-file",
      `${TLS_DIR}server.pem`,
      "--tls-key-file",
      `${TLS_DIR}server.key`,
      "--tls-ca-cert-file",
      `${TLS_DIR}ca.pem`,
      "--tls-auth-clients",
      "no",
      "--dir",
      dir,
      "--save",
      "",
      "--appendonly",
      "no",
      "--protected-mode",
      "no",
      "--logfile",
      `${dir}/redis.log`,
    ],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      break;
    } catch (err) {
      if (Date.now() > deadline) {
        child.kill("SIGKILL");
        await child.status;
        throw new Error(
          `TLS redis-server on port ${port} did not listen: ${(err as Error).message}`,
        );
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  return {
    port,
    async [Symbol.asyncDispose]() {
      try {
        child.kill("SIGKILL");
      } catch { /* exited */ }
      await child.status;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

Deno.test("redis tls: agents sync flows over rediss:// verified with a CA; a wrong CA is refused", async () => {
  using logs = captureLogs();
  await using redis = await startTlsRedis();
  const ca = await Deno.readTextFile(`${TLS_DIR}ca.pem`);
  const url = `rediss://127.0.0.1:${redis.port}`;
  const storeA = connectRedisStore({ url, tls: { ca } });
  const storeB = connectRedisStore({ url: `redis://127.0.0.1:${redis.port}`, tls: { ca } });
  const a = new FlowSyncAgent(new MemoryFlowTable(), storeA, {
    node: "lb-a",
    services: services(),
    vips: [VIP],
    registry: new Registry(),
    readBlockMs: 100,
  });
  const tableB = new MemoryFlowTable();
  const b = new FlowSyncAgent(tableB, storeB, {
    node: "lb-b",
    services: services(),
    vips: [VIP],
    registry: new Registry(),
    readBlockMs: 100,
  });
  try {
    await a.start();
    await b.start();
    const key = makeFlowKey({ saddr: "10.0.0.1", daddr: VIP, sport: 1, dport: 443, proto: 6 });
    a.learn({ key, backend: parseIpv4("10.0.1.2"), serviceId: 1, tsNs: 0 });
    const deadline = Date.now() + 15_000; // ms normally: only how long a failure takes
    while (tableB.get(key) === undefined) {
      if (Date.now() > deadline) throw new Error("flow did not reach B over TLS");
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    await a.stop();
    await b.stop();
    await storeA.close();
    await storeB.close();
  }
  // Without the test CA the server certificate does not verify: no connection, no data.
  const untrusted = connectRedisStore({ url, connectTimeoutMs: 500 });
  try {
    let msg = "";
    try {
      await untrusted.instanceId([VIP]);
    } catch (e) {
      msg = (e as Error).message;
    }
    if (!msg.includes("not connected")) throw new Error(`expected a refused connection: "${msg}"`);
  } finally {
    await untrusted.close();
  }
  const refused = logs.records.find((r) =>
    r.msg === "redis connection lost" && /certificate/i.test(String(r.err))
  );
  if (!refused) {
    throw new Error(`no certificate error logged: ${JSON.stringify(logs.records.slice(-3))}`);
  }
});
