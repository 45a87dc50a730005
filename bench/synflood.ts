/**
 * SYN flood against a Holdfast LB node with flow sharing on (issue 13): spoofed SYNs from random
 * sources at the highest rate the live-frames generator reaches, while real TCP connections
 * exchange data through the same LB node, its real agent and a real redis-server.
 *
 * ```
 *  client ── c0 router ── l1 ── lb1 (XDP hf_lb + agent) ── encapsulated ──▶ be1, be2 (decap, echo)
 *  hold_client: N connections, a line every 100 ms each          │ flows shared
 *  XDP gen: SYNs from 10.200.0.0/16, random source ports          └──▶ ctl: redis-server
 * ```
 *
 * - cluster: `lab/cluster.ts` with one LB node and two backends; the router routes 10.200.0.0/16
 *   to the client (so the spoofed sources pass its loose rp_filter and the backends' SYN/ACKs go
 *   there, where no such host answers: a spoofed source never sees its SYN/ACK).
 * - generator: `hf_xdp_synflood` (bpf/xdp_synflood_gen.c) by BPF_PROG_TEST_RUN with live frames
 *   out of the client's eth0, as `bench:datapath-pps` does; the router's c0 runs `hf_xdp_pass`
 *   natively (XDP_TX over veth needs a program on the peer).
 * - measured over the flood: SYNs the LB node forwarded (its reason counters tx_new +
 *   tx_unconfirmed, read from its pinned hf_reasons) per second = `syn_pps`; Redis writes = the
 *   change of redis-server's dirty counter (`rdb_changes_since_last_save`: every key change) and
 *   of its write commands (INFO commandstats); `established_evicted` = the connections' flows in
 *   the LB node's hf_flows before the flood that are gone after it; the client's summary says
 *   how many connections survived (reset, EOF, wrong echo or 10 s without echo = dead).
 *
 * - then, beside it, the part of the attack the SYN rule cannot close: the same flood of spoofed
 *   ACKs (`ack_flood`). An ACK confirms at once (a node that never saw a flow's SYN must learn it
 *   from its ACK), so only the per-CPU event budget bounds what reaches hf_flows and Redis: its
 *   `flows_shared` is ≤ budget × CPUs × seconds, the rest `flows_unshared`.
 *
 * Everything shares this machine's CPUs: the generator, router, LB node, backends and Redis.
 *
 * Run: `deno task bench:synflood` (root; builds bpf/ first). Flags: `--seconds=S` per flood (10),
 * `--connections=N` (50), `--batch=B` frames per generator call (65,536), `--no-ack-flood`,
 * `--quick` (2 s, 8,192). The last line is one JSON object: the SYN flood's figures at the top
 * level (`syn_pps`, `redis_writes_per_syn`, `established_evicted`, `connections`, `survived` over
 * both floods), the ACK flood's under `ack_flood`.
 *
 * @module
 */

import { Cluster } from "../lab/cluster.ts";
import { tcpFrame } from "../lab/packets.ts";
import { intOption, numberOption, readCommandLineOrExit } from "../lib/args.ts";
import { parseIpv4 } from "../lib/ipv4.ts";
import {
  attachXdp,
  BpfObject,
  DEFAULT_OBJECT_DIR,
  HF_EVENT_BUDGET_DEFAULT,
  ifIndex,
  inNetns,
} from "../node/bpf/mod.ts";
import {
  clientFlows,
  generateSyns,
  lbReasons,
  macOf,
  redisWrites,
  setGeneratorTemplate,
} from "./_synflood_probe.ts";

const OPTS = readCommandLineOrExit(Deno.args, {
  command: "bench:synflood",
  usage: `usage: deno task bench:synflood [--seconds=S (≤ 30)] [--connections=N (≤ 500)]
                              [--batch=B (≤ 1000000)] [--no-ack-flood] [--quick]
  --quick: a 2 s flood in 8,192-frame batches (a smoke test, not a figure)`,
  options: {
    seconds: { type: "string" },
    connections: { type: "string" },
    batch: { type: "string" },
    "no-ack-flood": { type: "boolean" },
    quick: { type: "boolean" },
  },
}, ({ values }) => {
  const quick = values.quick === true;
  return {
    quick,
    seconds: numberOption(values, "seconds", { default: quick ? 2 : 10, min: 0.5, max: 30 }),
    connections: intOption(values, "connections", { default: 50, min: 1, max: 500 }),
    batch: intOption(values, "batch", { default: quick ? 8192 : 65_536, min: 1, max: 1_000_000 }),
    ackFlood: values["no-ack-flood"] !== true,
  };
});

/** Spoofed sources: 10.200.0.0/16, routed by the router to the client's link. */
const SPOOF_NET = "10.200.0.0";
const SPOOF_MASK = "0.0.255.255";
/** Most generator calls per flood, whatever the batch and rate. */
const MAX_CALLS = 100_000;
/** Time for the connections' ACKs to be shared before the flood, and for queues to drain. */
const SETTLE_MS = 1500;

function log(msg: string, fields: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ level: "info", msg, ...fields }));
}

/** The generator and what the flood phases share. */
interface Rig {
  readonly cluster: Cluster;
  readonly gen: BpfObject;
  readonly clientNs: string;
  readonly ifindex: number;
  readonly macs: { readonly dst: number[]; readonly src: number[] };
  /** Client flows in the LB node's hf_flows before the first flood. */
  readonly established: Set<string>;
}

