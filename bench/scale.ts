/**
 * `bench:scale` — the scale model of `docs/scale.md` checked at reduced scale (issue 28): N flow
 * agents (`FlowSyncAgent`, in-memory flow maps, one process) share flows through a real Redis
 * Cluster (three masters with a replica each, `lab/redis_cluster.ts`). New flows arrive spread over
 * every node, as ECMP spreads them; each run waits until every node's map holds every flow. Per N:
 *
 * - CPU per new flow summed over all agents (this process's user+sys), and the model's prediction
 *   `L + (N − 1) · P` (L: learning a flow, P: installing a peer's), with L and P fitted on the two
 *   smallest N — under full mirroring it grows linearly with N;
 * - Redis: commands and CPU per new flow, and bytes sent per install (`INFO` of the masters), against
 *   the model's per-install bytes (the flow's share of a stream entry);
 * - a joining node's restore of every stored flow: time and flows/s.
 *
 * Each N runs twice, side by side: `--flow-sharing all` (every flow announced and installed on
 * every node) and `exceptions` (every flow stored, only exceptions announced and installed; one flow
 * in {@link EXC_EVERY} has a backend other than the shared table's pick, as a quarantined backend's
 * would) — printing installs, Redis bytes and CPU per new flow of both, and their ratio.
 *
 * One process stands in for N machines, so fixed per-process costs (timers, wake-ups) are shared and
 * per-flow costs are those of a busy agent. `--quick` (CI): N = 2, 4, 8, a few thousand flows.
 *
 * @module
 */

import process from "node:process";
import { FlowSyncAgent } from "../node/lb/flows/sync_agent.ts";
import { type AnyFlowKey, type FlowEvent, isFlowKey6 } from "../node/bpf/flow.ts";
import type { FlowSharingMode, TablePicker } from "../node/lb/flows/exceptions.ts";
import { MemoryFlowTable } from "../node/lb/flows/table.ts";
import { connectRedisStore } from "../node/lb/flows/redis_store.ts";
import { Registry } from "../lib/metrics.ts";
import { setLogLevel } from "../lib/log.ts";
import { type RedisCluster, startRedisCluster } from "../lab/redis_cluster.ts";
import { readCommandLineOrExit } from "../lib/args.ts";

const QUICK = readCommandLineOrExit(Deno.args, {
  command: "bench:scale",
  usage: `usage: deno task bench:scale [--quick]
  N flow agents in one process share flows through a throwaway Redis Cluster (docs/scale.md).
  --quick: N = 2, 4, 8 and a few thousand flows (seconds, for CI).`,
  options: { quick: { type: "boolean" } },
}, ({ values }) => values.quick === true);
const SIZES = QUICK ? [2, 4, 8] : [2, 4, 8, 16, 24];
const FLOWS = QUICK ? 4_000 : 20_000;
const RATE = QUICK ? 4_000 : 5_000; // new flows/s over all nodes
const RESTORE_FLOWS = QUICK ? 20_000 : 200_000;
/** How long N idle agents are measured before the flows (their cost is subtracted). */
const IDLE_MS = QUICK ? 1_000 : 3_000;
/** Bytes a flow adds to a stream entry: `field=value,` (IPv4: 18 + 1 + 8 + 1 + 13 + 1). */
const MODEL_ENTRY_BYTES = 42;
const VIPS = ["10.0.120.1", "10.0.120.2", "10.0.120.3", "10.0.120.4"];
const SERVICES = {
  services: VIPS.map((vip, i) => ({
    name: `bench/s${i}`,
    frontends: [{ address: `${vip}:80/TCP` }],
    backends: ["10.0.1.2", "10.0.1.3", "10.0.1.4"].map((b) => ({ address: `${b}:8080/TCP` })),
  })),
};

/** One flow in this many is an exception (its backend is not the table's pick). */
const EXC_EVERY = 100;

/** The Maglev pick every node's (same) table makes, a function of the flow key. */
function pickOf(k: AnyFlowKey): number {
  return isFlowKey6(k) ? 0 : 0x0a000102 + ((k.saddr ^ k.sport ^ k.daddr) >>> 0) % 3;
}

const PICKER: TablePicker = {
  pick: (k) => isFlowKey6(k) ? undefined : { backend: pickOf(k), version: 1 },
};

function isExc(i: number): boolean {
  return i % EXC_EVERY === 7;
}

