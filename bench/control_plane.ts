/**
 * Control-plane benchmark: N services × B backends as Kubernetes objects (Service +
 * EndpointSlice) → k8s source → Writer → tables → BPF reconciler → in-memory maps, end to end.
 *
 * Reports services/s (end to end, and split into ingest and reconcile), bytes retained and
 * allocated per service, write-transaction commits/s and commit→watcher wake-up latency, beside
 * Cilium's published figures (~50,000 services/s, ~14.9 KB allocated and ~3.3 KB retained per
 * service) and a same-run baseline: the same conversion, Maglev builds and map writes with plain
 * Maps instead of the transactional store (no snapshots, indexes, watches, status).
 *
 * Run: `deno task bench:control-plane` (needs `--v8-flags=--expose-gc` for retained memory).
 * Flags: `--services=N` (10000), `--backends=B` (10), `--maglev=M` (1021), `--batch=S` (100
 * services per write txn), `--maglev-builder=ts|wasm` (ts), `--quick` (a smoke run of seconds).
 * The last line of output is one JSON object.
 *
 * @module
 */

import process from "node:process";
import v8 from "node:v8";
import { createControlPlane } from "../controller/control_plane.ts";
import { hostPort } from "../controller/lb/address.ts";
import { MemoryLBMaps } from "../controller/lbmaps_memory.ts";
import type { MaglevBuilder } from "../policy-as/host/maglev_input.ts";
import { PolicyHost, TsMaglevBuilder, WasmMaglevBuilder } from "../policy-as/host/mod.ts";
import {
  convertEndpointSlice,
  convertService,
  type K8sEndpointSlice,
  type K8sService,
} from "../controller/sources/k8s_convert.ts";
import { type K8sEvent, K8sSource } from "../controller/sources/k8s_source.ts";
import { DB, defineIndex } from "../controller/statedb/mod.ts";
import { choiceOption, intOption, readCommandLineOrExit } from "../lib/args.ts";
import { setLogLevel } from "../lib/log.ts";
import { generate } from "./_k8s_objects.ts";

const CILIUM = {
  services_per_s: 50_000,
  allocated_bytes_per_service: 14_900,
  retained_bytes_per_service: 3_300,
};

const OPTIONS = {
  command: "bench:control-plane",
  usage: `usage: deno task bench:control-plane [--services=N] [--backends=B] [--maglev=M]
                                     [--batch=S] [--maglev-builder=ts|wasm] [--quick]
  --quick: 200 services × 3 backends, M=251 (a smoke test of seconds, not a figure)`,
  options: {
    services: { type: "string" },
    backends: { type: "string" },
    maglev: { type: "string" },
    batch: { type: "string" },
    "maglev-builder": { type: "string" },
    quick: { type: "boolean" },
  },
} as const;

function readOptions(args: readonly string[]) {
  return readCommandLineOrExit(args, OPTIONS, ({ values }) => {
    const quick = values.quick === true;
    return {
      services: intOption(values, "services", { default: quick ? 200 : 10_000, min: 1 }),
      backends: intOption(values, "backends", { default: quick ? 3 : 10, min: 1 }),
      maglev: intOption(values, "maglev", { default: quick ? 251 : 1021, min: 1 }),
      batch: intOption(values, "batch", { default: 100, min: 1 }),
      builder: choiceOption(values, "maglev-builder", ["ts", "wasm"]),
    };
  });
}

const tsMaglev = new TsMaglevBuilder();

/**
 * The Maglev builder the pipeline (and the plain-Maps baseline) uses: `ts` (default) is the
 * controller's default, the TypeScript builder; `wasm` is what the LB agent runs
 * (`node/agent.ts`: the policy module's WASM builder with the TypeScript one as fallback). Same
 * tables either way.
 */
