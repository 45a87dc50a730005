/**
 * Flow-state benchmark (`deno task bench:flows`), all in one run against one throwaway
 * redis-server on this machine:
 *
 * 1. baseline: `redis-benchmark -t set -P 16 -q` (SET requests/s, 16-deep pipelines, 50 clients);
 * 2. flows/s one agent writes to Redis: N new-flow events handed to a {@link FlowSyncAgent}
 *    (pipelined batches through the learn script: HSETNX + last-seen ZADD + one stream entry per
 *    batch), timed from the first event to the last batch acknowledged;
 * 3. restore: a fresh agent starts and restores all N flows (HSCAN pages → flow table batch
 *    puts) before it reports ready — into a real BPF flow map (`hf_flows` of the datapath's
 *    object, unpinned, sized for N) when FFI and root allow, else into the in-memory table; the
 *    `restore_table` field says which.
 *
 * Steps 1 and 2 alternate for `FLOWS_BENCH_ROUNDS` rounds (default 3) and the medians are
 * reported, so both see the same machine noise.
 *
 * 4. propagation: agent A learns 20,000 flows/s for 2 s; per flow, the time until agent B's
 *    flow map has it (p50/p99), i.e. how stale a peer's map can be when ECMP moves a new flow.
 *
 * 5. cluster shape (`flows_cluster.ts`): the same agent against a Redis Cluster of three masters
 *    with a replica each, flows over 12 LB IPs: flows/s, per-master write spread, propagation.
 *
 * Last line: one JSON object with `flows_per_s`, `redis_set_p16_per_s`, `restore_1m_s`, and
 * the cluster shape's `cluster_flows_per_s`, `cluster_write_spread`, `busy_vip_flows_per_s`,
 * `busy_vip_write_spread` (one LB IP in 16 flow buckets), `cluster_propagation_*`.
 * `FLOWS_BENCH_N` (default 1,000,000) sets N; restore_1m_s is scaled to 1M when N differs.
 * `--quick` (a smoke run of a few seconds, for `./hf test bench`): N = 10,000, one round, a
 * 50,000-request redis-benchmark, 0.5 s of propagation; the figures mean nothing.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import { FlowSyncAgent } from "../node/lb/flows/sync_agent.ts";
import { flush } from "../node/lb/flows/_testing.ts";
import type { FlowEntry, FlowEvent } from "../node/bpf/flow.ts";
import { type FlowTable, MemoryFlowTable } from "../node/lb/flows/table.ts";
import { connectRedisStore } from "../node/lb/flows/redis_store.ts";
import { setLogLevel } from "../lib/log.ts";
import { vipKeys } from "../node/lb/flows/schema.ts";
import { createClient } from "redis";
import { Registry } from "../lib/metrics.ts";
import { readCommandLineOrExit } from "../lib/args.ts";
import { startRedis } from "../lab/redis_server.ts";
import { median } from "./_stats.ts";
import { clusterShape } from "./flows_cluster.ts";

const OPTIONS = {
  command: "bench:flows",
  usage: `usage: deno task bench:flows [--quick]
  Flow-state benchmark against a throwaway redis-server. Environment: FLOWS_BENCH_N (1000000),
  FLOWS_BENCH_ROUNDS (3), FLOWS_BENCH_BATCH (2000), FLOWS_BENCH_INFLIGHT (4),
  FLOWS_BENCH_PROP_RATE (20000). --quick: seconds, tiny sizes (a smoke test, not a figure).`,
  options: { quick: { type: "boolean" } },
} as const;
const QUICK = import.meta.main &&
  readCommandLineOrExit(Deno.args, OPTIONS, ({ values }) => values.quick === true);
const N = Number(Deno.env.get("FLOWS_BENCH_N") ?? (QUICK ? 10_000 : 1_000_000));
const VIP = "10.0.100.1";
const VIP_ADDR = 0x0a006401;
const PROP_VIP = "10.0.100.2"; // apart from the restore's LB IP

/** The services the benchmark's flows belong to (flows from Redis are checked against it). */
const SERVICES = {
  services: [VIP, PROP_VIP].map((vip, i) => ({
    name: `bench/web${i}`,
    frontends: [{ address: `${vip}:80/TCP` }],
    backends: ["10.0.1.2", "10.0.1.3", "10.0.1.4"].map((b) => ({ address: `${b}:8080/TCP` })),
  })),
};

