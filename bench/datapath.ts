/**
 * Datapath benchmark: ns per packet of the LB XDP program through BPF_PROG_TEST_RUN for the
 * flow-hit path and the new-flow (miss) path, side by side in one run with a no-op XDP program
 * (the floor), each measured by the same method.
 *
 * Two methods, because BPF_PROG_TEST_RUN's repeat loop reuses one buffer (FINDINGS):
 *  1. "repeat loop": the in-kernel loop (repeat = R) on bench variants of hf_lb that undo their
 *     own rewrite (bpf/lb_bench.c), so every repetition does the full work; the undo costs are
 *     included. Floor: a no-op program in the same loop. This is the headline. The bench drains
 *     the variants' ring buffer before every miss run, so every repetition's new-flow event is
 *     really reserved and submitted (a full ring would skip the submit), and checks that none
 *     was lost. Three new-flow figures:
 *     - miss (headline, `miss_ns`): a new key every repetition — the variant bumps the source
 *       port after its undo; nothing deleted, the map has room (the bench deletes the round's
 *       flows between rounds, outside the timed loop);
 *     - miss, full map: the same after filling hf_flows to max_entries, so every insert evicts
 *       (a busy LB's steady state);
 *     - miss, insert + delete: the earlier method — one key, the variant deletes the flow it
 *       created. It recycles one hot LRU node and bucket, so it is the cheapest of the three.
 *  2. "fresh packet": repeat = 1, a fresh copy of the packet per call, many calls (Katran's
 *     tester style), on the real hf_lb; the kernel's per-call duration includes one clock read,
 *     which dominates small programs. Miss uses a new source port each call.
 *
 * Run: `deno task bench:datapath` (root; builds bpf/ first). Flags: `--repeat=R` (20000),
 * `--rounds=N` (15), `--calls=C` (5000), `--baseline=PATH.o` (another build of bpf/lb_bench.c,
 * e.g. of an earlier commit, measured by method 1 in the same loop, interleaved), `--quick` (a
 * smoke run of seconds). The last line is one JSON object with floor_ns, hit_ns,
 * miss_ns (method 1), the other miss figures, the method-2 figures, and `ipv6` (hit and miss of
 * the IPv6 path by method 1, bench/_datapath6.ts).
 *
 * @module
 */

import {
  BpfFlowTable,
  BpfLBMaps,
  BpfObject,
  Datapath,
  DEFAULT_OBJECT_DIR,
  encodeLbConfig,
  FLOW_KEY_SIZE,
  type LbConfig,
  makeFlowKey,
  REASONS,
  RingBufferReader,
  testRun,
  u32,
  writeFlowKey,
  XDP,
} from "../node/bpf/mod.ts";
import { intOption, readCommandLineOrExit, stringOption } from "../lib/args.ts";
import { tcpFrame } from "../lab/packets.ts";
import { median } from "./_stats.ts";
import { hitFrame, missFrame, passFrame, populate, VIP } from "./_datapath_setup.ts";
import { benchIpv6, describeIpv6 } from "./_datapath6.ts";

const OPTS = readCommandLineOrExit(Deno.args, {
  command: "bench:datapath",
  usage: `usage: deno task bench:datapath [--repeat=R] [--rounds=N] [--calls=C] [--baseline=PATH.o]
                                [--quick]
  --quick: repeat=500, rounds=2, calls=200 (a smoke test of seconds, not a figure)`,
  options: {
    repeat: { type: "string" },
    rounds: { type: "string" },
    calls: { type: "string" },
    baseline: { type: "string" },
    quick: { type: "boolean" },
  },
}, ({ values }) => {
  const quick = values.quick === true;
  return {
    repeat: intOption(values, "repeat", { default: quick ? 500 : 20_000, min: 1 }),
    rounds: intOption(values, "rounds", { default: quick ? 2 : 15, min: 1 }),
    calls: intOption(values, "calls", { default: quick ? 200 : 5_000, min: 1 }),
    baseline: stringOption(values, "baseline"),
  };
});
const REPEAT = OPTS.repeat;
const ROUNDS = OPTS.rounds;
const CALLS = OPTS.calls;

