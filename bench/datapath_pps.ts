/**
 * Real packets through veth: packets per second of real frames through the Holdfast path, beside
 * a baseline path without the LB in the same run.
 *
 * ```
 *  client ── c0 router ── l1 ── lb1 (XDP hf_lb: encapsulate, XDP_TX back to the router)
 *  eth0:     (forwards) ── b1 ── be1 (tc hf_decap; LB IP on lo)
 *  XDP gen
 * ```
 *
 * - generator: BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (kernel ≥ 5.18) runs
 *   `hf_xdp_gen` (bpf/xdp_gen.c) on a prebuilt 60-byte Ethernet+IPv4+UDP frame (client → LB IP,
 *   destination MAC = the router's c0) with the client's eth0 as ingress interface: every run's
 *   XDP_TX sends a real frame into the veth, so the router receives it like one from a NIC. The
 *   program writes the UDP source port per frame (`--flows` five-tuples, so the LB does flow hits
 *   after the first round; the decap side does not care). The router-side peers c0 and l1 run
 *   `hf_xdp_pass` natively (XDP_TX over veth needs a native program on the peer, FINDINGS).
 * - lb: the router routes the LB IP to lb1; `hf_lb` encapsulates and XDP_TXes back; the router
 *   forwards the outer packet to be1, whose tc `hf_decap` strips it.
 * - baseline: the router routes the LB IP straight to be1 (same frames, same backend, decap
 *   program attached but nothing to strip).
 * - counted: packets received by be1's eth0 (`ip -s -j link` inside be1) over the wall time of
 *   the generator calls; for the LB path also decapsulated packets (`hf_decap_stat`). Phases
 *   alternate lb, baseline, lb, baseline … and each mode's pps is summed over its phases.
 *
 * Everything runs on one machine: the generator, the router, the LB node and the backend share
 * the CPUs (the live-frames run processes each batch's softirq work on the calling CPU), so this
 * is a system number for the whole path, not the LB program alone.
 *
 * Run: `deno task bench:datapath-pps` (root; builds bpf/ first). Flags: `--seconds=S` per phase
 * (2), `--phases=N` per mode (2), `--flows=F` (256), `--batch=B` frames per test-run call
 * (65,536), `--quick` (a smoke run of seconds). The last line is one JSON object with pps_lb,
 * pps_baseline, ratio.
 *
 * @module
 */

import {
  attachXdp,
  BpfObject,
  type BpfProgram,
  Datapath,
  DecapDatapath,
  DEFAULT_OBJECT_DIR,
  ifIndex,
  inNetns,
  testRun,
  u32,
} from "../node/bpf/mod.ts";
import { createTopology, routerSpoke, type Topology } from "../lab/netns.ts";
import { TsMaglevBuilder } from "../policy-as/host/maglev_ts.ts";
import { udpFrame } from "../lab/packets.ts";
import { intOption, numberOption, readCommandLineOrExit } from "../lib/args.ts";

const OPTS = readCommandLineOrExit(Deno.args, {
  command: "bench:datapath-pps",
  usage: `usage: deno task bench:datapath-pps [--seconds=S (≤ 5)] [--phases=N (≤ 4)]
                                    [--flows=F (≤ 16384)] [--batch=B (≤ 1000000)] [--quick]
  --quick: one 0.5 s phase per mode, 4,096-frame batches (a smoke test, not a figure)`,
  options: {
    seconds: { type: "string" },
    phases: { type: "string" },
    flows: { type: "string" },
    batch: { type: "string" },
    quick: { type: "boolean" },
  },
}, ({ values }) => {
  const quick = values.quick === true;
  return {
    seconds: numberOption(values, "seconds", { default: quick ? 0.5 : 2, min: 0.1, max: 5 }),
    phases: intOption(values, "phases", { default: quick ? 1 : 2, min: 1, max: 4 }),
    flows: intOption(values, "flows", { default: 256, min: 1, max: 16_384 }),
    batch: intOption(values, "batch", { default: quick ? 4096 : 65_536, min: 1, max: 1_000_000 }),
  };
});

const SECONDS = OPTS.seconds;
const PHASES = OPTS.phases;
const FLOWS = OPTS.flows;
const BATCH = OPTS.batch;
const VIP = "10.0.100.1";
const PORT = 80;
const SPORT_BASE = 10_000;
const MAX_CALLS_PER_PHASE = 10_000;

function log(msg: string, fields: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ level: "info", msg, ...fields }));
}

const spokes = [
  routerSpoke("client", "c0", "10.10.0"),
  routerSpoke("lb1", "l1", "10.11.1"),
  routerSpoke("be1", "b1", "10.12.1"),
];
const spec = {
  hosts: [
    { name: "client" },
    {
      name: "router",
      sysctls: { "net.ipv4.ip_forward": 1, "net.ipv4.conf.all.rp_filter": 2 },
    },
    { name: "lb1" },
    { name: "be1", loopback: [`${VIP}/32`] },
  ],
  links: spokes.map((s) => s.link),
  routes: [
    ...spokes.map((s) => s.route),
    { host: "router", to: `${VIP}/32`, via: "10.11.1.2" },
  ],
};

