/**
 * The node side's cost (`main.ts node`, bpf/node_tc.c, docs/backends.md), in one run:
 *
 *  1. Per packet, through BPF_PROG_TEST_RUN beside a no-op tc program (bpf/tc_pass.c, the floor)
 *     measured by the same method, round by round interleaved, IPv4 and IPv6:
 *     - `in`: an encapsulated client packet (64 bytes of payload) decapsulated and translated by
 *       hf_node_in; `out`: the pod's reply translated back by hf_node_out (a flow hit). Both
 *       rewrite the packet, and the in-kernel repeat loop reuses one buffer (FINDINGS), so these
 *       are "fresh packet" figures: repeat = 1 and a fresh copy per call, the kernel's duration
 *       per call (it includes one clock read, as the floor's does).
 *     - `decap_in_pod_reference4`: the same encapsulated packet through `main.ts decap`'s hf_decap
 *       (decapsulation only, in the pod's own namespace), the path the node side replaces.
 *     - `other traffic`: what everything else crossing the uplink pays — a plain TCP packet
 *       through hf_node_in (not the encap port) and a packet of no recorded flow through
 *       hf_node_out (one hash lookup): unchanged by the programs, so the in-kernel repeat loop.
 *  2. Real packets through veths (lab/node_pods.ts, root): a 1-connection bulk transfer (UP then
 *     DOWN, lab/clients/lb_peer.ts) from the client to a pod through the LB node and the node
 *     agent's path (`via_lb_node`: XDP encapsulation, decap + translation on the node, DSR
 *     replies translated on its uplink) vs straight to the pod's own address through the same
 *     router and node (`plain`: the path a pod's traffic takes without Holdfast; the node's
 *     programs see it and pass it), back to back in each round in alternating order, the medians
 *     of the rounds and the median of the rounds' own ratios (`ratio_paired`).
 *  3. The whole path in the lab kubelet's cluster (bench/_backend_cluster.ts, k8s/ as deployed):
 *     pod ready → first connection through the LB reaching it (p50, max of `--ready-samples`),
 *     and connections held through a scale 3 → 5 and an LB node killed: lost as deployed vs
 *     with the LB agents on `--no-flow-sync` (a stateless peer), each in a fresh cluster.
 *
 * Run: `deno task bench:backend` (root). Flags: `--calls=C` (20000), `--repeat=R` (20000),
 * `--rounds=N` (31), `--bytes=B` (4 MiB), `--ready-samples=S` (8), `--no-cluster` (parts 1–2
 * only), `--quick` (not a figure). The last line is one
 * JSON object.
 *
 * @module
 */

import {
  BpfObject,
  DecapDatapath,
  DEFAULT_OBJECT_DIR,
  NodeDatapath,
  PROTO,
  TC_ACT,
  testRun,
} from "../node/bpf/mod.ts";
import { intOption, readCommandLineOrExit } from "../lib/args.ts";
import { setLogSink } from "../lib/log.ts";
import { tcpFrame } from "../lab/packets.ts";
import { encapsulatedAny, tcpFrame6 } from "../lab/packets6.ts";
import { POD_VIP, POD_VIP6, startNodePodsLab } from "../lab/node_pods.ts";
import { median } from "./_stats.ts";
import { clusterTrial } from "./_backend_cluster.ts";

const OPTS = readCommandLineOrExit(Deno.args, {
  command: "bench:backend",
  usage:
    `usage: deno task bench:backend [--calls=C] [--repeat=R] [--rounds=N] [--bytes=B] [--ready-samples=S] [--no-cluster] [--quick]
  --quick: calls=500, repeat=500, rounds=1, bytes=1 MiB, ready-samples=2 (a smoke test, not a figure)`,
  options: {
    calls: { type: "string" },
    repeat: { type: "string" },
    rounds: { type: "string" },
    bytes: { type: "string" },
    "ready-samples": { type: "string" },
    quick: { type: "boolean" },
    "no-cluster": { type: "boolean" },
  },
}, ({ values }) => {
  const quick = values.quick === true;
  return {
    quick,
    calls: intOption(values, "calls", { default: quick ? 500 : 20_000, min: 1 }),
    repeat: intOption(values, "repeat", { default: quick ? 500 : 20_000, min: 1 }),
    rounds: intOption(values, "rounds", { default: quick ? 1 : 31, min: 1 }),
    bytes: intOption(values, "bytes", { default: quick ? 1 << 20 : 4 << 20, min: 1024 }),
    readySamples: intOption(values, "ready-samples", { default: quick ? 2 : 8, min: 2, max: 100 }),
    cluster: values["no-cluster"] !== true,
  };
});