// ---- method 1: in-kernel repeat loop on the restoring variants
const NEXT_SPORT = 1024;
if (NEXT_SPORT + REPEAT > 65536) throw new Error(`--repeat=${REPEAT} exceeds the port range`);
// Every miss repetition submits a 32-byte event (48 bytes in the ring): drained before each run.
if (REPEAT * 48 > (1 << 20)) throw new Error(`--repeat=${REPEAT} overflows the 1 MiB ring buffer`);
const nextClient = (round: number) => `10.3.${(round >> 8) & 255}.${round & 255}`;
/** The miss_next frame of a round: its own client address, ports NEXT_SPORT.. in the loop. */
const nextFrame = (round: number) =>
  tcpFrame(nextClient(round), VIP, {
    sport: NEXT_SPORT,
    dport: 80,
    flags: 0x10, // confirming (ACK): shared at once, like missFrame
    payload: new Uint8Array(64),
  });
/** The flow keys one miss_next run of `round` created. */
function nextKeys(round: number): Uint8Array {
  const keys = new Uint8Array(REPEAT * FLOW_KEY_SIZE);
  const view = new DataView(keys.buffer);
  for (let i = 0; i < REPEAT; i++) {
    writeFlowKey(
      view,
      i * FLOW_KEY_SIZE,
      makeFlowKey({
        saddr: nextClient(round),
        daddr: VIP,
        sport: NEXT_SPORT + i,
        dport: 80,
        proto: 6,
      }),
    );
  }
  return keys;
}

/** One lb_bench object under test: its programs, its own maps, its samples. */
class Subject {
  readonly object: BpfObject;
  readonly events: RingBufferReader;
  readonly loop = {
    floor: [] as number[],
    hit: [] as number[],
    miss: [] as number[],
    missNew: [] as number[],
    missFull: [] as number[],
    pass: [] as number[],
    undo: [] as number[],
  };

  constructor(readonly path: string) {
    this.object = BpfObject.open(path);
    this.events = new RingBufferReader(this.object.map("hf_events"), () => {});
  }

  /** Fills the maps, creates the hit path's flow and checks that the variants restore. */
  async prepare(): Promise<void> {
    const o = this.object;
    await populate({
      configure: (cfg: LbConfig) => o.map("hf_config").update(u32(0), encodeLbConfig(cfg)),
      lbMaps: () =>
        new BpfLBMaps({
          services: o.map("hf_services"),
          backends: o.map("hf_backends"),
          maglev: o.map("hf_maglev"),
        }),
    });
    if (testRun(o.program("hf_lb_bench_hit"), hitFrame).retval !== XDP.TX) {
      throw new Error(`Cannot benchmark "${this.path}": hit variant did not XDP_TX`);
    }
    for (const [name, f] of [["hf_lb_bench_hit", hitFrame], ["hf_lb_bench_miss", missFrame]]) {
      const r = testRun(o.program(name as string), f as Uint8Array, { repeat: 3 });
      if (r.retval !== XDP.TX || r.data.length !== (f as Uint8Array).length) {
        throw new Error(
          `Cannot benchmark "${name}" of "${this.path}": repeat run did not restore the frame (len ${r.data.length})`,
        );
      }
    }
  }