async function macOf(topo: Topology, host: string, ifname: string): Promise<number[]> {
  const out = await topo.exec(host, ["ip", "-j", "link", "show", "dev", ifname]);
  const addr = (JSON.parse(out.stdout) as Array<{ address?: string }>)[0]?.address;
  if (!addr) throw new Error(`No MAC address for ${ifname} in ${host}: ${out.stdout}`);
  return addr.split(":").map((h) => parseInt(h, 16));
}

/** rx/tx packet counters of an interface, from `ip -s -j link` inside its namespace. */
async function linkStats(
  topo: Topology,
  host: string,
  ifname: string,
): Promise<{ rx: number; rxDropped: number; tx: number }> {
  const out = await topo.exec(host, ["ip", "-s", "-j", "link", "show", "dev", ifname]);
  const s = (JSON.parse(out.stdout) as Array<
    { stats64?: { rx: { packets: number; dropped: number }; tx: { packets: number } } }
  >)[0]?.stats64;
  if (!s) throw new Error(`No stats for ${ifname} in ${host}: ${out.stdout}`);
  return { rx: s.rx.packets, rxDropped: s.rx.dropped, tx: s.tx.packets };
}

/**
 * Sends `count` copies of `frame` as live frames out of `ifindex` (in the calling thread's
 * namespace) through the generator program; returns when the kernel has processed them all.
 */
function generate(prog: BpfProgram, frame: Uint8Array, ifindex: number, count: number): void {
  const ctx = new Uint32Array(6); // struct xdp_md
  ctx[1] = frame.length; // data_end
  ctx[3] = ifindex; // ingress_ifindex
  testRun(prog, frame, { repeat: count, ctxIn: new Uint8Array(ctx.buffer), liveFrames: true });
}