const CLIENT = "10.0.0.1", POD = "10.2.0.5", CLIENT6 = "2001:db8:a::1", POD6 = "2001:db8:2::5";
const PAYLOAD = new Uint8Array(64);
const enc = (inner: Uint8Array, pod: string) =>
  encapsulatedAny(inner, {
    outerSrc: pod.includes(":") ? "2001:db8:1::2" : "10.1.1.2",
    backend: pod,
    sport: 0xc123,
    dport: 6080,
    hash: 1,
  });
const FRAMES = {
  in4: enc(
    tcpFrame(CLIENT, POD_VIP, { sport: 40000, dport: 80, flags: 0x10, payload: PAYLOAD }),
    POD,
  ),
  out4: tcpFrame(POD, CLIENT, { sport: 8080, dport: 40000, flags: 0x10, payload: PAYLOAD }),
  in6: enc(
    tcpFrame6(CLIENT6, POD_VIP6, { sport: 40000, dport: 80, flags: 0x10, payload: PAYLOAD }),
    POD6,
  ),
  out6: tcpFrame6(POD6, CLIENT6, { sport: 8080, dport: 40000, flags: 0x10, payload: PAYLOAD }),
  // Other traffic: a plain packet in (not the encap port), a reply of no recorded flow out.
  other_in: tcpFrame(CLIENT, POD, { sport: 40000, dport: 8080, flags: 0x10, payload: PAYLOAD }),
  other_out: tcpFrame(POD, CLIENT, { sport: 8080, dport: 41000, flags: 0x10, payload: PAYLOAD }),
};