function event(i: number, base: number): FlowEvent {
  const key = {
    saddr: (base + (i >>> 8)) >>> 0,
    daddr: (0x0a007801 + (i % VIPS.length)) >>> 0,
    sport: 10_000 + (i & 255),
    dport: 80,
    proto: 6,
  };
  const pick = pickOf(key);
  return {
    key,
    backend: isExc(i) ? 0x0a000102 + (pick - 0x0a000102 + 1) % 3 : pick,
    serviceId: 1,
    tsNs: 0,
  };
}

interface Node {
  readonly table: MemoryFlowTable;
  readonly agent: FlowSyncAgent;
  close(): Promise<void>;
}

async function startNode(url: string, name: string, sharing: FlowSharingMode): Promise<Node> {
  const table = new MemoryFlowTable();
  const store = connectRedisStore({ url });
  const agent = new FlowSyncAgent(table, store, {
    node: name,
    services: SERVICES,
    vips: VIPS,
    queueCapacity: 1_000_000,
    registry: new Registry(),
    readBlockMs: 200,
    sharing,
    picker: PICKER,
  });
  await agent.start();
  return {
    table,
    agent,
    async close() {
      await agent.stop();
      await store.close();
    },
  };
}

/** Sums of the masters' INFO counters: CPU seconds, commands processed, bytes sent. */
async function redisTotals(cluster: RedisCluster) {
  const live = new Set((await cluster.topology()).filter((t) => t.master).map((t) => t.port));
  let cpu = 0, commands = 0, sent = 0;
  for (const m of cluster.running.filter((s) => live.has(s.port))) {
    const info = await m.cli("info", "all");
    const num = (name: string) =>
      Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(info)?.[1] ?? 0);
    cpu += num("used_cpu_user") + num("used_cpu_sys");
    commands += num("total_commands_processed");
    sent += num("total_net_output_bytes");
  }
  return { cpu, commands, sent };
}

const cpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