async function maglevBuilder(kind: string): Promise<MaglevBuilder> {
  if (kind === "ts") return tsMaglev;
  if (kind !== "wasm") throw new Error(`Unknown --maglev-builder "${kind}": expected wasm or ts`);
  const host = await PolicyHost.create();
  const swap = await host.swap(
    await Deno.readFile(new URL("../policy-as/build/release.wasm", import.meta.url)),
  );
  if (!swap.ok) throw new Error(`Policy module rejected: ${JSON.stringify(swap)}`);
  return new WasmMaglevBuilder(host, { fallback: tsMaglev });
}

const gcFn = (globalThis as { gc?: () => void }).gc;
function gc(): void {
  if (gcFn) { for (let i = 0; i < 3; i++) gcFn(); }
}
/** V8's running total of bytes allocated (Deno exposes it; @types/node does not list it). */
const allocated = () =>
  (v8.getHeapStatistics() as unknown as { total_allocated_bytes: number }).total_allocated_bytes;
const heapUsed = () => Deno.memoryUsage().heapUsed;

/** The builder, timed: the pipeline reports how much of its time Maglev takes. */
const timedMaglev = {
  ms: 0,
  inner: tsMaglev as MaglevBuilder,
  build(backends: readonly { key: string; weight: number }[], m: number, out?: Uint32Array) {
    const t = performance.now();
    const table = this.inner.build(backends, m, out);
    this.ms += performance.now() - t;
    return table;
  },
};

interface PipelineResult {
  maglevMs: number;
  ingestMs: number;
  reconcileMs: number;
  totalMs: number;
  allocatedBytes: number;
  /** Process CPU time (all threads, GC helpers included) over the timed run. */
  cpuMs: number;
  keep: unknown;
  maps: MemoryLBMaps;
  stop: () => Promise<void>;
}

async function pipeline(
  events: K8sEvent[],
  opts: { batch: number; maglev: number },
): Promise<PipelineResult> {
  const maps = new MemoryLBMaps({ checkInvariants: false });
  timedMaglev.ms = 0;
  const cp = await createControlPlane(maps, {
    maglevSize: opts.maglev,
    batchSize: 1000,
    maglev: timedMaglev,
  });
  const k8s = new K8sSource(cp.writer);
  k8s.registerInitializer();
  cp.start();
  const a0 = allocated();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const step = opts.batch * 2; // a service and its slice per service
  for (let i = 0; i < events.length; i += step) k8s.apply(events.slice(i, i + step));
  k8s.synced();
  const t1 = performance.now();
  await cp.reconciler.waitIdle();
  const t2 = performance.now();
  const a1 = allocated();
  const c1 = process.cpuUsage(c0);
  const n = events.length / 2;
  const txn = cp.db.readTxn();
  let done = 0;
  cp.tables.frontends.scan(txn, (fe) => {
    if (fe.status.kind === "done") done++;
  });
  if (done !== n || maps.services.size !== n) {
    throw new Error(
      `Benchmark did not converge: ${done}/${n} frontends done, ${maps.services.size} services in maps`,
    );
  }
  return {
    maglevMs: timedMaglev.ms,
    ingestMs: t1 - t0,
    reconcileMs: t2 - t1,
    totalMs: t2 - t0,
    allocatedBytes: a1 - a0,
    cpuMs: (c1.user + c1.system) / 1000,
    keep: { cp, k8s },
    maps,
    stop: () => cp.stop(),
  };
}