/** Part 1: ns per packet by BPF_PROG_TEST_RUN, each beside the floor. */
async function perPacket() {
  using dp = await NodeDatapath.open({ pinDir: null });
  using floorObj = BpfObject.open(`${DEFAULT_OBJECT_DIR}/tc_pass.o`);
  const floor = floorObj.program("hf_tc_pass");
  dp.configure({ encapPort: 6080, mssMax: 1432 });
  for (const [pod, vip] of [[POD, POD_VIP], [POD6, POD_VIP6]]) {
    dp.setFrontend({ pod: pod!, vip: vip!, port: 80, proto: PROTO.TCP, targetPort: 8080 });
  }
  // Record the flows the `out` frames hit, and check each path does what it is measured for.
  for (
    const [name, prog, frame, len] of [
      ["in4", dp.nodeIn, FRAMES.in4, FRAMES.in4.length - 28],
      ["in6", dp.nodeIn, FRAMES.in6, FRAMES.in6.length - 48],
    ] as const
  ) {
    const r = testRun(prog, frame);
    if (r.retval !== TC_ACT.OK || r.data.length !== len) throw new Error(`${name}: not decapped`);
  }
  const before = dp.stats().nat_out;
  testRun(dp.nodeOut, FRAMES.out4);
  testRun(dp.nodeOut, FRAMES.out6);
  if (dp.stats().nat_out !== before + 2n) throw new Error("out frames did not hit their flows");
  const fresh: Record<string, { ns: number; floor_ns: number }> = {};
  for (const name of ["in4", "out4", "in6", "out6"] as const) {
    const prog = name.startsWith("in") ? dp.nodeIn : dp.nodeOut;
    const a: number[] = [], f: number[] = [];
    for (let i = 0; i < OPTS.calls; i++) {
      f.push(testRun(floor, FRAMES[name].slice()).durationNs);
      a.push(testRun(prog, FRAMES[name].slice()).durationNs);
    }
    fresh[name] = { ns: median(a), floor_ns: median(f) };
  }
  // Reference: what `main.ts decap` (bpf/decap_tc.c, in the backend's own namespace) costs for
  // the same encapsulated packet: decap only, no translation.
  {
    using decap = await DecapDatapath.open();
    decap.configure({ encapPort: 6080, mssMax: 1432 });
    decap.addLocalVip(POD_VIP);
    const a: number[] = [], f: number[] = [];
    for (let i = 0; i < OPTS.calls; i++) {
      f.push(testRun(floor, FRAMES.in4.slice()).durationNs);
      a.push(testRun(decap.decap, FRAMES.in4.slice()).durationNs);
    }
    fresh.decap_in_pod_reference4 = { ns: median(a), floor_ns: median(f) };
  }
  const loop: Record<"other_in" | "other_out", { ns: number; floor_ns: number }> = {} as never;
  for (const name of ["other_in", "other_out"] as const) {
    const prog = name === "other_in" ? dp.nodeIn : dp.nodeOut;
    const a: number[] = [], f: number[] = [];
    for (let round = 0; round < 15; round++) {
      f.push(testRun(floor, FRAMES[name], { repeat: OPTS.repeat }).durationNs);
      a.push(testRun(prog, FRAMES[name], { repeat: OPTS.repeat }).durationNs);
    }
    loop[name] = { ns: median(a), floor_ns: median(f) };
  }
  const ratio = (x: { ns: number; floor_ns: number }) => +(x.ns / x.floor_ns).toFixed(2);
  return {
    fresh_packet: Object.fromEntries(
      Object.entries(fresh).map(([k, v]) => [k, { ...v, x_floor: ratio(v) }]),
    ),
    other_traffic_repeat_loop: Object.fromEntries(
      Object.entries(loop).map(([k, v]) => [k, { ...v, x_floor: ratio(v) }]),
    ),
  };
}

