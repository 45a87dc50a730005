/**
 * Health benchmark (`deno task bench:health`, root):
 *
 * 1. Detection: a virtual cluster (`lab/cluster.ts`: 2 LB nodes with real agents, 3 backends)
 *    whose service probes `GET /healthz` every 100 ms, fall 3. Each round kills one backend's
 *    server and times, from the kill, until it is out of every LB node's Maglev table (read from
 *    the pinned maps every 5 ms); then restarts it and waits until every node has it back.
 *    → `detect_to_all_nodes_ms_p50`, `detect_to_all_nodes_ms_max` (goal: max ≤ 400 ms; floor:
 *    the third failed probe comes 200–300 ms after the death, depending on the probe phase).
 *    Traced (Nov 2026): probes stay on their 100 ms schedule and fail at once (connect refused);
 *    the slower node's verdict to the table seen here takes 8–20 ms (Writer, Maglev build at
 *    M = 16,381, map write, this poll). One poll of both nodes takes ~5–8 ms (`maglevBackendsOf`);
 *    it took ~100–130 ms before it read only the tables hf_services names and only the backend IDs
 *    they hold, which added up to a poll to every round (max 420 ms then, 312 ms after).
 * 2. Swap: an in-process control plane over real BPF maps (no pinning, not attached) holding
 *    1,000 services × 10 backends; a policy module swap (release → debug build: a different
 *    digest, the same tables) rebuilds every Maglev table (`node/lb/policy_swap.ts`); a table equal
 *    to the installed one is not written again.
 *    → `swap_1000_services_ms` (goal ≤ 500 ms), from the end of the module's validation
 *    (`swap_validate_ms`, apart) until the reconciler is idle; `swap_memory_maps_ms` is the same
 *    swap over in-memory maps: the control plane's share (Maglev builds), without the kernel's.
 *    Then a swap to a module whose every table differs (`fixtures/rotated_fill.wasm`): each
 *    table built, staged whole, and installed per reconciler batch →
 *    `swap_1000_services_changed_tables_ms` (and `swap_changed_tables_memory_maps_ms`).
 * 3. Loss: a swap back to release (every table changes) with a new-flow SYN run through the XDP
 *    program (BPF_PROG_TEST_RUN) after every map write the swap makes — to the service just
 *    written and to a rotating other one — so packets see the maps between every two writes. A
 *    verdict other than XDP_TX is a lost packet → `packets_lost_during_swap` (goal 0),
 *    `packets_during_swap`.
 *    Same thread as the writes: it proves no packet sees a half-installed table at any point
 *    between writes, not concurrency inside a write (each table is swapped in whole by one
 *    map-in-map update; a reconciler batch's tables go in together, then their service entries).
 *
 * Also `maglev_slots_moved_pct`: the share of Maglev slots that differ between a node that has
 * quarantined 1 of 10 backends and one that has not (what a disagreement costs new flows that
 * move between them without a stored flow; docs/policy.md).
 *
 * `--quick`: 3 rounds, 100 services at M = 251 (seconds). Last line: one JSON object.
 *
 * @module
 */
import { createControlPlane } from "../node/lb/control_plane.ts";
import { FileSource } from "../node/lb/sources/file_source.ts";
import type { DumpOptions, LBMaps } from "../node/lb/maps/lbmaps.ts";
import { MemoryLBMaps } from "../node/lb/maps/memory.ts";
import { BACKEND_HEALTH_PORT, backendAddress, Cluster, maglevBackendsOf } from "../lab/mod.ts";
import { tcpFrame } from "../lab/packets.ts";
import { choiceOption, intOption, readCommandLineOrExit } from "../lib/args.ts";
import { log, setLogLevel } from "../lib/log.ts";
import { Datapath, testRun, XDP } from "../node/bpf/mod.ts";
import { policySwapper } from "../node/lb/policy_swap.ts";
import { PolicyHost, TsMaglevBuilder, WasmMaglevBuilder } from "../policy-as/host/mod.ts";
import { median } from "./_stats.ts";

const OPTIONS = {
  command: "bench:health",
  usage:
    `usage: deno task bench:health [--rounds=N] [--services=N] [--maglev=M] [--only=PART] [--quick]
  --quick: 3 rounds, 100 services at M=251 (a smoke test of seconds, not a figure)
  --only: all (default), detection, or swap (the swap over real and in-memory maps alone)`,
  options: {
    rounds: { type: "string" },
    services: { type: "string" },
    maglev: { type: "string" },
    only: { type: "string" },
    quick: { type: "boolean" },
  },
} as const;

const opts = readCommandLineOrExit(Deno.args, OPTIONS, ({ values }) => {
  const quick = values.quick === true;
  return {
    quick,
    rounds: intOption(values, "rounds", { default: quick ? 3 : 20, min: 1 }),
    services: intOption(values, "services", { default: quick ? 100 : 1000, min: 1, max: 4000 }),
    maglev: intOption(values, "maglev", { default: quick ? 251 : 16381, min: 251 }),
    only: choiceOption(values, "only", ["all", "detection", "swap"]),
  };
});

