/**
 * The IPv6 part of `bench/datapath.ts` (docs/contracts.md "IPv6"): ns per packet of hf_lb's
 * IPv6 path through BPF_PROG_TEST_RUN's in-kernel repeat loop on the restoring variants of
 * bpf/lb_bench.c (`hf_lb6_bench_*`, through hf_lb's dispatch), interleaved round by round with
 * the no-op floor, on an object of its own loaded like the IPv4 part's: one service of 10 IPv6
 * backends (M = 1021), and a second service of 10 IPv4 backends for a v6 client → v4 backend.
 *
 * @module
 */

import {
  BpfLBMaps,
  BpfObject,
  DEFAULT_OBJECT_DIR,
  encodeLbConfig,
  encodeServiceValue,
  REASONS,
  RingBufferReader,
  testRun,
  u32,
  XDP,
} from "../node/bpf/mod.ts";
import {
  encodeBackendValue6,
  encodeFlowKey6,
  encodeLbConfig6,
  encodeServiceKey6,
  SIZES6,
} from "../node/bpf/structs6.ts";
import { TsMaglevBuilder } from "../policy-as/host/maglev_ts.ts";
import { tcpFrame6 } from "../lab/packets6.ts";
import { median } from "./_stats.ts";

/** The IPv6 bench's LB IPs: IPv6 backends, IPv4 backends. */
export const VIP6 = "2001:db8:100::1";
export const VIP6_TO4 = "2001:db8:100::2";
/** The IPv6 bench's client. */
export const CLIENT6 = "2001:db8:a::1";

const frame = (dst: string, sport: number, flags: number, client = CLIENT6) =>
  tcpFrame6(client, dst, { sport, dport: 80, flags, payload: new Uint8Array(64) });
/** A new flow's first packet, a confirming ACK (as the IPv4 part's): Maglev, hf_flows6 insert and
 * event — a SYN would only be held in hf_flows_syn6. Ports 1024.. in the loop. */
const nextFrame = (client: string, dst: string) => frame(dst, 1024, 0x10, client);

/** Medians (ns per packet) of the IPv6 figures. */
export interface Ipv6Figures {
  floor_ns: number;
  hit_ns: number;
  miss_ns: number;
  miss_insert_delete_ns: number;
  hit_to_v4_backend_ns: number;
  miss_to_v4_backend_ns: number;
  pass_ns: number;
  hit_x_floor: number;
  miss_x_floor: number;
  repeat: number;
}

/** Loads `object`'s IPv6 maps: 10 IPv6 backends (IDs 11..20) behind VIP6, 10 IPv4 behind
 * VIP6_TO4, both M = 1021, five-tuple. */
async function populate6(o: BpfObject): Promise<void> {
  // every new flow shared at once, as in the IPv4 part: the path is measured, not the budget
  o.map("hf_config").update(
    u32(0),
    encodeLbConfig({ srcAddr: "10.1.1.2", encapPort: 6080, eventBudget: 0xffffffff }),
  );
  o.map("hf_config6").update(u32(0), encodeLbConfig6("2001:db8:1::2"));
  const lb = new BpfLBMaps({
    services: o.map("hf_services"),
    backends: o.map("hf_backends"),
    maglev: o.map("hf_maglev"),
  });
  const builder = new TsMaglevBuilder();
  const ids6 = Array.from({ length: 10 }, (_, i) => 11 + i);
  const ids4 = Array.from({ length: 10 }, (_, i) => 21 + i);
  for (const id of ids6) {
    o.map("hf_backends6").update(u32(id), encodeBackendValue6(`2001:db8:2::${id}`, 80));
  }
  for (const id of ids4) await lb.updateBackend(id, { address: `10.2.0.${id}`, port: 80 });
  const services = [[VIP6, 2, ids6], [VIP6_TO4, 3, ids4]] as const;
  for (const [vip, serviceId, ids] of services) {
    const slots = builder.build(ids.map((id) => ({ key: `b${id}`, weight: 1 })), 1021);
    await lb.updateMaglev(serviceId, Uint32Array.from(slots, (s) => (s === 0 ? 0 : ids[s - 1]!)));
    o.map("hf_services6").update(
      encodeServiceKey6(vip, 80, 6),
      encodeServiceValue({ serviceId, backendCount: 10, flags: 0, maglevSize: 1021 }),
    );
  }
}

/**
 * Measures the IPv6 figures: `rounds` interleaved rounds of `repeat` repetitions each (capped so
 * every miss repetition's 80-byte ring record fits hf_events6, drained before each run).
 */
