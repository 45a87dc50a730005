/**
 * The cluster shape of `bench:flows`: a throwaway Redis Cluster (three masters with a replica
 * each, `lab/redis_cluster.ts`) on this machine, one agent writing N flows over
 * {@link CLUSTER_VIPS} LB IPs (their hash tags spread them over the masters), then:
 *
 * - `cluster_flows_per_s`: flows/s from the first event to the last batch acknowledged;
 * - `cluster_write_spread`: the largest deviation of one master's script calls from the mean
 *   over the masters (`INFO commandstats`, EVALSHA + EVAL), as a fraction (0.2 = ±20 %) — with
 *   one hash tag per LB IP, the spread is the luck of the LB IPs' slots;
 * - `busy_vip_flows_per_s`, `busy_vip_write_spread`: the same write of N flows to ONE LB IP with
 *   {@link BUSY_BUCKETS} flow buckets (`node/lb/flows/buckets.ts`, `--flow-buckets`): its tags spread
 *   it over the masters (with one bucket a single master takes every write: spread 2.0);
 * - `cluster_propagation_p50_ms`/`_p99_ms`: agent A learns flows of every LB IP at a steady
 *   rate, the time until agent B's map has each (B polls the LB IPs' streams,
 *   `node/lb/flows/redis_store.ts` `CLUSTER_POLL_MS`).
 *
 * @module
 */

import { setImmediate } from "node:timers";
import { FlowSyncAgent } from "../node/lb/flows/sync_agent.ts";
import { flush } from "../node/lb/flows/_testing.ts";
import type { FlowEntry, FlowEvent } from "../node/bpf/flow.ts";
import { MemoryFlowTable } from "../node/lb/flows/table.ts";
import { connectRedisStore } from "../node/lb/flows/redis_store.ts";
import { Registry } from "../lib/metrics.ts";
import { startRedisCluster } from "../lab/redis_cluster.ts";

/** LB IPs of the cluster shape. */
export const CLUSTER_VIPS = 12;

/** Flow buckets of the busy-LB-IP write. */
export const BUSY_BUCKETS = 16;

const vips = Array.from({ length: CLUSTER_VIPS }, (_, i) => `10.0.110.${i + 1}`);
const SERVICES = {
  services: vips.map((vip, i) => ({
    name: `bench/c${i}`,
    frontends: [{ address: `${vip}:80/TCP` }],
    backends: ["10.0.1.2", "10.0.1.3", "10.0.1.4"].map((b) => ({ address: `${b}:8080/TCP` })),
  })),
};

function event(i: number, base: number, vipCount = CLUSTER_VIPS): FlowEvent {
  return {
    key: {
      saddr: (base + (i >>> 6)) >>> 0,
      daddr: (0x0a006e01 + (i % vipCount)) >>> 0,
      sport: 10000 + (i & 63),
      dport: 80,
      proto: 6,
    },
    backend: 0x0a000102 + (i % 3),
    serviceId: 1,
    tsNs: 0,
  };
}

function agent(
  url: string,
  node: string,
  table = new MemoryFlowTable(),
  queue = 100_000,
  busy = false,
) {
  const store = connectRedisStore({ url, ...(busy ? { buckets: BUSY_BUCKETS } : {}) });
  const a = new FlowSyncAgent(table, store, {
    node,
    services: SERVICES,
    vips: busy ? vips.slice(0, 1) : vips,
    queueCapacity: queue,
    registry: new Registry(),
    readBlockMs: 200,
  });
  return {
    a,
    async [Symbol.asyncDispose]() {
      await a.stop();
      await store.close();
    },
  };
}

/** Runs the cluster shape with `n` flows; `quick` shortens the propagation run. */
export async function clusterShape(n: number, quick: boolean): Promise<{
  flowsPerS: number;
  spread: number;
  busyFlowsPerS: number;
  busySpread: number;
  p50: number;
  p99: number;
}> {
  await using cluster = await startRedisCluster();
  const masters = async () => {
    const live = new Set((await cluster.topology()).filter((t) => t.master).map((t) => t.port));
    return cluster.running.filter((s) => live.has(s.port));
  };
  const calls = async () => {
    const out: number[] = [];
    for (const m of await masters()) {
      const text = await m.cli("info", "commandstats");
      let sum = 0;
      for (const r of text.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) sum += Number(r[1]);
      out.push(sum);
    }
    return out;
  };
  /** Writes `n` flows (to one LB IP when `busy`): flows/s and the per-master spread of calls. */
  const write = async (busy: boolean) => {
    const before = await calls();
    await using w = agent(cluster.url, busy ? "bench-cbusy" : "bench-cw", undefined, n, busy);
    await w.a.start();
    const t0 = performance.now();
    for (let i = 0; i < n; i += 4096) {
      for (let j = i; j < Math.min(n, i + 4096); j++) {
        w.a.learn(event(j, busy ? 0x0d000000 : 0x0b000000, busy ? 1 : CLUSTER_VIPS));
      }
      await new Promise((r) => setImmediate(r));
    }
    await flush(w.a);
    const perS = n / ((performance.now() - t0) / 1000);
    if (w.a.queued !== 0 || w.a.dropped !== 0) throw new Error("cluster write incomplete");
    const after = await calls();
    const per = after.map((c, i) => c - (before[i] ?? 0));
    const mean = per.reduce((s, x) => s + x, 0) / per.length;
    const spread = Math.max(...per.map((x) => Math.abs(x - mean))) / mean;
    console.log(
      busy
        ? `cluster: one LB IP in ${BUSY_BUCKETS} buckets, script calls per master ${per.join(", ")}`
        : `cluster: ${vips.length} LB IPs, script calls per master ${per.join(", ")}`,
    );
    return { perS, spread };
  };
  const { perS: flowsPerS, spread } = await write(false);
  const busy = await write(true);

  // Propagation, A → B, through the cluster (B polls its LB IPs' streams).
  const sent = new Map<number, number>();
  const delays: number[] = [];
  class Recording extends MemoryFlowTable {
    override putBatch(entries: readonly FlowEntry[]): void {
      const now = performance.now();
      for (const e of entries) {
        const t = sent.get(e.key.saddr);
        if (t !== undefined && e.key.sport === 1) delays.push(now - t);
      }
      super.putBatch(entries);
    }
  }
  {
    await using a = agent(cluster.url, "bench-ca");
    await using b = agent(cluster.url, "bench-cb", new Recording());
    await a.a.start();
    await b.a.start();
    for (let tick = 0; tick < (quick ? 10 : 40); tick++) {
      const t = performance.now();
      for (let i = 0; i < 500; i++) {
        const ev = event(tick * 500 + i, 0x0c000000);
        const saddr = (0x0c000000 + tick * 500 + i) >>> 0;
        sent.set(saddr, performance.now());
        a.a.learn({ ...ev, key: { ...ev.key, saddr, sport: 1 } });
      }
      await new Promise((r) => setTimeout(r, Math.max(0, 50 - (performance.now() - t))));
    }
    const deadline = Date.now() + 10_000;
    while (delays.length < sent.size && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  if (delays.length < sent.size) throw new Error(`cluster propagation: ${delays.length}`);
  delays.sort((x, y) => x - y);
  const q = (p: number) => delays[Math.min(delays.length - 1, Math.floor(p * delays.length))]!;
  return {
    flowsPerS,
    spread,
    busyFlowsPerS: busy.perS,
    busySpread: busy.spread,
    p50: q(0.5),
    p99: q(0.99),
  };
}