const INTERVAL_MS = 100;
const FALL = 3;
const BACKENDS_PER_SERVICE = 10;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

/** Polls every LB node's Maglev tables until `want` holds on all; ms taken, bounded. */
async function untilEveryNode(
  cluster: Cluster,
  want: (backends: string[]) => boolean,
  timeoutMs: number,
): Promise<number> {
  const start = performance.now();
  for (let k = 0; k < 10_000 && performance.now() - start < timeoutMs; k++) {
    const nodes = [...cluster.lbNodes.keys()].map((i) => maglevBackendsOf(cluster, i));
    if (nodes.every(want)) return performance.now() - start;
    await sleep(5);
  }
  throw new Error(`Not on every LB node after ${timeoutMs} ms`);
}

async function detection(rounds: number): Promise<number[]> {
  await using cluster = await Cluster.create({
    lbNodes: 2,
    backends: 3,
    healthCheck: {
      kind: "http",
      port: BACKEND_HEALTH_PORT,
      path: "/healthz",
      intervalMs: INTERVAL_MS,
      timeoutMs: INTERVAL_MS,
      rise: 2,
      fall: FALL,
      backoffBaseMs: 100,
      backoffMaxMs: 200,
    },
  });
  const all = [1, 2, 3].map(backendAddress);
  await untilEveryNode(cluster, (b) => all.every((a) => b.includes(a)), 10_000);
  const took: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const j = (r % 3) + 1;
    const dead = backendAddress(j);
    // A random phase against the probes, as a real death has.
    await sleep(Math.random() * INTERVAL_MS);
    const t0 = performance.now();
    await cluster.backends.get(j)!.stop("SIGKILL", 0);
    await untilEveryNode(cluster, (b) => !b.includes(dead), 5_000);
    took.push(performance.now() - t0);
    await cluster.startBackendServer(j);
    await untilEveryNode(cluster, (b) => b.includes(dead), 10_000);
  }
  return took;
}