async function redisBenchmark(port: number): Promise<number> {
  const out = await new Deno.Command("redis-benchmark", {
    args: ["-p", String(port), "-t", "set", "-P", "16", "-q", "-n", QUICK ? "50000" : "1000000"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  // "SET: 512820.53 requests per second, p50=1.375 msec" (after \r-separated progress lines)
  const m = /SET: ([\d.]+) requests per second/.exec(text);
  if (!out.success || !m) {
    throw new Error(
      `redis-benchmark failed: ${new TextDecoder().decode(out.stderr).trim() || text.trim()}`,
    );
  }
  return Number(m[1]);
}

function events(n: number): FlowEvent[] {
  const out: FlowEvent[] = new Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = {
      key: {
        saddr: (0x0b000000 + (i >>> 6)) >>> 0,
        daddr: VIP_ADDR,
        sport: 10000 + (i & 63),
        dport: 80,
        proto: 6,
      },
      backend: 0x0a000102 + (i % 3),
      serviceId: 1,
      tsNs: 0,
    };
  }
  return out;
}

async function clearFlows(url: string): Promise<void> {
  const client = createClient({ url });
  await client.connect();
  const k = vipKeys(VIP);
  await client.del([k.flows, k.seen, k.events, k.instance]);
  client.destroy();
}

/** Writes `evs` through one agent; returns flows/s from first event to last acknowledgement. */
async function agentWrite(url: string, evs: FlowEvent[], node: string): Promise<number> {
  const store = connectRedisStore({ url });
  const agent = new FlowSyncAgent(new MemoryFlowTable(), store, {
    node,
    services: SERVICES,
    vips: [VIP],
    batchSize: Number(Deno.env.get("FLOWS_BENCH_BATCH") ?? 2000),
    maxInFlight: Number(Deno.env.get("FLOWS_BENCH_INFLIGHT") ?? 4),
    queueCapacity: evs.length,
    registry: new Registry(),
  });
  await agent.start();
  const t0 = performance.now();
  // Events arrive in ring-buffer sized bursts; the agent batches them behind the scenes.
  for (let i = 0; i < evs.length; i += 4096) {
    const end = Math.min(evs.length, i + 4096);
    for (let j = i; j < end; j++) agent.learn(evs[j]!);
    await new Promise((r) => setImmediate(r));
  }
  await flush(agent);
  const s = (performance.now() - t0) / 1000;
  if (agent.queued !== 0 || agent.dropped !== 0) {
    throw new Error(`write incomplete: ${agent.queued} queued, ${agent.dropped} dropped`);
  }
  await agent.stop();
  await store.close();
  return evs.length / s;
}

const PROP_RATE = Number(Deno.env.get("FLOWS_BENCH_PROP_RATE") ?? 20_000);

/**
 * End-to-end latency at a steady rate: agent A learns flows (1,000 every 50 ms for 2 s), agent
 * B's flow map receives them from the stream; per flow, the time from `A.learn` to B's batch put.
 */
async function propagation(url: string): Promise<{
  p50: number;
  p99: number;
  max: number;
  samples: number;
}> {
  const sent = new Map<number, number>();
  const delays: number[] = [];
  class Recording extends MemoryFlowTable {
    override putBatch(entries: readonly FlowEntry[]): void {
      const now = performance.now();
      for (const e of entries) {
        const t = sent.get(e.key.saddr);
        if (t !== undefined) delays.push(now - t);
      }
      super.putBatch(entries);
    }
  }
  const storeA = connectRedisStore({ url });
  const storeB = connectRedisStore({ url });
  const a = new FlowSyncAgent(new MemoryFlowTable(), storeA, {
    node: "prop-a",
    services: SERVICES,
    vips: [PROP_VIP],
    registry: new Registry(),
  });
  const b = new FlowSyncAgent(new Recording(), storeB, {
    node: "prop-b",
    services: SERVICES,
    vips: [PROP_VIP],
    registry: new Registry(),
    readBlockMs: 200,
  });
  await a.start();
  await b.start();
  const perTick = PROP_RATE / 20;
  for (let tick = 0; tick < (QUICK ? 10 : 40); tick++) {
    const t = performance.now();
    for (let i = 0; i < perTick; i++) {
      const saddr = (0x0c000000 + tick * perTick + i) >>> 0;
      sent.set(saddr, performance.now());
      a.learn({
        key: { saddr, daddr: 0x0a006402, sport: 1, dport: 80, proto: 6 },
        backend: 0x0a000102,
        serviceId: 1,
        tsNs: 0,
      });
    }
    await new Promise((r) => setTimeout(r, Math.max(0, 50 - (performance.now() - t))));
  }
  const deadline = Date.now() + 10_000;
  while (delays.length < sent.size && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
  }
  await a.stop();
  await b.stop();
  await storeA.close();
  await storeB.close();
  if (delays.length < sent.size) throw new Error(`propagation: ${delays.length} of ${sent.size}`);
  delays.sort((x, y) => x - y);
  const q = (p: number) => delays[Math.min(delays.length - 1, Math.floor(p * delays.length))]!;
  return { p50: q(0.5), p99: q(0.99), max: delays.at(-1)!, samples: delays.length };
}

/** The flow table to restore into: the real BPF flow map when possible, else in memory. */
async function restoreTarget(n: number): Promise<
  { table: FlowTable; kind: string; count: () => number } & Disposable
> {
  try {
    const { Datapath } = await import("../node/bpf/mod.ts");
    const dp = await Datapath.open({ pinDir: null, maxFlows: Math.ceil(n * 1.25) });
    const table = dp.flowTable();
    return {
      table,
      kind: "bpf",
      count: () => dp.maps.flows.lookupBatch().count,
      [Symbol.dispose]: () => dp[Symbol.dispose](),
    };
  } catch (err) {
    console.log(`BPF flow map unavailable (${(err as Error).message}); restoring into memory`);
    const table = new MemoryFlowTable();
    return { table, kind: "memory", count: () => table.size, [Symbol.dispose]: () => {} };
  }
}

async function main(): Promise<void> {
  setLogLevel("warn"); // one info line per flow would measure the logger, not the sync
  await using redis = await startRedis();
  const rounds = Number(Deno.env.get("FLOWS_BENCH_ROUNDS") ?? (QUICK ? 1 : 3));
  console.log(`redis-server ${redis.url}; N = ${N} flows; ${rounds} interleaved rounds`);
  const evs = events(N);

  // Interleave the baseline and ours so both see the same machine noise; report medians.
  const setRates: number[] = [];
  const flowRates: number[] = [];
  for (let r = 0; r < rounds; r++) {
    // Every round inserts N new flows (not overwrites): clear the previous round's keys first.
    await clearFlows(redis.url);
    setRates.push(await redisBenchmark(redis.port));
    flowRates.push(await agentWrite(redis.url, evs, `bench-w${r}`));
    console.log(
      `round ${r + 1}: redis-benchmark SET -P 16 ${setRates[r]!.toFixed(0)}/s, ` +
        `agent ${flowRates[r]!.toFixed(0)} flows/s`,
    );
  }
  const setP16 = median(setRates);
  const flowsPerS = median(flowRates);
  console.log(
    `median: agent ${flowsPerS.toFixed(0)} flows/s = ${(100 * flowsPerS / setP16).toFixed(0)}% ` +
      `of redis-benchmark -t set -P 16 (${setP16.toFixed(0)}/s); goal >= 50%`,
  );

  const prop = await propagation(redis.url);
  console.log(
    `propagation A.learn → installed in B's map at ${PROP_RATE} flows/s: ` +
      `p50 ${prop.p50.toFixed(1)} ms, p99 ${prop.p99.toFixed(1)} ms, max ${
        prop.max.toFixed(1)
      } ms ` +
      `(${prop.samples} flows)`,
  );

  using target = await restoreTarget(N);
  const store = connectRedisStore({ url: redis.url });
  const agent = new FlowSyncAgent(target.table, store, {
    node: "bench-restore",
    services: SERVICES,
    vips: [VIP],
    registry: new Registry(),
  });
  const t1 = performance.now();
  await agent.start();
  const restoreS = (performance.now() - t1) / 1000;
  await agent.stop();
  await store.close();
  const restored = target.count();
  if (restored !== N) throw new Error(`restore incomplete: ${restored} of ${N} in the table`);
  const restore1mS = restoreS * 1_000_000 / N;
  console.log(
    `restore: ${N} flows from Redis into the ${target.kind} flow table before ready: ` +
      `${restoreS.toFixed(2)} s (goal <= 3 s for 1M)`,
  );

  const cl = await clusterShape(QUICK ? 10_000 : Math.min(N, 200_000), QUICK);
  console.log(
    `cluster (3 masters + replicas, 12 LB IPs): ${cl.flowsPerS.toFixed(0)} flows/s, ` +
      `per-master write spread ±${(100 * cl.spread).toFixed(0)}%, propagation p50 ${
        cl.p50.toFixed(1)
      } ms, p99 ${cl.p99.toFixed(1)} ms`,
  );
  console.log(
    `cluster, one busy LB IP in 16 buckets: ${cl.busyFlowsPerS.toFixed(0)} flows/s, ` +
      `per-master write spread ±${(100 * cl.busySpread).toFixed(0)}% (goal <= 20%)`,
  );

  console.log(JSON.stringify({
    n: N,
    flows_per_s: Math.round(flowsPerS),
    redis_set_p16_per_s: Math.round(setP16),
    ratio: Number((flowsPerS / setP16).toFixed(3)),
    restore_1m_s: Number(restore1mS.toFixed(3)),
    restore_table: target.kind,
    propagation_p50_ms: Number(prop.p50.toFixed(2)),
    propagation_p99_ms: Number(prop.p99.toFixed(2)),
    cluster_flows_per_s: Math.round(cl.flowsPerS),
    cluster_write_spread: Number(cl.spread.toFixed(3)),
    busy_vip_flows_per_s: Math.round(cl.busyFlowsPerS),
    busy_vip_write_spread: Number(cl.busySpread.toFixed(3)),
    cluster_propagation_p50_ms: Number(cl.p50.toFixed(2)),
    cluster_propagation_p99_ms: Number(cl.p99.toFixed(2)),
  }));
}

if (import.meta.main) await main();