/** One flood of spoofed `kind` packets for `OPTS.seconds`; what it did at the LB and Redis. */
async function flood(rig: Rig, kind: "syn" | "ack"): Promise<Record<string, number>> {
  const { cluster, gen } = rig;
  const template = tcpFrame(SPOOF_NET, cluster.vip, {
    sport: 1024,
    dport: cluster.port,
    flags: kind === "syn" ? 0x02 : 0x10,
  });
  template.set(rig.macs.dst, 0);
  template.set(rig.macs.src, 6);
  setGeneratorTemplate(gen, template, parseIpv4(SPOOF_NET), parseIpv4(SPOOF_MASK));
  const prog = gen.program("hf_xdp_synflood");
  const reasons0 = lbReasons(cluster);
  const redis0 = await redisWrites(cluster);
  let generated = 0, calls = 0;
  const t0 = performance.now();
  const end = t0 + OPTS.seconds * 1000;
  while (performance.now() < end && calls < MAX_CALLS) {
    inNetns(rig.clientNs, () => generateSyns(prog, template, rig.ifindex, OPTS.batch));
    generated += OPTS.batch;
    calls++;
    if (calls % 16 === 0) await new Promise((r) => setTimeout(r, 0)); // let the pumps read
  }
  const seconds = (performance.now() - t0) / 1000;
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const reasons1 = lbReasons(cluster);
  const redis1 = await redisWrites(cluster);
  const after = clientFlows(cluster, "10.1.0.2");
  const d = (name: string) => Number((reasons1[name] ?? 0n) - (reasons0[name] ?? 0n));
  const packets = d("tx_new") + d("tx_unconfirmed") + d("tx_confirmed");
  const writes = redis1.dirty - redis0.dirty;
  const r = {
    seconds: Number(seconds.toFixed(3)),
    generated,
    generated_pps: Math.round(generated / seconds),
    pps: Math.round(packets / seconds),
    packets_at_lb: packets,
    redis_writes: writes,
    redis_write_commands: redis1.writeCommands - redis0.writeCommands,
    redis_writes_per_packet: packets > 0 ? Number((writes / packets).toPrecision(3)) : NaN,
    flows_shared: d("flow_shared"),
    flows_unshared: d("flow_unshared"),
    events_lost: d("event_lost"),
    established_evicted: [...rig.established].filter((k) => !after.has(k)).length,
  };
  log(`${kind} flood`, r);
  return r;
}

async function bench(cluster: Cluster): Promise<Record<string, unknown>> {
  const topo = cluster.topo;
  await topo.exec("router", ["ip", "route", "replace", `${SPOOF_NET}/16`, "via", "10.1.0.2"]);
  using pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
  using gen = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_synflood_gen.o`);
  attachXdp(pass.program("hf_xdp_pass"), "c0", { netns: topo.ns("router"), mode: "native" });
  const clientNs = topo.ns("client");
  const macs = { dst: await macOf(topo, "router", "c0"), src: await macOf(topo, "client", "eth0") };

  const holdMs = Math.round((OPTS.ackFlood ? 2 : 1) * OPTS.seconds * 1000 + 6 * SETTLE_MS);
  const redisIdle = await redisWrites(cluster);
  const client = await cluster.startClient(OPTS.connections, holdMs);
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const established = clientFlows(cluster, "10.1.0.2");
  // The yardstick: what sharing the real connections wrote (each flow's entry, event, expiry).
  const connectWrites = (await redisWrites(cluster)).dirty - redisIdle.dirty;
  log("connected", {
    connections: OPTS.connections,
    flows_in_hf_flows: established.size,
    redis_writes: connectWrites,
  });
  const rig = {
    cluster,
    gen,
    clientNs,
    ifindex: inNetns(clientNs, () => ifIndex("eth0")),
    macs,
    established,
  };
  const syn = await flood(rig, "syn");
  // Spoofed ACKs confirm at once (as a flow's ACK does on a node that never saw its SYN): only
  // the event budget bounds what they share — the side of the attack the SYN rule cannot close.
  const ack = OPTS.ackFlood ? await flood(rig, "ack") : null;

  const summaryLine = await client.waitForLine((l) => l.includes('"msg":"summary"'), {
    timeoutMs: holdMs + 20_000,
  });
  const summary = JSON.parse(summaryLine) as {
    connections: number;
    survived: number;
    max_stall_ms: number;
    deaths: unknown[];
  };
  return {
    bench: "synflood",
    method:
      "live-frames XDP generator of spoofed SYNs (random 10.200/16 sources) → router → LB node with agent + Redis; N echo connections through it",
    seconds: syn.seconds,
    generated_pps: syn.generated_pps,
    syn_pps: syn.pps,
    syns_at_lb: syn.packets_at_lb,
    redis_writes: syn.redis_writes,
    redis_write_commands: syn.redis_write_commands,
    redis_writes_per_syn: syn.redis_writes_per_packet,
    redis_writes_per_connection: Number((connectWrites / OPTS.connections).toPrecision(3)),
    flows_shared: syn.flows_shared,
    established_before: established.size,
    established_evicted: syn.established_evicted,
    connections: summary.connections,
    survived: summary.survived,
    max_stall_ms: summary.max_stall_ms,
    deaths: summary.deaths,
    ack_flood: ack,
    event_budget_per_cpu: HF_EVENT_BUDGET_DEFAULT,
    cpus: navigator.hardwareConcurrency,
    quick: OPTS.quick,
    load1: Deno.loadavg()[0],
  };
}

let exitCode = 0;
let result: Record<string, unknown> | null = null;
try {
  await using cluster = await Cluster.create({ lbNodes: 1, backends: 2 });
  result = await bench(cluster);
} catch (e) {
  console.error(e);
  exitCode = 1;
}
if (result) console.log(JSON.stringify(result));
Deno.exit(exitCode);