/** Same conversion, Maglev and map writes with plain Maps: the floor under the store's cost. */
async function baseline(events: K8sEvent[], maglev: number): Promise<number> {
  const builder = timedMaglev.inner;
  let scratch: Uint32Array | undefined;
  const maps = new MemoryLBMaps({ checkInvariants: false });
  const t0 = performance.now();
  const services = new Map<string, ReturnType<typeof convertService>>();
  const backends = new Map<string, ReturnType<typeof convertEndpointSlice>>();
  for (const e of events) {
    const o = e.object;
    if (o.kind === "Service") {
      const s = convertService(o as K8sService);
      services.set(s.name, s);
    } else {
      const sl = o as K8sEndpointSlice;
      backends.set(
        `${sl.metadata!.namespace}/${sl.metadata!.labels!["kubernetes.io/service-name"]}`,
        convertEndpointSlice(sl),
      );
    }
  }
  const ids = new Map<string, number>();
  let nextId = 1, sid = 1;
  for (const [name, s] of services) {
    const bs = backends.get(name) ?? [];
    const keys = bs.map((b) => ({ key: hostPort(b.address), weight: b.weight ?? 100 }));
    const bids: number[] = [];
    for (const k of keys) {
      let id = ids.get(k.key);
      if (id === undefined) {
        ids.set(k.key, id = nextId++);
        const c = k.key.lastIndexOf(":");
        await maps.updateBackend(id, {
          address: k.key.slice(0, c),
          port: Number(k.key.slice(c + 1)),
        });
      }
      bids.push(id);
    }
    // One reused buffer, as the reconciler does (the maps copy what they are given).
    const table = scratch = builder.build(keys, maglev, scratch);
    for (let i = 0; i < table.length; i++) table[i] = bids[table[i]! - 1]!;
    const id = sid++;
    await maps.updateMaglev(id, table);
    for (const f of s.frontends) {
      const [ipPort, proto] = f.address.split("/");
      const c = ipPort!.lastIndexOf(":");
      await maps.updateService(
        {
          address: ipPort!.slice(0, c),
          port: Number(ipPort!.slice(c + 1)),
          protocol: proto as "TCP",
        },
        { serviceId: id, backendCount: keys.length, flowKeyMode: "five-tuple", maglevSize: maglev },
      );
    }
  }
  return performance.now() - t0;
}

/** Write-transaction commits per second (one row per txn) and commit → watcher wake latency. */
async function txnBench(): Promise<{ commitsPerS: number; wakeP50Us: number; wakeP99Us: number }> {
  type Row = { id: string; n: number };
  const byId = defineIndex<Row>({ name: "id", unique: true, keys: (r) => r.id });
  const db = new DB();
  const t = db.createTable<Row>({ name: "t", primary: byId });
  // Prefill so commits work on a non-trivial tree.
  const w0 = db.writeTxn(t);
  for (let i = 0; i < 10_000; i++) t.insert(w0, { id: `k${i}`, n: 0 });
  w0.commit();
  const commits = 20_000;
  const t0 = performance.now();
  for (let i = 0; i < commits; i++) {
    const w = db.writeTxn(t);
    t.insert(w, { id: `k${i % 10_000}`, n: i });
    w.commit();
  }
  const commitsPerS = commits / ((performance.now() - t0) / 1000);
  const lat: number[] = [];
  for (let i = 0; i < 2000; i++) {
    const key = `k${i % 10_000}`;
    const [, watch] = t.getWatch(db.readTxn(), byId.query(key));
    let start = 0;
    const woke = watch.wait().then(() => performance.now() - start);
    start = performance.now();
    const w = db.writeTxn(t);
    t.insert(w, { id: key, n: -i });
    w.commit();
    lat.push(await woke);
  }
  lat.sort((a, b) => a - b);
  return {
    commitsPerS,
    wakeP50Us: lat[Math.floor(lat.length * 0.5)]! * 1000,
    wakeP99Us: lat[Math.floor(lat.length * 0.99)]! * 1000,
  };
}

