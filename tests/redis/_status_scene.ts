/**
 * A scene for the status tests (`status_test.ts`, `dashboard_browser_test.ts`), all real parts
 * against one redis-server: the model the controller publishes (one service, its policy
 * module), four flows a peer LB node learned, an LB agent (`main.ts agent`, in-process, in-memory
 * datapath) serving the LB IP with `/metrics`, an egress NAT pod's lease, and a health report of
 * an LB node whose `/metrics` is not read.
 *
 * @module
 */

import { main as agentMain } from "../../node/lb/main.ts";
import { connectModelStore, encodeEntry, sha256Hex } from "../../controller/model/mod.ts";
import { appendReport } from "../../controller/model/reports.ts";
import { type AcquireResult, RedisLeaseStore } from "../../controller/egress/lease.ts";
import { FlowSyncAgent } from "../../node/lb/flows/sync_agent.ts";
import { MemoryFlowTable } from "../../node/lb/flows/table.ts";
import { connectRedisStore } from "../../node/lb/flows/redis_store.ts";
import { flush } from "../../node/lb/flows/_testing.ts";
import type { LogRecord } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { freePort } from "../../lab/redis_server.ts";
import { event, until, VIP } from "./_flow_nodes.ts";

/** The service of the scene. */
export const WEB = {
  name: "default/web",
  frontends: [{ address: `${VIP}:80/TCP` }],
  backends: [{ address: "10.0.1.2:8080/TCP" }, { address: "10.0.1.3:8080/TCP" }],
};
/** The egress address nat1 holds. */
export const EGRESS_ADDR = "198.18.0.100";
/** The EgressNAT. */
export const EGRESS = "ns/nat";

/** The running scene. */
export interface StatusScene extends AsyncDisposable {
  readonly conn: RedisConnection;
  readonly leases: RedisLeaseStore;
  readonly lease: AcquireResult & { acquired: true };
  /** SHA-256 of the policy module in the model (and served by the agent). */
  readonly sha256: string;
  /** The agent's /metrics URL. */
  readonly agentUrl: string;
}

/** Sets the scene up in the Redis at `url`; `logs` is the test's captured log records. */
export async function startStatusScene(
  url: string,
  logs: { records: LogRecord[] },
): Promise<StatusScene> {
  const cleanup: (() => Promise<unknown>)[] = [];
  const conn = new RedisConnection({ url, logComponent: "test" });
  cleanup.push(() => conn.close());
  try {
    const model = connectModelStore({ url });
    cleanup.push(() => model.close());
    const wasm = await Deno.readFile(
      new URL("../../policy-as/build/release.wasm", import.meta.url),
    );
    const sha256 = await sha256Hex(wasm);
    const epoch = await model.initEpoch("epoch-1");
    const entry = encodeEntry({
      service: { name: WEB.name, frontends: WEB.frontends },
      backends: WEB.backends,
    });
    await model.write(epoch, { op: "upsert", service: WEB.name, entry });
    await model.writePolicy(epoch, { sha256, wasm });

    // Flows learned by a peer LB node: three to 10.0.1.2, one to 10.0.1.3.
    const flowStore = connectRedisStore({ url });
    cleanup.push(() => flowStore.close());
    const peer = new FlowSyncAgent(new MemoryFlowTable(), flowStore, {
      node: "lb-a",
      services: { services: [WEB] },
      vips: [VIP],
      registry: new Registry(),
      readBlockMs: 100,
    });
    await peer.start();
    cleanup.push(() => peer.stop());
    const flows: [number, string][] = [[1, "10.0.1.2"], [2, "10.0.1.2"], [3, "10.0.1.2"], [
      4,
      "10.0.1.3",
    ]];
    for (const [n, backend] of flows) peer.learn(event("10.0.0.1", 40000 + n, backend));
    await flush(peer);

    // nat1 holds the egress address; the EgressNAT's config names a second, free one.
    const leases = new RedisLeaseStore(conn, EGRESS);
    const lease = await leases.acquire(EGRESS_ADDR, "nat1/boot-a", 60_000);
    if (!lease.acquired) throw new Error(`nat1 could not take ${EGRESS_ADDR}`);
    await conn.command([
      "HSET",
      `hf:egress:{${EGRESS}}:config`,
      "json",
      JSON.stringify({ addresses: [{ address: EGRESS_ADDR }, { address: "198.18.0.101" }] }),
    ]);
    // An LB node whose /metrics is not read reported 10.0.1.3 unhealthy.
    await appendReport(conn, {
      kind: "health",
      node: "lb-c",
      service: WEB.name,
      backend: "10.0.1.3:8080",
      state: "unhealthy",
      reason: "3 failed probes (connect refused)",
    });

    // An LB agent serving the LB IP, with /metrics.
    const dir = await Deno.makeTempDir({ prefix: "hf-status-scene-" });
    cleanup.push(() => Deno.remove(dir, { recursive: true }));
    const config = `${dir}/services.json`;
    await Deno.writeTextFile(config, JSON.stringify({ services: [WEB] }));
    const port = freePort();
    const stop = new AbortController();
    const agent = agentMain([
      ...["--config", config, "--redis", url, "--node-name", "lb-b"],
      ...["--datapath", "memory", "--listen", `127.0.0.1:${port}`, "--health", "off"],
    ], { signal: stop.signal });
    cleanup.push(async () => {
      stop.abort();
      await agent;
    });
    await until(
      "agent ready",
      () => logs.records.some((r) => r.msg === "ready" && r.node === "lb-b"),
    );
    const close = async () => {
      for (const fn of cleanup.reverse()) await fn().catch(() => {});
    };
    return {
      conn,
      leases,
      lease,
      sha256,
      agentUrl: `http://127.0.0.1:${port}/metrics`,
      [Symbol.asyncDispose]: close,
    };
  } catch (err) {
    for (const fn of cleanup.reverse()) await fn().catch(() => {});
    throw err;
  }
}
