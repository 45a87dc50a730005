/**
 * Shared pieces of the flow-sync tests against a real redis-server: LB nodes made of a
 * FlowSyncAgent over an in-memory flow table, flow events, and a bounded wait.
 *
 * @module
 */
import { FlowSyncAgent, type FlowSyncAgentOptions } from "../../node/lb/flows/sync_agent.ts";
import { type AnyFlowEvent, type FlowEvent, makeFlowKey } from "../../node/bpf/flow.ts";
import { MemoryFlowTable } from "../../node/lb/flows/table.ts";
import {
  connectRedisStore,
  type FlowStoreOptions,
  type RedisFlowStore,
} from "../../node/lb/flows/redis_store.ts";
import { Registry } from "../../lib/metrics.ts";
import type { RedisServer } from "../../lab/redis_server.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

/** The LB IP the tests use unless they say otherwise. */
export const VIP = "10.0.100.1";

/** A second LB IP. */
export const VIP2 = "10.0.100.2";

/**
 * The services config the test agents check flows from Redis against: {@link VIP} and
 * {@link VIP2} on 80/TCP and 443/TCP, served by 10.0.1.1–20 and 10.0.2.1–20 (`backends`).
 */
export function services(
  backends: readonly string[] = [...range("10.0.1.", 20), ...range("10.0.2.", 20)],
) {
  return {
    services: [VIP, VIP2].map((vip, i) => ({
      name: `default/web${i}`,
      frontends: [{ address: `${vip}:80/TCP` }, { address: `${vip}:443/TCP` }],
      backends: backends.map((b) => ({ address: `${b}:8080/TCP` })),
    })),
  };
}

function range(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);
}

/** Polls `cond` every 10 ms until it holds; throws after `ms`. */
export async function until(
  what: string,
  cond: () => boolean | Promise<boolean>,
  ms = 10_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A new-flow event as the datapath reports it: TCP to `vip`:80. */
export function event(
  saddr: number | string,
  sport: number,
  backend: string,
  vip: string = VIP,
): FlowEvent {
  return {
    key: makeFlowKey({ saddr, daddr: vip, sport, dport: 80, proto: 6 }),
    backend: parseIpv4(backend),
    serviceId: 1,
    tsNs: 0,
  };
}

/**
 * A new-flow event of an IPv6 LB IP: TCP from `[saddr]:sport` to `[vip]:80`; `backend` IPv6 text
 * or dotted IPv4.
 */
export function event6(saddr: string, sport: number, backend: string, vip: string): AnyFlowEvent {
  return {
    key: { saddr, daddr: vip, sport, dport: 80, proto: 6 },
    backend: backend.includes(":") ? backend : parseIpv4(backend),
    serviceId: 1,
    tsNs: 0,
  };
}

/** One LB node's flow-sync side. */
export interface Node {
  agent: FlowSyncAgent;
  table: MemoryFlowTable;
  store: RedisFlowStore;
  registry: Registry;
}

/** Options of {@linkcode node}: agent options (default LB IPs `[VIP]`), store options, start. */
export type NodeOptions = Partial<FlowSyncAgentOptions> & {
  store?: Partial<FlowStoreOptions>;
  /** Start the agent (restore, follow) before returning (default true). */
  start?: boolean;
};

/** An LB node whose agent shares `redis`; dispose to stop it. */
export async function node(
  name: string,
  redis: Pick<RedisServer, "url">,
  options: NodeOptions = {},
): Promise<Node & AsyncDisposable> {
  const { store: storeOptions, start = true, ...agentOptions } = options;
  const table = new MemoryFlowTable();
  const store = connectRedisStore({ url: redis.url, ...storeOptions });
  const registry = new Registry();
  const agent = new FlowSyncAgent(table, store, {
    node: name,
    vips: [VIP],
    readBlockMs: 100,
    flushIntervalMs: 2,
    registry,
    services: services(),
    ...agentOptions,
  });
  if (start) await agent.start();
  return {
    agent,
    table,
    store,
    registry,
    async [Symbol.asyncDispose]() {
      await agent.stop();
      await store.close();
    },
  };
}

/** A flow the datapath created: in the map, and its event to the agent. */
export function datapathLearns(n: Node, ev: FlowEvent | AnyFlowEvent): void {
  n.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: n.table.nowNs() });
  n.agent.learn(ev);
}