/** Sets the path up in `topo`, runs the phases and prints the summary line. */
async function bench(topo: Topology): Promise<void> {
  using pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
  using gen = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_gen.o`);
  using lb = await Datapath.open({ pinDir: null });
  using decap = await DecapDatapath.open();
  lb.configure({ srcAddr: "10.11.1.2", encapPort: 6080, seed: 0 });
  const maps = lb.lbMaps();
  await maps.updateBackend(1, { address: "10.12.1.2", port: PORT });
  const table = new TsMaglevBuilder().build([{ key: `10.12.1.2:${PORT}`, weight: 1 }], 251);
  await maps.updateMaglev(1, table);
  await maps.updateService({ address: VIP, port: PORT, protocol: "UDP" }, {
    serviceId: 1,
    backendCount: 1,
    flowKeyMode: "five-tuple",
    maglevSize: table.length,
  });
  lb.attach("eth0", { netns: topo.ns("lb1"), mode: "native" });
  attachXdp(pass.program("hf_xdp_pass"), "c0", { netns: topo.ns("router") });
  attachXdp(pass.program("hf_xdp_pass"), "l1", { netns: topo.ns("router") });
  decap.configure({ encapPort: 6080, mssMax: 1500 - 40 - 28 });
  decap.addLocalVip(VIP);
  decap.attach("eth0", { netns: topo.ns("be1") });
  gen.map("hf_gen_cfg").update(u32(0), u32(SPORT_BASE));
  gen.map("hf_gen_cfg").update(u32(1), u32(FLOWS));

  // Static neighbours on the router (the first frames would wait for ARP otherwise).
  for (const [to, dev, host] of [["10.11.1.2", "l1", "lb1"], ["10.12.1.2", "b1", "be1"]] as const) {
    const mac = (await macOf(topo, host, "eth0")).map((b) => b.toString(16).padStart(2, "0"));
    await topo.exec("router", ["ip", "neigh", "replace", to, "lladdr", mac.join(":"), "dev", dev]);
  }

  const frame = udpFrame("10.10.0.2", VIP, SPORT_BASE, PORT, new Uint8Array(18));
  frame.set(await macOf(topo, "router", "c0"), 0);
  frame.set(await macOf(topo, "client", "eth0"), 6);
  new DataView(frame.buffer).setUint16(40, 0); // UDP checksum 0: the generator rewrites ports
  gen.map("hf_gen_tmpl").update(u32(0), frame.slice(0, 42));
  const clientNs = topo.ns("client");
  const ifindex = inNetns(clientNs, () => ifIndex("eth0"));
  const genProg = gen.program("hf_xdp_gen");

  const phase = async (mode: "lb" | "baseline") => {
    const via = mode === "lb" ? "10.11.1.2" : "10.12.1.2";
    await topo.exec("router", ["ip", "route", "replace", `${VIP}/32`, "via", via]);
    inNetns(clientNs, () => generate(genProg, frame, ifindex, 1024)); // warm-up, untimed
    await new Promise((r) => setTimeout(r, 50));
    const before = await linkStats(topo, "be1", "eth0");
    const c0Before = await linkStats(topo, "router", "c0");
    const b1Before = await linkStats(topo, "router", "b1");
    const l1Before = await linkStats(topo, "router", "l1");
    const lbBefore = await linkStats(topo, "lb1", "eth0");
    const decapBefore = decap.stats().decap;
    let sent = 0;
    let calls = 0;
    const t0 = performance.now();
    const end = t0 + SECONDS * 1000;
    while (performance.now() < end && calls < MAX_CALLS_PER_PHASE) {
      inNetns(clientNs, () => generate(genProg, frame, ifindex, BATCH));
      sent += BATCH;
      calls++;
    }
    const seconds = (performance.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 100)); // let softirq/ksoftirqd drain the rings
    const after = await linkStats(topo, "be1", "eth0");
    const c0After = await linkStats(topo, "router", "c0");
    const b1After = await linkStats(topo, "router", "b1");
    const l1After = await linkStats(topo, "router", "l1");
    const lbAfter = await linkStats(topo, "lb1", "eth0");
    const delivered = after.rx - before.rx;
    const r = {
      mode,
      seconds: Number(seconds.toFixed(3)),
      sent,
      router_rx: c0After.rx - c0Before.rx,
      // where frames were lost: ring full at the router's c0 (generator faster than the router),
      // at lb1's eth0 (router → LB) or at the router's l1 (LB's XDP_TX → router)
      dropped: {
        router_c0: c0After.rxDropped - c0Before.rxDropped,
        lb1_eth0: lbAfter.rxDropped - lbBefore.rxDropped,
        router_l1: l1After.rxDropped - l1Before.rxDropped,
      },
      router_tx_b1: b1After.tx - b1Before.tx,
      backend_rx_dropped: after.rxDropped - before.rxDropped,
      delivered,
      decapsulated: Number(decap.stats().decap - decapBefore),
      pps: Math.round(delivered / seconds),
      delivered_fraction: Number((delivered / sent).toFixed(4)),
    };
    log("phase", r);
    if (Deno.env.get("HF_DEBUG")) { // HF_DEBUG=1: the router's counters after each phase
      for (const argv of [["nstat", "-a"], ["ip", "-s", "link"]]) {
        console.log((await topo.exec("router", argv, { check: false })).stdout);
      }
    }
    return r;
  };

  const results: Array<Awaited<ReturnType<typeof phase>>> = [];
  for (let i = 0; i < PHASES; i++) {
    results.push(await phase("lb"));
    results.push(await phase("baseline"));
  }
  const sum = (mode: string) => {
    const rs = results.filter((r) => r.mode === mode);
    const delivered = rs.reduce((s, r) => s + r.delivered, 0);
    const seconds = rs.reduce((s, r) => s + r.seconds, 0);
    const sent = rs.reduce((s, r) => s + r.sent, 0);
    return { pps: Math.round(delivered / seconds), delivered, sent, seconds };
  };
  const l = sum("lb");
  const b = sum("baseline");
  for (const [mode, m] of [["lb", l], ["baseline", b]] as const) {
    if (m.delivered < m.sent / 2) {
      throw new Error(
        `${mode} path: only ${m.delivered} of ${m.sent} generated frames reached the backend`,
      );
    }
  }
  const lbDecap = results.filter((r) => r.mode === "lb").reduce((s, r) => s + r.decapsulated, 0);
  if (lbDecap < l.delivered * 0.99) {
    throw new Error(
      `LB path: only ${lbDecap} of ${l.delivered} packets at the backend were decapsulated`,
    );
  }
  const reasons = lb.reasons();
  console.log(JSON.stringify({
    bench: "datapath_pps",
    method: "BPF_PROG_TEST_RUN live frames (XDP_TX from the client's veth), rx at the backend",
    pps_lb: l.pps,
    pps_baseline: b.pps,
    ratio: Number((l.pps / b.pps).toFixed(3)),
    frame_bytes: frame.length,
    flows: FLOWS,
    seconds_per_phase: SECONDS,
    phases_per_mode: PHASES,
    delivered_fraction: {
      lb: Number((l.delivered / l.sent).toFixed(4)),
      baseline: Number((b.delivered / b.sent).toFixed(4)),
    },
    lb_tx: { new: Number(reasons.tx_new), hit: Number(reasons.tx_hit) },
    phases: results.map((r) => ({ mode: r.mode, pps: r.pps })),
    load1: Deno.loadavg()[0],
  }));
}

const topo = await createTopology(spec);
let exitCode = 0;
try {
  await bench(topo);
} catch (e) {
  console.error(e);
  exitCode = 1;
} finally {
  await topo.destroy();
}
Deno.exit(exitCode);