async function until(what: string, cond: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (let i = 0; i < 100_000 && !cond(); i++) {
    if (Date.now() > deadline) throw new Error(`bench:scale: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Run {
  nodes: number;
  cpuUsPerFlow: number;
  redisUsPerFlow: number;
  redisCommandsPerFlow: number;
  bytesPerInstall: number;
  idleCpuMsPerS: number;
  convergeMs: number;
  sharing: FlowSharingMode;
  /** Flows installed on peers per new flow. */
  installsPerFlow: number;
  /** Bytes Redis sent per new flow. */
  bytesPerFlow: number;
}

/** N agents; FLOWS new flows at RATE spread over them; until every map holds every flow. */
async function runSize(
  cluster: RedisCluster,
  n: number,
  base: number,
  sharing: FlowSharingMode,
): Promise<Run> {
  const nodes: Node[] = [];
  try {
    for (let i = 0; i < n; i++) {
      nodes.push(await startNode(cluster.url, `scale-${sharing}-${n}-${i}`, sharing));
    }
    // Flows of earlier sizes are restored at start: count this run's on top of them.
    const start = nodes.map((x) => x.table.size);
    // The idle cost of N agents (stream polls, timers) per second, subtracted below: the model is
    // about the cost per flow.
    const i0 = await redisTotals(cluster), ic0 = cpuSeconds(), it0 = performance.now();
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const i1 = await redisTotals(cluster), idleS = (performance.now() - it0) / 1000;
    const idle = {
      cpu: (cpuSeconds() - ic0) / idleS,
      redisCpu: (i1.cpu - i0.cpu) / idleS,
      commands: (i1.commands - i0.commands) / idleS,
      sent: (i1.sent - i0.sent) / idleS,
    };
    const r0 = await redisTotals(cluster);
    const c0 = cpuSeconds();
    const t0 = performance.now();
    const perTick = Math.max(1, Math.round(RATE / 50));
    // What each map must hold at the end: all flows (mode all), or its own and others' exceptions.
    const want = nodes.map((_, k) => start[k]! + (sharing === "all" ? FLOWS : 0));
    if (sharing === "exceptions") {
      for (let i = 0; i < FLOWS; i++) {
        for (let k = 0; k < n; k++) if (i % n === k || isExc(i)) want[k]!++;
      }
    }
    for (let sent = 0, tick = 0; sent < FLOWS && tick < 100_000; tick++) {
      const tickStart = performance.now();
      for (let k = 0; k < perTick && sent < FLOWS; k++, sent++) {
        const ev = event(sent, base);
        const node = nodes[sent % n]!;
        node.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: node.table.nowNs() });
        node.agent.learn(ev);
      }
      await new Promise((r) => setTimeout(r, Math.max(0, 20 - (performance.now() - tickStart))));
    }
    await until(
      `every map of ${n} nodes full`,
      () => nodes.every((x, i) => x.table.size >= want[i]!),
      120_000,
    );
    const convergeMs = performance.now() - t0;
    const s = convergeMs / 1000;
    const cpu = cpuSeconds() - c0 - idle.cpu * s;
    const r1 = await redisTotals(cluster);
    const installs = FLOWS * (n - 1);
    const held = nodes.reduce((a, x, i) => a + x.table.size - start[i]!, 0);
    const sent = Math.max(0, r1.sent - r0.sent - idle.sent * s);
    return {
      sharing,
      installsPerFlow: (held - FLOWS) / FLOWS,
      bytesPerFlow: sent / FLOWS,
      nodes: n,
      cpuUsPerFlow: Math.max(0, cpu * 1e6) / FLOWS,
      redisUsPerFlow: Math.max(0, (r1.cpu - r0.cpu - idle.redisCpu * s) * 1e6) / FLOWS,
      redisCommandsPerFlow: Math.max(0, r1.commands - r0.commands - idle.commands * s) / FLOWS,
      bytesPerInstall: Math.max(0, r1.sent - r0.sent - idle.sent * s) / Math.max(1, installs),
      idleCpuMsPerS: idle.cpu * 1000,
      convergeMs,
    };
  } finally {
    for (const x of nodes) await x.close();
  }
}

/** Least squares of y = a + b·x over `points`: [a, b]. */
function fit(points: readonly (readonly [number, number])[]): [number, number] {
  const n = points.length;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let sxy = 0, sxx = 0;
  for (const [x, y] of points) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
  }
  const b = sxx === 0 ? 0 : sxy / sxx;
  return [my - b * mx, b];
}

async function main(): Promise<void> {
  setLogLevel("warn");
  await using cluster = await startRedisCluster();
  const runs: Run[] = [];
  const exc: Run[] = [];
  for (const [i, n] of SIZES.entries()) {
    runs.push(await runSize(cluster, n, 0x0b000000 + i * 0x100000, "all"));
    exc.push(await runSize(cluster, n, 0x0c000000 + i * 0x100000, "exceptions"));
  }
  // The model: per new flow, CPU(N) = L + (N − 1) · P and bytes(N) = W + (N − 1) · I, fitted
  // (least squares) over every size.
  const cpuFit = fit(runs.map((r) => [r.nodes - 1, r.cpuUsPerFlow]));
  const byteFit = fit(runs.map((r) => [r.nodes - 1, r.bytesPerInstall * (r.nodes - 1)]));
  const [L, P] = cpuFit, [W, I] = byteFit;
  console.log(
    `model fitted over N=${SIZES.join(",")}: learn L=${L.toFixed(1)} µs, install P=${
      P.toFixed(1)
    } µs per flow; Redis sends W=${W.toFixed(0)} B per flow written + I=${
      I.toFixed(0)
    } B per install (a flow's share of a stream entry: ${MODEL_ENTRY_BYTES} B)`,
  );
  console.log(
    "N    cpu µs/new flow, all nodes (model)  redis µs/flow  cmds/flow  bytes/flow (model)  " +
      "converge  idle cpu (subtracted)",
  );
  for (const r of runs) {
    const bytes = r.bytesPerInstall * (r.nodes - 1);
    console.log(
      `${String(r.nodes).padEnd(4)} ${r.cpuUsPerFlow.toFixed(1).padStart(8)} (${
        (L + (r.nodes - 1) * P).toFixed(1)
      })              ${r.redisUsPerFlow.toFixed(2).padStart(8)}       ${
        r.redisCommandsPerFlow.toFixed(3).padStart(6)
      }     ${bytes.toFixed(0).padStart(6)} (${(W + (r.nodes - 1) * I).toFixed(0)})      ${
        r.convergeMs.toFixed(0)
      } ms   ${r.idleCpuMsPerS.toFixed(1)} ms/s`,
    );
  }
  console.log(
    `--flow-sharing exceptions beside all (1 flow in ${EXC_EVERY} an exception):\n` +
      "N    installs/new flow (all)  cpu µs/new flow (all)  redis bytes/new flow (all)  redis µs/flow (all)",
  );
  for (const [i, r] of exc.entries()) {
    const a = runs[i]!;
    console.log(
      `${String(r.nodes).padEnd(4)} ${r.installsPerFlow.toFixed(3)} (${
        a.installsPerFlow.toFixed(3)
      })          ${r.cpuUsPerFlow.toFixed(1)} (${a.cpuUsPerFlow.toFixed(1)})            ${
        r.bytesPerFlow.toFixed(0)
      } (${a.bytesPerFlow.toFixed(0)})                 ${r.redisUsPerFlow.toFixed(2)} (${
        a.redisUsPerFlow.toFixed(2)
      })`,
    );
  }
  const last = runs.at(-1)!;
  const predicted = L + (last.nodes - 1) * P;
  const bytesLast = last.bytesPerInstall * (last.nodes - 1);

  // A joining node restores every stored flow (RESTORE_FLOWS written by one agent first).
  let restoreS: number, restored: number, restoreExcS: number, restoredExc: number;
  {
    const writer = await startNode(cluster.url, "scale-writer", "all");
    try {
      for (let i = 0; i < RESTORE_FLOWS; i++) {
        const ev = event(i, 0x0e000000);
        writer.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: 0 });
        writer.agent.learn(ev);
        if (i % 4096 === 4095) await new Promise((r) => setTimeout(r, 0));
      }
      await until("the writer's flows stored", () => writer.agent.queued === 0, 120_000);
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      await writer.close();
    }
    const t0 = performance.now();
    const joiner = await startNode(cluster.url, "scale-joiner", "all");
    restoreS = (performance.now() - t0) / 1000;
    const got = restored = joiner.table.size; // with the flows of the sized runs
    await joiner.close();
    const t1 = performance.now();
    const joinerExc = await startNode(cluster.url, "scale-joiner-exc", "exceptions");
    restoreExcS = (performance.now() - t1) / 1000;
    restoredExc = joinerExc.table.size; // the exceptions among them
    await joinerExc.close();
    console.log(
      `restore, --flow-sharing exceptions: ${restoredExc} exceptions of the same stored flows ` +
        `installed in ${restoreExcS.toFixed(2)} s`,
    );
    if (got < RESTORE_FLOWS) throw new Error(`bench:scale: restored ${got} of ${RESTORE_FLOWS}`);
    console.log(
      `restore: a joining node installed ${got} stored flows before ready in ${
        restoreS.toFixed(2)
      } s ` +
        `(${(got / restoreS).toFixed(0)} flows/s; 10M at this rate: ${
          (1e7 / (got / restoreS)).toFixed(0)
        } s)`,
    );
  }
  console.log(JSON.stringify({
    quick: QUICK,
    sizes: SIZES,
    flows: FLOWS,
    model_learn_us: Number(L.toFixed(2)),
    model_install_us: Number(P.toFixed(2)),
    model_bytes_written: Math.round(W),
    model_bytes_per_install: Math.round(I),
    largest_bytes_vs_model: Number((bytesLast / (W + (last.nodes - 1) * I)).toFixed(3)),
    cpu_us_per_flow: runs.map((r) => Number(r.cpuUsPerFlow.toFixed(2))),
    model_cpu_us_per_flow: runs.map((r) => Number((L + (r.nodes - 1) * P).toFixed(2))),
    largest_vs_model: Number((last.cpuUsPerFlow / predicted).toFixed(3)),
    redis_us_per_flow: runs.map((r) => Number(r.redisUsPerFlow.toFixed(2))),
    redis_commands_per_flow: runs.map((r) => Number(r.redisCommandsPerFlow.toFixed(3))),
    bytes_per_install: runs.map((r) => Math.round(r.bytesPerInstall)),
    entry_bytes_per_flow: MODEL_ENTRY_BYTES,
    idle_cpu_ms_per_s: runs.map((r) => Number(r.idleCpuMsPerS.toFixed(1))),
    restore_flows: restored,
    restore_flows_per_s: Math.round(restored / restoreS),
    exc_every: EXC_EVERY,
    installs_per_flow_all: runs.map((r) => Number(r.installsPerFlow.toFixed(3))),
    installs_per_flow_exceptions: exc.map((r) => Number(r.installsPerFlow.toFixed(3))),
    bytes_per_flow_all: runs.map((r) => Math.round(r.bytesPerFlow)),
    bytes_per_flow_exceptions: exc.map((r) => Math.round(r.bytesPerFlow)),
    cpu_us_per_flow_exceptions: exc.map((r) => Number(r.cpuUsPerFlow.toFixed(2))),
    redis_us_per_flow_exceptions: exc.map((r) => Number(r.redisUsPerFlow.toFixed(2))),
    largest_installs_all_vs_exceptions: Number(
      (last.installsPerFlow / Math.max(1e-9, exc.at(-1)!.installsPerFlow)).toFixed(1),
    ),
    restore_s: Number(restoreS.toFixed(3)),
    restore_exceptions_s: Number(restoreExcS.toFixed(3)),
    restore_exceptions_installed: restoredExc,
  }));
}

if (import.meta.main) await main();