export async function benchIpv6(opts: { repeat: number; rounds: number }): Promise<Ipv6Figures> {
  const repeat = Math.min(opts.repeat, 12_000);
  using o = BpfObject.open(`${DEFAULT_OBJECT_DIR}/lb_bench.o`);
  await populate6(o);
  const events = new RingBufferReader(o.map("hf_events6"), () => {});
  try {
    const hit = frame(VIP6, 40000, 0x10), hit4 = frame(VIP6_TO4, 40000, 0x10);
    const pass = frame("2001:db8:999::1", 40000, 0x10);
    for (const [name, f] of [["hf_lb6_bench_hit", hit], ["hf_lb6_bench_hit", hit4]] as const) {
      // the first run makes the flow; repeats must restore the frame exactly
      testRun(o.program(name), f);
      const r = testRun(o.program(name), f, { repeat: 3 });
      if (r.retval !== XDP.TX || r.data.length !== f.length || r.data[13] !== 0xdd) {
        throw new Error(`Cannot benchmark "${name}": repeat run did not restore the frame`);
      }
    }
    // The round's flows are deleted between rounds (outside the timed loop), as the IPv4 part
    // does, so every round inserts into a map with room.
    const dropRound = (client: string, vip: string) => {
      const keys = new Uint8Array(repeat * SIZES6.flow_key6);
      for (let i = 0; i < repeat; i++) {
        const key = { saddr: client, daddr: vip, sport: 1024 + i, dport: 80, proto: 6 };
        keys.set(encodeFlowKey6(key), i * SIZES6.flow_key6);
      }
      const removed = o.map("hf_flows6").deleteBatch(keys);
      if (removed !== repeat) throw new Error(`IPv6 miss round: removed ${removed} of ${repeat}`);
    };
    const run = (name: string, f: Uint8Array) => testRun(o.program(name), f, { repeat }).durationNs;
    const s = {
      floor: [] as number[],
      hit: [] as number[],
      miss: [] as number[],
      missDel: [] as number[],
      hit4: [] as number[],
      miss4: [] as number[],
      pass: [] as number[],
    };
    for (let round = 0; round < opts.rounds; round++) {
      s.floor.push(run("hf_bench_noop", hit));
      s.hit.push(run("hf_lb6_bench_hit", hit));
      s.hit4.push(run("hf_lb6_bench_hit", hit4));
      events.consume();
      // a new source address per round, ports 1024.. in the loop: a new key every repetition
      const client = `2001:db8:b::${round + 1}`;
      s.miss.push(run("hf_lb6_bench_miss_next", nextFrame(client, VIP6)));
      dropRound(client, VIP6);
      events.consume();
      s.miss4.push(run("hf_lb6_bench_miss_next", nextFrame(client, VIP6_TO4)));
      dropRound(client, VIP6_TO4);
      events.consume();
      s.missDel.push(run("hf_lb6_bench_miss", frame(VIP6, 50000, 0x10)));
      s.pass.push(run("hf_lb6_bench_hit", pass));
    }
    events.consume();
    const reasons = o.map("hf_reasons");
    const count = (n: typeof REASONS[number]) =>
      new BigUint64Array(reasons.lookup(u32(REASONS.indexOf(n)))!.buffer).reduce((a, b) => a + b);
    if (count("event_lost") !== 0n) throw new Error("IPv6 bench: new-flow events lost");
    const looped = BigInt(opts.rounds * repeat);
    if (count("tx_new") !== 2n + 3n * looped) {
      throw new Error(`IPv6 bench paths miscounted: tx_new ${count("tx_new")}`);
    }
    const m = Object.fromEntries(Object.entries(s).map(([k, v]) => [k, median(v)])) as Record<
      keyof typeof s,
      number
    >;
    return {
      floor_ns: m.floor,
      hit_ns: m.hit,
      miss_ns: m.miss,
      miss_insert_delete_ns: m.missDel,
      hit_to_v4_backend_ns: m.hit4,
      miss_to_v4_backend_ns: m.miss4,
      pass_ns: m.pass,
      hit_x_floor: +(m.hit / m.floor).toFixed(2),
      miss_x_floor: +(m.miss / m.floor).toFixed(2),
      repeat,
    };
  } finally {
    await events.close();
  }
}

/** The IPv6 lines of the bench's report. */
export function describeIpv6(f: Ipv6Figures): string[] {
  const x = (v: number) => `${(v / f.floor_ns).toFixed(2)}×`;
  const line = (name: string, v: number, note = "") =>
    `  ${name.padEnd(19)}${v.toFixed(1).padStart(7)} ns  ${x(v)} floor${note}`;
  return [
    `IPv6 (repeat=${f.repeat}, same method, own floor ${f.floor_ns.toFixed(1)} ns):`,
    line("v6 flow hit", f.hit_ns, "   (outer IPv6 to an IPv6 backend)"),
    line("v6 new flow (miss)", f.miss_ns, "   (a new key every repetition)"),
    line("v6 miss, ins.+del.", f.miss_insert_delete_ns),
    line("v6 hit, v4 backend", f.hit_to_v4_backend_ns, "   (outer IPv4)"),
    line("v6 miss, v4 backend", f.miss_to_v4_backend_ns),
    line("v6 not a frontend", f.pass_ns),
  ];
}