/** Runs a SYN of a new flow to `vips[k]` after every map write of `inner`; counts verdicts. */
class ProbingMaps implements LBMaps {
  probing = false;
  sent = 0;
  lost = 0;
  #port = 1024;
  #next = 0;
  constructor(
    readonly inner: LBMaps,
    readonly program: Parameters<typeof testRun>[0],
    readonly vips: string[],
  ) {}
  get capacity() {
    return this.inner.capacity;
  }
  #probe(): void {
    if (!this.probing) return;
    for (const vip of [this.vips[this.#next++ % this.vips.length]!, this.vips[0]!]) {
      this.#port = this.#port >= 65000 ? 1024 : this.#port + 1;
      const frame = tcpFrame("10.0.0.1", vip, { sport: this.#port, dport: 80, flags: 0x02 });
      this.sent++;
      if (testRun(this.program, frame).retval !== XDP.TX) this.lost++;
    }
  }
  #after<T>(p: Promise<T>): Promise<T> {
    return p.then((v) => (this.#probe(), v));
  }
  updateBackend(...a: Parameters<LBMaps["updateBackend"]>) {
    return this.#after(this.inner.updateBackend(...a));
  }
  deleteBackend(id: number) {
    return this.#after(this.inner.deleteBackend(id));
  }
  updateMaglev(...a: Parameters<LBMaps["updateMaglev"]>) {
    return this.#after(this.inner.updateMaglev(...a));
  }
  deleteMaglev(id: number) {
    return this.#after(this.inner.deleteMaglev(id));
  }
  /** Staging writes nothing the datapath sees; the commit does (a probe after it). */
  get stageMaglev() {
    const inner = this.inner;
    return inner.stageMaglev && ((id: number, t: Uint32Array) => inner.stageMaglev!(id, t));
  }
  get commitMaglev() {
    const inner = this.inner;
    return inner.commitMaglev && (() => this.#after(inner.commitMaglev!()));
  }
  updateService(...a: Parameters<LBMaps["updateService"]>) {
    return this.#after(this.inner.updateService(...a));
  }
  deleteService(...a: Parameters<LBMaps["deleteService"]>) {
    return this.#after(this.inner.deleteService(...a));
  }
  dump(options?: DumpOptions) {
    return this.inner.dump(options);
  }
}

/** A swap over the real BPF maps, or (`memory`) over in-memory maps: the control plane alone. */
async function swap(services: number, m: number, target: "bpf" | "memory") {
  using dp = await Datapath.open({ pinDir: null });
  dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 0 });
  const vip = (i: number) => `10.${100 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
  const vips = Array.from({ length: services }, (_, i) => vip(i + 1));
  const maps = new ProbingMaps(
    target === "bpf" ? dp.lbMaps() : new MemoryLBMaps(),
    dp.program,
    vips,
  );
  const policy = await PolicyHost.create();
  const release = await Deno.readFile(new URL("../policy-as/build/release.wasm", import.meta.url));
  const debug = await Deno.readFile(new URL("../policy-as/build/debug.wasm", import.meta.url));
  if (!(await policy.swap(release)).ok) throw new Error("release.wasm rejected");
  const cp = await createControlPlane(maps, {
    maglev: new WasmMaglevBuilder(policy, { fallback: new TsMaglevBuilder() }),
    maglevSize: m,
  });
  const file = new FileSource(cp.writer);
  cp.start();
  file.load(
    JSON.stringify({
      services: vips.map((v, i) => ({
        name: `bench/s${i}`,
        frontends: [`${v}:80/TCP`],
        backends: Array.from({ length: BACKENDS_PER_SERVICE }, (_, b) => ({
          address: `10.${200 + (i >> 12)}.${(i >> 4) & 255}.${((i & 15) << 4) + b + 1}:8080/TCP`,
        })),
      })),
    }),
    { format: "json" },
  );
  await cp.reconciler.waitIdle();
  // The swap's validation (golden vectors, limits) is timed apart from the rebuild it starts.
  let validateMs = 0;
  const validating = {
    swap: async (bytes: Uint8Array, o?: { source?: string }) => {
      const t = performance.now();
      const r = await policy.swap(bytes, o);
      validateMs = performance.now() - t;
      return r;
    },
  } as unknown as PolicyHost;
  const swapper = policySwapper(validating, cp, log.with({ component: "bench" }));
  const timed = async (bytes: Uint8Array) => {
    const t0 = performance.now();
    const r = await swapper(bytes, "bench");
    if (!r.ok) throw new Error(`swap rejected: ${r.error}`);
    await cp.reconciler.waitIdle();
    return { totalMs: performance.now() - t0, validateMs };
  };
  const first = await timed(debug); // release → debug: every table rebuilt, none differs
  const rotated = await Deno.readFile(
    new URL("../policy-as/build/fixtures/rotated_fill.wasm", import.meta.url),
  );
  const changed = await timed(rotated); // debug → rotated: every table differs, all installed
  maps.probing = target === "bpf";
  await timed(release); // and back (every table again), with packets between every two writes
  maps.probing = false;
  await cp.stop();
  return {
    ...first,
    changedMs: changed.totalMs - changed.validateMs,
    sent: maps.sent,
    lost: maps.lost,
  };
}

/** Share of slots that differ between tables with all 10 backends and with 9 (one quarantined). */
function slotsMoved(m: number): number {
  const builder = new TsMaglevBuilder();
  const all = Array.from({ length: 10 }, (_, i) => ({ key: `10.3.0.${i + 1}:8080`, weight: 1 }));
  const a = builder.build(all, m);
  const b = builder.build(all.slice(1), m);
  let differ = 0;
  // IDs are input index + 1: all[k] is a[k+1] and b[k] (shifted by the removed first one).
  for (let s = 0; s < m; s++) if (a[s]! - 1 !== b[s]!) differ++;
  return (100 * differ) / m;
}

if (import.meta.main) {
  setLogLevel("warn");
  const took = opts.only === "swap" ? [] : await detection(opts.rounds);
  // The swap is CPU-bound (2 CPUs here, shared): the load it ran under goes with its figures.
  const loadBefore = Deno.loadavg()[0]!;
  const swaps = opts.only === "detection" ? null : {
    s: await swap(opts.services, opts.maglev, "bpf"),
    mem: await swap(opts.services, opts.maglev, "memory"),
  };
  const ms = (x: number | undefined) => x === undefined ? null : Math.round(x);
  const s = swaps?.s, mem = swaps?.mem;
  const result = {
    bench: "health",
    quick: opts.quick,
    only: opts.only,
    rounds: opts.rounds,
    probe: `http every ${INTERVAL_MS} ms, fall ${FALL}`,
    detect_to_all_nodes_ms_p50: took.length ? Math.round(median(took)) : null,
    detect_to_all_nodes_ms_p90: took.length ? Math.round(pct(took, 0.9)) : null,
    detect_to_all_nodes_ms_max: took.length ? Math.round(Math.max(...took)) : null,
    services: opts.services,
    backends_per_service: BACKENDS_PER_SERVICE,
    maglev_m: opts.maglev,
    [`swap_${opts.services}_services_ms`]: ms(s && s.totalMs - s.validateMs),
    swap_validate_ms: ms(s?.validateMs),
    swap_memory_maps_ms: ms(mem && mem.totalMs - mem.validateMs),
    [`swap_${opts.services}_services_changed_tables_ms`]: ms(s?.changedMs),
    swap_changed_tables_memory_maps_ms: ms(mem?.changedMs),
    ...(opts.services === 1000 ? {} : { swap_1000_services_ms: null }),
    packets_during_swap: s?.sent ?? null,
    packets_lost_during_swap: s?.lost ?? null,
    maglev_slots_moved_pct: Number(slotsMoved(opts.maglev).toFixed(2)),
    load_1m: [loadBefore, Deno.loadavg()[0]!].map((l) => Number(l.toFixed(2))),
    goals: { detect_max_ms: 400, swap_1000_ms: 500, lost: 0 },
  };
  if (took.length) {
    console.log(`detection rounds (ms): ${took.map((t) => Math.round(t)).join(" ")}`);
  }
  console.log(JSON.stringify(result));
}
