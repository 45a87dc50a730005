/**
 * Kubernetes benchmark: controller to agents' maps. The Kubernetes API test server (lab/kube),
 * a real redis-server, the controller (informers → IPAM → tables → model publisher → Redis) and
 * three agent-side control planes (RedisModelSource → Writer → BPF-maps reconciler over
 * `MemoryLBMaps`), all in this one process except redis-server.
 *
 * 1. Cold start: N Services × 10 endpoints (EndpointSlices) exist, agents are running; the
 *    controller starts. Timed until every agent's maps hold every frontend; also reported: the
 *    controller synced (informers listed + first pass fed its tables), the model in Redis, and
 *    the CPU this process used meanwhile (every thread; redis-server not included).
 * 2. Service created → frontend in every agent's map: S Services created one at a time (Service
 *    + EndpointSlice), each timed from the create request until every agent's maps hold it.
 *
 * Run: `deno task bench:k8s` (`--services=N` 1000, `--samples=S` 200, `--quick`: 50 and 20).
 * Goals (issue 10): cold start ≤ 1 s, p99 ≤ 100 ms. The last line of output is one JSON object.
 *
 * @module
 */

import * as k8s from "@kubernetes/client-node";
import process from "node:process";
import { intOption, readCommandLineOrExit } from "../lib/args.ts";
import { setLogLevel } from "../lib/log.ts";
import { createAddressPool, kubeConfigFor, startKubeServer } from "../lab/kube/mod.ts";
import { startRedis } from "../lab/redis_server.ts";
import { connectModelStore, startModelPublisher } from "../controller/model/mod.ts";
import { startController } from "../controller/k8s/run.ts";
import { type BenchAgent, startAgent, startWorkerAgent } from "./_k8s_agent.ts";
import { limited, serviceBody, sliceBody, watchStore } from "./_k8s_status_run.ts";

const OPTIONS = {
  command: "bench:k8s",
  usage: `usage: deno task bench:k8s [--services=N] [--samples=S] [--agents=A] [--quick]
  --services: Services present at cold start (default 1000), 10 endpoints each
  --samples: Services created one at a time for the latency figure (default 200)
  --agents: agent control planes following the model (default 3)
  --in-process: agents in the main thread (default: a Worker each)
  --maglev=M: annotation holdfast.io/maglev-size on every Service (default: none, the agents' 16,381)
  --quick: 50 Services, 20 samples (a smoke test, not a figure)`,
  options: {
    services: { type: "string" },
    samples: { type: "string" },
    agents: { type: "string" },
    quick: { type: "boolean" },
    "in-process": { type: "boolean" },
    maglev: { type: "string" },
  },
} as const;

const ENDPOINTS = 10;
/** Longest wait for one condition (ms). */
const WAIT_MS = 60_000;