export async function main(): Promise<void> {
  const opts = readOptions(Deno.args);
  setLogLevel("warn"); // stdout is the report
  const n = opts.services, b = opts.backends, maglev = opts.maglev, batch = opts.batch;
  const builderKind = opts.builder;
  timedMaglev.inner = await maglevBuilder(builderKind);
  if (!gcFn) console.log("warning: run with --v8-flags=--expose-gc for retained-memory numbers");

  // Warm-up at 1/10 scale, on different addresses; thrown away.
  {
    const warm = await pipeline(generate(Math.max(100, n / 10), b, 1 << 20), { batch, maglev });
    await warm.stop();
    await baseline(generate(Math.max(100, n / 10), b, 1 << 20), maglev);
  }
  gc();

  const events = generate(n, b);
  gc();
  const base = heapUsed();
  const r = await pipeline(events, { batch, maglev });
  await r.stop();
  gc();
  const withMaps = heapUsed() - base;
  const mapsCount = r.maps.services.size;
  r.maps.clear();
  gc();
  const retained = heapUsed() - base;
  void r.keep;

  const baseMs = await baseline(events, maglev);
  const tx = await txnBench();

  const sps = n / (r.totalMs / 1000);
  const out = {
    bench: "control-plane",
    services: n,
    backends_per_service: b,
    maglev_size: maglev,
    maglev_builder: builderKind,
    batch_services_per_txn: batch,
    services_per_s: Math.round(sps),
    // Steadier than wall time when other jobs share the cores: compare runs with this.
    services_per_cpu_s: Math.round(n / (r.cpuMs / 1000)),
    ingest_services_per_s: Math.round(n / (r.ingestMs / 1000)),
    reconcile_services_per_s: Math.round(n / (r.reconcileMs / 1000)),
    maglev_build_us_per_service: Number((r.maglevMs * 1000 / n).toFixed(1)),
    services_per_s_excluding_maglev: Math.round(n / ((r.totalMs - r.maglevMs) / 1000)),
    retained_bytes_per_service: gcFn ? Math.round(retained / n) : null,
    retained_with_memory_maps_bytes_per_service: gcFn ? Math.round(withMaps / n) : null,
    allocated_bytes_per_service: Math.round(r.allocatedBytes / n),
    commits_per_s: Math.round(tx.commitsPerS),
    watch_wake_p50_us: Number(tx.wakeP50Us.toFixed(1)),
    watch_wake_p99_us: Number(tx.wakeP99Us.toFixed(1)),
    baseline_plain_maps_services_per_s: Math.round(n / (baseMs / 1000)),
    ratio_vs_plain_maps: Number((baseMs / r.totalMs).toFixed(3)),
    ratio_vs_cilium_services_per_s: Number((sps / CILIUM.services_per_s).toFixed(3)),
    cilium_services_per_s: CILIUM.services_per_s,
    cilium_allocated_bytes_per_service: CILIUM.allocated_bytes_per_service,
    cilium_retained_bytes_per_service: CILIUM.retained_bytes_per_service,
  };
  console.log(
    `services: ${n} × ${b} backends, Maglev M=${maglev} (${builderKind} builder), ${batch} services per write txn`,
  );
  console.log(
    `end to end: ${r.totalMs.toFixed(0)} ms = ${out.services_per_s} services/s ` +
      `(Cilium ~${CILIUM.services_per_s}; ratio ${out.ratio_vs_cilium_services_per_s})`,
  );
  console.log(
    `  ingest (k8s → tables): ${r.ingestMs.toFixed(0)} ms; reconcile (tables → maps): ${
      r.reconcileMs.toFixed(0)
    } ms, of which Maglev builds ${r.maglevMs.toFixed(0)} ms ` +
      `(${out.services_per_s_excluding_maglev} services/s without them)`,
  );
  console.log(
    `  plain-Maps baseline (no store): ${baseMs.toFixed(0)} ms; store pipeline takes ` +
      `${(r.totalMs / baseMs).toFixed(2)}× the baseline's time`,
  );
  console.log(
    `memory per service: retained ${out.retained_bytes_per_service} B (tables + reconciler state; ` +
      `${out.retained_with_memory_maps_bytes_per_service} B with the ${mapsCount} in-memory map entries), ` +
      `allocated ${out.allocated_bytes_per_service} B (Cilium ~3300 / ~14900)`,
  );
  console.log(
    `write txns: ${out.commits_per_s} commits/s; commit → watcher wake p50 ${out.watch_wake_p50_us} µs, ` +
      `p99 ${out.watch_wake_p99_us} µs`,
  );
  console.log(JSON.stringify(out));
}

if (import.meta.main) await main();
