/**
 * Datapath benchmark: ns per packet of the LB XDP program through BPF_PROG_TEST_RUN for the
 * flow-hit path and the new-flow (miss) path, side by side in one run with a no-op XDP program
 * (the floor), each measured by the same method.
 *
 * Two methods, because BPF_PROG_TEST_RUN's repeat loop reuses one buffer (FINDINGS):
 *  1. "repeat loop": the in-kernel loop (repeat = R) on bench variants of hf_lb that undo their
 *     own rewrite (bpf/lb_bench.c; the miss variant also deletes the flow it created), so every
 *     repetition does the full work. Undo costs are included, so hit/miss are slightly
 *     pessimistic. Floor: a no-op program in the same loop. This is the headline.
 *  2. "fresh packet": repeat = 1, a fresh copy of the packet per call, many calls (Katran's
 *     tester style), on the real hf_lb; the kernel's per-call duration includes one clock read,
 *     which dominates small programs. Miss uses a new source port each call.
 *
 * Run: `deno task bench:datapath` (root; builds bpf/ first). Flags: `--repeat=R` (20000),
 * `--rounds=N` (15), `--calls=C` (5000). The last line is one JSON object with floor_ns, hit_ns,
 * miss_ns (method 1) and the method-2 figures.
 *
 * @module
 */

import {
  BpfLBMaps,
  BpfObject,
  Datapath,
  DEFAULT_OBJECT_DIR,
  encodeLbConfig,
  type LbConfig,
  testRun,
  u32,
  XDP,
} from "../node/bpf/mod.ts";
import { TsMaglevBuilder } from "../policy-as/host/maglev_ts.ts";
import { tcpFrame } from "../tests/bpf/_packets.ts";

function flag(name: string, def: number): number {
  const a = Deno.args.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? def : Number(a.slice(name.length + 3));
}

const REPEAT = flag("repeat", 20_000);
const ROUNDS = flag("rounds", 15);
const CALLS = flag("calls", 5_000);
const VIP = "10.0.100.1";
const CLIENT = "10.0.0.1";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Loads a datapath object's maps with one service of 10 backends, M = 1021. */
async function populate(dp: { lbMaps(): BpfLBMaps; configure(cfg: LbConfig): void }) {
  dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 0 });
  const lb = dp.lbMaps();
  const backends = Array.from({ length: 10 }, (_, i) => i + 1);
  for (const id of backends) await lb.updateBackend(id, { address: `10.2.0.${id}`, port: 80 });
  const table = new TsMaglevBuilder().build(
    backends.map((id) => ({ key: `b${id}`, weight: 1 })),
    1021,
  );
  await lb.updateMaglev(1, table);
  await lb.updateService({ address: VIP, port: 80, protocol: "TCP" }, {
    serviceId: 1,
    backendCount: backends.length,
    flowKeyMode: "five-tuple",
    maglevSize: table.length,
  });
}

const hitFrame = tcpFrame(CLIENT, VIP, {
  sport: 40000,
  dport: 80,
  flags: 0x10,
  payload: new Uint8Array(64),
});

// ---- method 1: in-kernel repeat loop on the restoring variants
using bench = BpfObject.open(`${DEFAULT_OBJECT_DIR}/lb_bench.o`);
const benchMaps = {
  configure: (cfg: LbConfig) => bench.map("hf_config").update(u32(0), encodeLbConfig(cfg)),
  lbMaps: () =>
    new BpfLBMaps({
      services: bench.map("hf_services"),
      backends: bench.map("hf_backends"),
      maglev: bench.map("hf_maglev"),
    }),
};
await populate(benchMaps);
const noop = bench.program("hf_bench_noop");
const hit = bench.program("hf_lb_bench_hit");
const miss = bench.program("hf_lb_bench_miss");
// create the flow for the hit path once
if (testRun(hit, hitFrame).retval !== XDP.TX) {
  throw new Error("Cannot benchmark: hit variant did not XDP_TX");
}
const missFrame = tcpFrame(CLIENT, VIP, {
  sport: 50000,
  dport: 80,
  flags: 0x02,
  payload: new Uint8Array(64),
});
for (const [p, f] of [[hit, hitFrame], [miss, missFrame]] as const) {
  const r = testRun(p, f, { repeat: 3 });
  if (r.retval !== XDP.TX || r.data.length !== f.length) {
    throw new Error(
      `Cannot benchmark "${p.name}": repeat run did not restore the frame (len ${r.data.length})`,
    );
  }
}
const loop = {
  floor: [] as number[],
  hit: [] as number[],
  miss: [] as number[],
  pass: [] as number[],
  undo: [] as number[],
};
const undoOnly = bench.program("hf_bench_undo_only");
// not for a frontend: parsed, looked up, passed untouched (nothing to restore)
const lbProg = bench.program("hf_lb_bench_hit");
const passFrame = tcpFrame(CLIENT, "10.9.9.9", {
  sport: 40000,
  dport: 80,
  flags: 0x10,
  payload: new Uint8Array(64),
});
for (let round = 0; round < ROUNDS; round++) {
  // interleaved so all three see the same noise
  loop.floor.push(testRun(noop, hitFrame, { repeat: REPEAT }).durationNs);
  loop.hit.push(testRun(hit, hitFrame, { repeat: REPEAT }).durationNs);
  loop.miss.push(testRun(miss, missFrame, { repeat: REPEAT }).durationNs);
  loop.pass.push(testRun(lbProg, passFrame, { repeat: REPEAT }).durationNs);
  loop.undo.push(testRun(undoOnly, hitFrame, { repeat: REPEAT }).durationNs);
}
const m1 = {
  floor: median(loop.floor),
  hit: median(loop.hit),
  miss: median(loop.miss),
  pass: median(loop.pass),
  undo: median(loop.undo) - median(loop.floor),
};

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
  `  new flow (miss)    ${m1.miss.toFixed(1).padStart(7)} ns  ${
    r2(m1.miss, m1.floor)
  } floor   (goal ≤ 6×; includes the delete that keeps it a miss)`,
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
  miss_ns: m1.miss,
  hit_x_floor: +(m1.hit / m1.floor).toFixed(2),
  miss_x_floor: +(m1.miss / m1.floor).toFixed(2),
  pass_ns: m1.pass,
  grow_restore_ns: m1.undo,
  fresh_packet: { floor_ns: m2.floor, hit_ns: m2.hit, miss_ns: m2.miss, calls: CALLS },
  repeat: REPEAT,
  rounds: ROUNDS,
}));