/** Part 2: MB/s of a bulk transfer through the LB and node vs straight to the pod. */
async function realPackets() {
  setLogSink(() => {}); // the node agent's lines are not the bench's
  await using lab = await startNodePodsLab();
  const pin = `/sys/fs/bpf/hf-${Deno.pid}-bench-node`;
  const { main } = await import("../node/backends/main.ts");
  const stop = new AbortController();
  const agent = main([
    ...["--node-name", "node1", "--config", lab.servicesPath, "--pods", lab.podsPath],
    ...["--netns", lab.topo.ns("node1"), "--uplink", "eth0", "--pin-dir", pin, "--listen", "none"],
  ], { signal: stop.signal });
  try {
    // Ready once a connection through the LB works (bounded).
    for (let i = 0; i < 100; i++) {
      const r = await lab.peer(["client", POD_VIP, "80", "1", "1"], {
        check: false,
        timeoutMs: 5_000,
      });
      if (r.stdout.includes('"ok":1')) break;
      if (i === 99) throw new Error("the pods never became reachable through the LB");
      await new Promise((r) => setTimeout(r, 100));
    }
    const mbps = async (host: string, port: number) => {
      const out = await lab.peer(["bulk", host, String(port), String(OPTS.bytes), "120000"]);
      const line = out.stdout.trim().split("\n").pop()!;
      const b = JSON.parse(line) as { ok: boolean; ms: number; up_ms: number; down_ms: number };
      if (!b.ok) throw new Error(`bulk to ${host}:${port} failed: ${line}`);
      const mb = OPTS.bytes / 1e6;
      // The transfer's own time, without the connection's setup: the client may reuse a port
      // whose last connection, on the other path, left the pod's socket pair in TIME_WAIT (the
      // node translates to the pod's own IP:port, so both paths share that 4-tuple), and a SYN
      // retransmitted after 1 s would count against one round (seen: rounds at 0.06–0.09×).
      return {
        both: (2 * mb) / ((b.up_ms + b.down_ms) / 1000),
        up: mb / (b.up_ms / 1000),
        down: mb / (b.down_ms / 1000),
      };
    };
    const result: Record<string, Record<string, number | number[]>> = {};
    for (const [fam, vip, pod] of [["ipv4", POD_VIP, POD], ["ipv6", POD_VIP6, POD6]] as const) {
      // Each round measures both back to back, the order alternating (ABBA…), so a burst of load
      // from other sessions hits both sides alike; ratio_paired is the median of the rounds'
      // own ratios.
      // up_/down_ratio_paired: each direction on its own — UP is the client's data through the
      // LB node (encapsulated) and the node's decap; DOWN the pod's replies by DSR.
      const via: number[] = [], plain: number[] = [], pairs: number[] = [];
      const upPairs: number[] = [], downPairs: number[] = [];
      for (let r = 0; r < OPTS.rounds; r++) {
        let v: Awaited<ReturnType<typeof mbps>>, p: typeof v;
        if (r % 2 === 0) {
          v = await mbps(vip, 80);
          p = await mbps(pod, 8080);
        } else {
          p = await mbps(pod, 8080);
          v = await mbps(vip, 80);
        }
        via.push(v.both);
        plain.push(p.both);
        pairs.push(v.both / p.both);
        upPairs.push(v.up / p.up);
        downPairs.push(v.down / p.down);
      }
      const v = median(via), p = median(plain);
      result[fam] = {
        via_lb_node_mb_s: +v.toFixed(1),
        plain_mb_s: +p.toFixed(1),
        ratio: +(v / p).toFixed(2),
        ratio_paired: +median(pairs).toFixed(2),
        up_ratio_paired: +median(upPairs).toFixed(2),
        down_ratio_paired: +median(downPairs).toFixed(2),
        // The rounds' own ratios, sorted: how far apart the rounds were (the load of the box).
        rounds_ratio: [...pairs].sort((a, b) => a - b).map((x) => +x.toFixed(2)),
      };
    }
    return result;
  } finally {
    stop.abort();
    await agent;
    await Deno.remove(pin, { recursive: true }).catch(() => {});
    setLogSink(undefined);
  }
}

/** Part 3: the whole path in the lab kubelet's cluster, ours and the stateless baseline. */
async function inCluster() {
  const ours = await clusterTrial(true, OPTS.readySamples);
  const baseline = await clusterTrial(false, 0);
  const ms = [...ours.readyToReachableMs].sort((a, b) => a - b);
  const p50 = (xs: number[]) => median(xs.filter((x) => Number.isFinite(x)));
  const lost = (t: typeof ours) => ({
    held: t.held,
    lost_after_scale: t.lostAfterScale,
    lost_after_lb_kill: t.lostAfterLbKill,
  });
  return {
    ready_to_reachable_ms: {
      samples: ms.length,
      p50: median(ms),
      max: ms.at(-1),
      all: ms,
      // Where the time goes (p50): the controller's model in Redis, the node agent's entry.
      to_model_published_p50: p50(ours.readyToModelMs),
      to_node_agent_p50: p50(ours.readyToNodeAgentMs),
      // The watcher's rate: a pod with 1/N of the connections is hit within ~N/rate s.
      watch_connections_per_s: ours.watchPerS,
    },
    held_connections: { ours: lost(ours), no_flow_sync: lost(baseline) },
  };
}

const packets = await perPacket();
const real = await realPackets();
const cluster = OPTS.cluster ? await inCluster() : "skipped (--no-cluster)";
console.log(JSON.stringify({
  bench: "backend",
  quick: OPTS.quick,
  method: "BPF_PROG_TEST_RUN beside a no-op tc program; bulk transfers through veths",
  ...packets,
  real_packets: { bytes_each_way: OPTS.bytes, rounds: OPTS.rounds, ...real },
  cluster,
  calls: OPTS.calls,
  repeat: OPTS.repeat,
}));