/** Polls `cond` every `everyMs` until it holds (bounded by WAIT_MS). */
async function until(cond: () => boolean, what: string, everyMs = 1): Promise<void> {
  const end = performance.now() + WAIT_MS;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`Timed out after ${WAIT_MS} ms: ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}

async function main(): Promise<void> {
  const opts = readCommandLineOrExit(Deno.args, OPTIONS, ({ values }) => {
    const quick = values.quick === true;
    return {
      services: intOption(values, "services", { default: quick ? 50 : 1_000, min: 1, max: 3000 }),
      samples: intOption(values, "samples", { default: quick ? 20 : 200, min: 1, max: 1000 }),
      agents: intOption(values, "agents", { default: 3, min: 1, max: 16 }),
      inProcess: values["in-process"] === true,
      maglev: values.maglev === undefined
        ? undefined
        : intOption(values, "maglev", { default: 16_381, min: 251 }),
    };
  });
  setLogLevel("warn"); // one info line per published service would flood stdout
  const n = opts.services;
  await using redis = await startRedis();
  await using kube = await startKubeServer({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(kube);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const discovery = kc.makeApiClient(k8s.DiscoveryV1Api);
  await createAddressPool(kc, "bench", [{ cidr: "10.96.0.0/20" }]);
  const create = (i: number) =>
    Promise.all([
      core.createNamespacedService({ namespace: "default", body: serviceBody(i, opts.maglev) }),
      discovery.createNamespacedEndpointSlice({ namespace: "default", body: sliceBody(i) }),
    ]);
  await limited(Array.from({ length: n }, (_, i) => () => create(i)), 32);
  console.log(`${n} Services × ${ENDPOINTS} endpoints created; ${opts.agents} agents`);

  // Agents: running before the controller (deployed as they are: default options), each in a
  // Worker of its own (one thread per agent, as one per node) unless --in-process.
  const agents: BenchAgent[] = [];
  for (let a = 0; a < opts.agents; a++) {
    agents.push(await (opts.inProcess ? startAgent(redis.url) : startWorkerAgent(redis.url)));
  }
  const everyAgentHas = (count: number) => agents.every((a) => a.frontends() >= count);

  // 1. Cold start. Statuses and Events are counted as they land in the server's store (its
  // listener), from the controller's start, beside the agents.
  const landed = watchStore(kube.store);
  let statusMs = NaN, eventsMs = NaN;
  const ctlStore = connectModelStore({ url: redis.url });
  const t0 = performance.now();
  const cpu0 = process.cpuUsage(); // this process, every thread (not redis-server)
  const running = startController(kc, { identity: "bench" });
  const pub = startModelPublisher(running.cp, ctlStore);
  let syncedMs = NaN, publishedMs = NaN;
  const snapshotMs: number[] = [];
  for (const a of agents) a.ready().then(() => snapshotMs.push(performance.now() - t0));
  running.synced.then(() => syncedMs = performance.now() - t0);
  pub.synced().then(() => publishedMs = performance.now() - t0);
  const doneMs = agents.map(() => NaN); // when each agent's maps held every frontend
  const landedCheck = () => {
    if (Number.isNaN(statusMs) && landed.statuses.size >= n) statusMs = performance.now() - t0;
    if (Number.isNaN(eventsMs) && landed.events() >= n) eventsMs = performance.now() - t0;
  };
  await until(() => {
    agents.forEach((a, i) => {
      if (Number.isNaN(doneMs[i]!) && a.frontends() >= n) doneMs[i] = performance.now() - t0;
    });
    landedCheck();
    return everyAgentHas(n);
  }, `${n} frontends in every agent's maps`);
  const coldMs = performance.now() - t0;
  const coldBuilds = agents.map((a) => a.builds());
  const coldCpu = process.cpuUsage(cpu0);
  const coldCpuS = (coldCpu.user + coldCpu.system) / 1e6;
  await pub.synced();
  console.log(
    `cold start: ${n} frontends in ${opts.agents} agents' maps in ${coldMs.toFixed(0)} ms ` +
      `(controller synced ${syncedMs.toFixed(0)} ms, model in Redis ${
        publishedMs.toFixed(0)
      } ms, agents' first snapshot ${snapshotMs.map((x) => x.toFixed(0)).join(", ")} ms, ` +
      `each agent done ${doneMs.map((x) => x.toFixed(0)).join(", ")} ms; CPU ${
        coldCpuS.toFixed(2)
      } s on ${navigator.hardwareConcurrency} CPUs; goal ≤ 1000 ms); Maglev tables built per ` +
      `agent ${coldBuilds.join(", ")}`,
  );

  // The first pass's status writes (N Services) and Events (N) may end after the model is out; a
  // Service created meanwhile waits for them (one pass at a time). Sample after they are done.
  await until(() => {
    landedCheck();
    return !Number.isNaN(statusMs) && !Number.isNaN(eventsMs);
  }, `status and Event of ${n} Services`);
  landed.stop();
  console.log(
    `cold start: every Service's status in the API server at ${statusMs.toFixed(0)} ms, ` +
      `every AddressAllocated Event at ${eventsMs.toFixed(0)} ms (goal ≤ 1000 ms)`,
  );
  await new Promise((r) => setTimeout(r, 200)); // the pass that wrote them ends

  // 2. Service created → frontend in every agent's map, one at a time.
  // Stages (polled every ms in this process, so each is a bound, not an exact split): the
  // controller's tables hold it, the model in Redis holds it (the publisher's revision moved),
  // one agent's maps hold it, every agent's maps hold it.
  const lat: number[] = [];
  const stages = { created: [] as number[], tables: [] as number[], redis: [] as number[] };
  const tablesHave = (count: number) =>
    running.cp.tables.services.count(running.cp.db.readTxn()) >= count;
  for (let s = 0; s < opts.samples; s++) {
    const i = n + s, rev = pub.publisher.rev;
    const t = performance.now();
    const created = create(i).then(() => stages.created.push(performance.now() - t));
    await until(() => tablesHave(i + 1), `svc-${i} in the controller's tables`);
    stages.tables.push(performance.now() - t);
    await until(() => pub.publisher.rev > rev, `svc-${i} in the model`);
    stages.redis.push(performance.now() - t);
    await until(() => everyAgentHas(i + 1), `svc-${i} in every agent's maps`);
    lat.push(performance.now() - t);
    await created;
  }
  const p50 = percentile(lat, 50), p99 = percentile(lat, 99);
  const split = (xs: number[]) =>
    `p50 ${percentile(xs, 50).toFixed(1)} / p99 ${percentile(xs, 99).toFixed(1)}`;
  const worst = lat.indexOf(Math.max(...lat));
  console.log(
    `slowest sample (svc-${n + worst}): tables ${stages.tables[worst]!.toFixed(1)}, ` +
      `Redis ${stages.redis[worst]!.toFixed(1)}, every agent ${lat[worst]!.toFixed(1)} ms`,
  );
  console.log(
    `stages from the create request, ms: API answered ${split(stages.created)}; ` +
      `controller's tables ${split(stages.tables)}; model in Redis ${split(stages.redis)}`,
  );
  console.log(
    `Service created → frontend in every agent's map (${opts.samples} samples): ` +
      `p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${
        Math.max(...lat).toFixed(1)
      } ms (goal p99 ≤ 100 ms)`,
  );

  await pub.stop();
  await running.stop();
  for (const a of agents) await a.stop();
  await ctlStore.close();
  console.log(JSON.stringify({
    services: n,
    endpoints_per_service: ENDPOINTS,
    agents: opts.agents,
    agents_in: opts.inProcess ? "process" : "workers",
    maglev: opts.maglev ?? 16_381,
    samples: opts.samples,
    cold_start_s: Number((coldMs / 1000).toFixed(3)),
    cold_synced_s: Number((syncedMs / 1000).toFixed(3)),
    cold_model_in_redis_s: Number((publishedMs / 1000).toFixed(3)),
    cold_status_written_s: Number((statusMs / 1000).toFixed(3)),
    cold_events_written_s: Number((eventsMs / 1000).toFixed(3)),
    cold_first_snapshot_s: Number((Math.max(...snapshotMs) / 1000).toFixed(3)),
    cold_agents_done_s: doneMs.map((x) => Number((x / 1000).toFixed(3))),
    cold_cpu_s: Number(coldCpuS.toFixed(3)),
    cold_maglev_builds_per_agent: coldBuilds,
    svc_to_map_ms_p50: Number(p50.toFixed(1)),
    svc_to_map_ms_p99: Number(p99.toFixed(1)),
    svc_to_map_ms_max: Number(Math.max(...lat).toFixed(1)),
    svc_to_tables_ms_p50: Number(percentile(stages.tables, 50).toFixed(1)),
    svc_to_redis_ms_p50: Number(percentile(stages.redis, 50).toFixed(1)),
    svc_to_redis_ms_p99: Number(percentile(stages.redis, 99).toFixed(1)),
    cold_goal_met: coldMs <= 1000,
    p99_goal_met: p99 <= 100,
  }));
}

if (import.meta.main) await main();