  #run(name: string, frame: Uint8Array): number {
    return testRun(this.object.program(name), frame, { repeat: REPEAT }).durationNs;
  }

  /** One interleaved round of every figure but the full-map one. */
  round(round: number): void {
    this.loop.floor.push(this.#run("hf_bench_noop", hitFrame));
    this.loop.hit.push(this.#run("hf_lb_bench_hit", hitFrame));
    this.events.consume();
    this.loop.miss.push(this.#run("hf_lb_bench_miss", missFrame));
    this.events.consume();
    this.loop.missNew.push(this.#run("hf_lb_bench_miss_next", nextFrame(round)));
    const removed = this.object.map("hf_flows").deleteBatch(nextKeys(round));
    if (removed !== REPEAT) throw new Error(`miss_next round ${round}: removed ${removed} flows`);
    this.loop.pass.push(this.#run("hf_lb_bench_hit", passFrame));
    this.loop.undo.push(this.#run("hf_bench_undo_only", hitFrame));
  }

  /** Fills hf_flows to max_entries, so that every later insert has to evict. */
  fill(): void {
    const flows = new BpfFlowTable(this.object.map("hf_flows"));
    const value = { backend: 0x0a020001, /* 10.2.0.1 */ flags: 0, lastSeenNs: 1 };
    flows.putBatch(Array.from({ length: this.object.map("hf_flows").maxEntries }, (_, i) => ({
      key: makeFlowKey({
        saddr: `10.4.${(i >> 8) & 255}.${i & 255}`,
        daddr: VIP,
        sport: 1024 + (i >> 16),
        dport: 80,
        proto: 6,
      }),
      value,
    })));
  }

  /** One full-map round (after fill()). */
  roundFull(round: number): void {
    this.events.consume();
    this.loop.missFull.push(this.#run("hf_lb_bench_miss_next", nextFrame(1000 + round)));
  }

  /** A reason counter, summed over CPUs. */
  reason(name: typeof REASONS[number]): bigint {
    const v = this.object.map("hf_reasons").lookup(u32(REASONS.indexOf(name)))!;
    return new BigUint64Array(v.buffer).reduce((a, b) => a + b, 0n);
  }

  /** Checks that no event was lost and every timed repetition took the path it claims (1 + 3
   * setup runs, then ROUNDS × REPEAT per variant); returns the medians. */
  result() {
    this.events.consume();
    const lost = this.reason("event_lost");
    if (lost !== 0n) throw new Error(`${lost} new-flow events lost: ring not drained`);
    const looped = BigInt(ROUNDS * REPEAT);
    const txHit = this.reason("tx_hit"), txNew = this.reason("tx_new");
    if (txHit !== 3n + looped || txNew !== 4n + 3n * looped) {
      throw new Error(
        `bench paths miscounted in "${this.path}": tx_hit ${txHit} (expected ${3n + looped}), ` +
          `tx_new ${txNew} (expected ${4n + 3n * looped})`,
      );
    }
    const l = this.loop;
    return {
      floor: median(l.floor),
      hit: median(l.hit),
      miss: median(l.miss),
      missNew: median(l.missNew),
      missFull: median(l.missFull),
      pass: median(l.pass),
      undo: median(l.undo) - median(l.floor),
    };
  }

  async close(): Promise<void> {
    await this.events.close();
    this.object[Symbol.dispose]();
  }
}

// --baseline=PATH.o: another build of lb_bench.c (e.g. of an earlier commit) measured in the
// same run, interleaved round by round, for before/after comparisons.
const baselinePath = OPTS.baseline;
const subjects = [new Subject(`${DEFAULT_OBJECT_DIR}/lb_bench.o`)];
if (baselinePath) subjects.push(new Subject(baselinePath));
for (const s of subjects) await s.prepare();
for (let round = 0; round < ROUNDS; round++) {
  // interleaved so every figure (and every subject) sees the same noise
  for (const s of subjects) s.round(round);
}
for (const s of subjects) s.fill();
for (let round = 0; round < ROUNDS; round++) for (const s of subjects) s.roundFull(round);
const [m1, base] = subjects.map((s) => s.result()) as [
  ReturnType<Subject["result"]>,
  ReturnType<Subject["result"]> | undefined,
];
for (const s of subjects) await s.close();
// IPv6 hit and miss beside IPv4, same method, own object and floor (bench/_datapath6.ts)
const v6 = await benchIpv6({ repeat: REPEAT, rounds: ROUNDS });

// ---- method 2: fresh packet per call on the real program
using dp = await Datapath.open({ pinDir: null });
await populate(dp);
using pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
const floorProg = pass.program("hf_xdp_pass");
testRun(dp.program, hitFrame);
const reader = dp.subscribe(() => {});
const fresh = { floor: [] as number[], hit: [] as number[], miss: [] as number[] };
const missFrames = Array.from(
  { length: CALLS },
  (_, i) =>
    tcpFrame(`10.0.${(i >> 8) & 255}.${i & 255}`, VIP, {
      sport: 1024 + (i % 60000),
      dport: 80,
      flags: 0x10, // confirming (ACK): the shared new-flow path
      payload: new Uint8Array(64),
    }),
);
for (let i = 0; i < CALLS; i++) {
  fresh.floor.push(testRun(floorProg, hitFrame).durationNs);
  fresh.hit.push(testRun(dp.program, hitFrame).durationNs);
  const r = testRun(dp.program, missFrames[i]!);
  if (r.retval !== XDP.TX) throw new Error(`miss call ${i} returned ${r.retval}`);
  fresh.miss.push(r.durationNs);
  if (i % 1000 === 999) reader.consume();
}
await reader.close();
const reasons = dp.reasons();
if (reasons.tx_new !== BigInt(CALLS + 1)) {
  throw new Error(`expected ${CALLS + 1} new flows (1 warm-up), counted ${reasons.tx_new}`);
}
const m2 = { floor: median(fresh.floor), hit: median(fresh.hit), miss: median(fresh.miss) };

const r2 = (x: number, f: number) => `${(x / f).toFixed(2)}×`;
console.log(
  `BPF_PROG_TEST_RUN, hf_lb with 1 service, 10 backends, Maglev M=1021, 118-byte TCP frame`,
);
console.log(
  `method 1 — in-kernel repeat loop (repeat=${REPEAT}, median of ${ROUNDS} rounds), restoring variants:`,
);
console.log(`  floor (no-op XDP)  ${m1.floor.toFixed(1).padStart(7)} ns`);
console.log(
  `  flow hit           ${m1.hit.toFixed(1).padStart(7)} ns  ${
    r2(m1.hit, m1.floor)
  } floor   (goal ≤ 3×)`,
);
console.log(
  `  new flow (miss)    ${m1.missNew.toFixed(1).padStart(7)} ns  ${
    r2(m1.missNew, m1.floor)
  } floor   (goal ≤ 6×; a new key every repetition, map has room)`,
);
console.log(
  `  miss, full map     ${m1.missFull.toFixed(1).padStart(7)} ns  ${
    r2(m1.missFull, m1.floor)
  } floor   (the same with hf_flows at max_entries: every insert evicts)`,
);
console.log(
  `  miss, ins.+delete  ${m1.miss.toFixed(1).padStart(7)} ns  ${
    r2(m1.miss, m1.floor)
  } floor   (earlier method: one key, inserted and deleted; recycles a hot LRU node)`,
);
console.log(
  `  not a frontend     ${m1.pass.toFixed(1).padStart(7)} ns  ${
    r2(m1.pass, m1.floor)
  } floor   (other traffic on an LB node: parse + service lookup, XDP_PASS)`,
);
console.log(
  `  (a grow-by-28-then-restore program costs ${
    m1.undo.toFixed(1)
  } ns over the floor; about half of it, the restore, is inside hit and miss)`,
);
if (base) {
  console.log(
    `  baseline ${baselinePath} in the same loop (same order of figures): floor ${base.floor}, hit ${base.hit} (${
      r2(base.hit, base.floor)
    }), miss ${base.missNew} (${
      r2(base.missNew, base.floor)
    }), full map ${base.missFull}, ins.+delete ${base.miss}, not a frontend ${base.pass} ns`,
  );
}
for (const line of describeIpv6(v6)) console.log(line);
console.log(
  `method 2 — fresh packet per call (repeat=1, ${CALLS} calls, median of kernel-reported durations):`,
);
console.log(`  floor (no-op XDP)  ${m2.floor.toFixed(1).padStart(7)} ns`);
console.log(
  `  flow hit           ${m2.hit.toFixed(1).padStart(7)} ns  ${r2(m2.hit, m2.floor)} floor`,
);
console.log(
  `  new flow (miss)    ${m2.miss.toFixed(1).padStart(7)} ns  ${r2(m2.miss, m2.floor)} floor`,
);
console.log(
  `anchors: Katran 101–119 ns/packet (2.9 GHz VM, test-run); XDP paper 24 Mpps XDP_DROP/core (~42 ns)`,
);
console.log(JSON.stringify({
  bench: "datapath",
  method: "test_run repeat loop, restoring variants",
  floor_ns: m1.floor,
  hit_ns: m1.hit,
  miss_ns: m1.missNew,
  hit_x_floor: +(m1.hit / m1.floor).toFixed(2),
  miss_x_floor: +(m1.missNew / m1.floor).toFixed(2),
  miss_full_map_ns: m1.missFull,
  miss_insert_delete_ns: m1.miss,
  net_over_floor_ns: { hit: m1.hit - m1.floor, miss: m1.missNew - m1.floor },
  pass_ns: m1.pass,
  grow_restore_ns: m1.undo,
  fresh_packet: { floor_ns: m2.floor, hit_ns: m2.hit, miss_ns: m2.miss, calls: CALLS },
  ipv6: v6,
  repeat: REPEAT,
  rounds: ROUNDS,
  ...(base
    ? {
      baseline: {
        object: baselinePath,
        floor_ns: base.floor,
        hit_ns: base.hit,
        miss_ns: base.missNew,
        miss_full_map_ns: base.missFull,
        miss_insert_delete_ns: base.miss,
        pass_ns: base.pass,
      },
    }
    : {}),
}));
