/**
 * Conntrack sync throughput between two NAT namespaces (a part of `bench:egress`, which calls
 * {@linkcode measureSync}). Runnable alone:
 *
 *     ./hf deno run -P=netns bench/_egress_sync.ts [--quick] [--entries N]
 *
 * Two namespaces, each with an nftables SNAT rule (so conntrack and a nat chain exist, as on a NAT
 * pod); the standby's SyncReceiver runs in its own process, as on a real pod. A holds N synthetic
 * SNAT'd TCP entries for each of two floating addresses. Timed, each until the standby has
 * applied everything (SyncSender.flush() sees its ACK): the connect-time resync of the first
 * address into the freshly started standby (cold), a resync of the second address when it becomes
 * owned (warm: `sync_entries_per_s`), and a refresh of entries B already holds (the periodic
 * resync); then single new entries timed from the owner's event to their presence at the
 * standby. Beside them: A's raw inject and dump rates, CPU µs per entry of each side, and the
 * `conntrack -I` CLI on a small sample as the baseline. Last stdout line: one JSON object.
 *
 * @module
 */

import { Conntrack, ConntrackEvents, type CtEntry } from "../node/conntrack/mod.ts";
import { SyncSender } from "../node/egress/sync.ts";
import { createTopology } from "../lab/netns.ts";
import { formatIpv4 } from "../lib/ipv4.ts";
import { setLogLevel } from "../lib/log.ts";
import { Registry } from "../lib/metrics.ts";
import { intOption, readCommandLineOrExit } from "../lib/args.ts";
import { median } from "./_stats.ts";
import { spawnReceiver } from "./_egress_sync_receiver.ts";
import { cpuUsage } from "node:process";

const FLOATING = 0xc6120064; // 198.18.0.100
const OTHER = 0xc6120065; // 198.18.0.101: the cold run's entries
const CLI_SAMPLE = 200;
const NFT = `table ip hf_sync_bench {
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr 10.0.0.0/8 meta l4proto tcp snat to 198.18.0.100:1024-60999
  }
}`;

/** What {@linkcode measureSync} reports. */
export interface SyncMeasurement {
  /**
   * Entries/s of a resync A → B of N entries B does not hold (dump, stream, inject, ACK), both
   * processes running: an address becomes owned, or entries new to the standby.
   */
  sync_entries_per_s: number;
  /** The same into a standby process that just started (connect-time resync, JIT cold). */
  cold_sync_entries_per_s: number;
  /** Entries/s of a full resync into a table already holding them (the periodic refresh). */
  refresh_entries_per_s: number;
  /** Entries/s of Conntrack.inject into an empty table (batched raw netlink). */
  inject_entries_per_s: number;
  /** Entries/s of Conntrack.dump of the owned address's entries. */
  dump_entries_per_s: number;
  /** CPU time (user + system, µs) per entry of Conntrack.inject alone (the kernel's share). */
  inject_cpu_us_per_entry: number;
  /** CPU time (user + system, µs) the owner's process spent per entry in that resync. */
  sender_cpu_us_per_entry: number;
  /** CPU time the standby's process spent per entry in that resync. */
  receiver_cpu_us_per_entry: number;
  /**
   * The rate the slower side's CPU time allows when each side has a CPU of its own
   * (1e6 / max of the two above): the figure without the other tenants of a shared machine.
   */
  sync_cpu_bound_entries_per_s: number;
  /**
   * The owner's longest event-loop stall (ms between two turns of a 1 ms interval) while it sent
   * the cold and warm resyncs: a stall past the lease window (ttl − margin − renew, 150 ms by
   * default) makes it forfeit its own addresses (issue 29).
   */
  sender_loop_stall_ms_max: number;
  /** ms from a new owned entry's event at the owner to its presence at the standby (median). */
  event_to_standby_ms_p50: number;
  /** The same, largest of all probes. */
  event_to_standby_ms_max: number;
  /** Baseline: `conntrack -I` once per entry, on a small sample. */
  conntrack_cli_entries_per_s?: number;
  entries: number;
  /** Rounds measured (each figure is their median). */
  rounds: number;
}

type Round = Pick<
  SyncMeasurement,
  | "sync_entries_per_s"
  | "cold_sync_entries_per_s"
  | "refresh_entries_per_s"
  | "inject_entries_per_s"
  | "dump_entries_per_s"
  | "inject_cpu_us_per_entry"
  | "sender_cpu_us_per_entry"
  | "receiver_cpu_us_per_entry"
  | "event_to_standby_ms_p50"
  | "event_to_standby_ms_max"
  | "sender_loop_stall_ms_max"
>;

const PROBE = 0xc6120066; // 198.18.0.102: single entries timed from the owner's event to B
const PROBES = 20;

/**
 * For PROBES single new entries of an owned address: ms from creating it in A (its NEW event) to
 * its injection in B (seen as the NEW event B's kernel makes, on a socket filtered to PROBE).
 */
async function eventLatencies(
  sender: SyncSender,
  ctA: Conntrack,
  standbyNetns: string,
): Promise<number[]> {
  sender.setOwned(new Set([FLOATING, PROBE]));
  await sender.resync();
  await sender.flush();
  const seenInB = ConntrackEvents.open({ netns: standbyNetns, types: ["new"] });
  seenInB.filterNatSrc(new Set([PROBE]));
  const out: number[] = [];
  try {
    for (const probe of syntheticEntries(PROBES, { natAddr: PROBE, srcBase: 0x0c000000 })) {
      const t0 = performance.now();
      ctA.inject([probe]);
      await waitUntil(
        "a probe entry in B",
        () => seenInB.read().some((e) => e.entry.orig.src === probe.orig.src),
        5_000,
      );
      out.push(Math.round((performance.now() - t0) * 10) / 10);
    }
  } finally {
    seenInB.close();
  }
  return out;
}

/** The longest gap between turns of a 1 ms interval, from now until `stop()`. */
function loopStallMeter(): { stop: () => number } {
  let last = performance.now(), max = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    max = Math.max(max, now - last);
    last = now;
  }, 1);
  return {
    stop: () => {
      clearInterval(timer);
      return max;
    },
  };
}

function cpuTotal(): number {
  const { user, system } = cpuUsage();
  return user + system;
}

/** N synthetic SNAT'd, established TCP entries with distinct original and translated tuples. */
export function syntheticEntries(
  n: number,
  options: { natAddr?: number; srcBase?: number } = {},
): CtEntry[] {
  const out: CtEntry[] = [];
  const addr = options.natAddr ?? FLOATING, base = options.srcBase ?? 0x0a000000;
  for (let i = 0; i < n; i++) {
    const orig = {
      src: (base + i) >>> 0,
      dst: (0xcb000000 + Math.floor(i / 50_000)) >>> 0,
      proto: 6 as const,
      sport: 40_000,
      dport: 80,
    };
    out.push({
      orig,
      reply: { src: orig.dst, dst: addr, proto: 6, sport: 80, dport: 1024 + (i % 50_000) },
      status: 0x19e, // SEEN_REPLY|ASSURED|CONFIRMED|SRC_NAT|SRC_NAT_DONE
      timeoutS: 600,
      tcpState: 3,
      natSrc: { addr, port: 1024 + (i % 50_000) },
    });
  }
  return out;
}

async function waitUntil(what: string, fn: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!fn()) {
    if (Date.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** `conntrack -I` once per entry in a fresh namespace (with the same SNAT rule). */
async function cliRate(): Promise<number> {
  await using topo = await createTopology({ hosts: [{ name: "synccli" }] });
  await topo.exec("synccli", ["nft", "-f", "-"], { stdin: NFT });
  const script =
    `for i in $(seq 1 ${CLI_SAMPLE}); do conntrack -I -p tcp -s 10.200.$((i / 250)).$((i % 250 + 1)) ` +
    `-d 203.0.113.1 --sport 40000 --dport 80 --state ESTABLISHED -t 600 -u SEEN_REPLY,ASSURED ` +
    `>/dev/null 2>&1 || exit 1; done`;
  const t0 = performance.now();
  await topo.exec("synccli", ["bash", "-c", script], { timeoutMs: 120_000 });
  return CLI_SAMPLE / ((performance.now() - t0) / 1000);
}

/** Measures the sync of `options.entries` entries between two fresh namespaces. */
/**
 * Measures the sync of `options.entries` entries (default 100,000; 5,000 with `quick`) between
 * two fresh namespaces, `options.rounds` times (default 3; 1 with `quick`), each round in new
 * namespaces; each figure is the median over the rounds.
 */
export async function measureSync(
  options: { entries?: number; rounds?: number; quick?: boolean } = {},
): Promise<SyncMeasurement> {
  const entries = options.entries ?? (options.quick ? 5_000 : 100_000);
  const rounds: Round[] = [];
  for (let r = 0; r < Math.max(1, options.rounds ?? (options.quick ? 1 : 3)); r++) {
    rounds.push(await measureRound(entries));
  }
  const med = (k: keyof Round) => Math.round(median(rounds.map((x) => x[k])));
  const medF = (k: keyof Round) => Math.round(median(rounds.map((x) => x[k])) * 100) / 100;
  const cli = await cliRate().catch(() => undefined);
  return {
    sync_entries_per_s: med("sync_entries_per_s"),
    cold_sync_entries_per_s: med("cold_sync_entries_per_s"),
    refresh_entries_per_s: med("refresh_entries_per_s"),
    inject_entries_per_s: med("inject_entries_per_s"),
    dump_entries_per_s: med("dump_entries_per_s"),
    inject_cpu_us_per_entry: medF("inject_cpu_us_per_entry"),
    sender_cpu_us_per_entry: medF("sender_cpu_us_per_entry"),
    receiver_cpu_us_per_entry: medF("receiver_cpu_us_per_entry"),
    event_to_standby_ms_p50: medF("event_to_standby_ms_p50"),
    event_to_standby_ms_max: Math.max(...rounds.map((r) => r.event_to_standby_ms_max)),
    sender_loop_stall_ms_max: Math.max(...rounds.map((r) => r.sender_loop_stall_ms_max)),
    sync_cpu_bound_entries_per_s: Math.round(
      1e6 / Math.max(medF("sender_cpu_us_per_entry"), medF("receiver_cpu_us_per_entry")),
    ),
    ...(cli !== undefined ? { conntrack_cli_entries_per_s: Math.round(cli) } : {}),
    entries,
    rounds: rounds.length,
  };
}

async function measureRound(
  n: number,
): Promise<Round> {
  await using topo = await createTopology({ hosts: [{ name: "synca" }, { name: "syncb" }] });
  for (const h of ["synca", "syncb"]) await topo.exec(h, ["nft", "-f", "-"], { stdin: NFT });
  const ctA = Conntrack.open({ netns: topo.ns("synca") });
  const ctB = Conntrack.open({ netns: topo.ns("syncb") });
  const entries = syntheticEntries(n);
  const injectCpu0 = cpuTotal();
  let t0 = performance.now();
  const { injected, failed } = ctA.inject(entries);
  const injectS = (performance.now() - t0) / 1000;
  const injectCpuUs = cpuTotal() - injectCpu0;
  if (injected !== n) {
    throw new Error(
      `Cannot set up the sync bench: ${failed.length} of ${n} injections failed (first errno ${
        failed[0]?.errno
      })`,
    );
  }
  t0 = performance.now();
  const dumped = ctA.dump({ natSrcAddrs: new Set([FLOATING]) }).length;
  const dumpS = (performance.now() - t0) / 1000;
  if (dumped !== n) throw new Error(`Sync bench: A's dump has ${dumped} entries, injected ${n}`);
  ctA.inject(syntheticEntries(n, { natAddr: OTHER, srcBase: 0x0b000000 }));

  const registry = new Registry();
  const events = ConntrackEvents.open({ netns: topo.ns("synca") });
  await using receiver = await spawnReceiver(topo.ns("syncb"));
  const sender = new SyncSender({
    ct: ctA,
    events,
    self: "synca",
    peers: () => [{ name: "syncb", host: "127.0.0.1", port: receiver.port }],
    resyncMs: 3_600_000,
    flushTimeoutMs: 120_000,
    registry,
  });
  const resyncs = registry.counter("holdfast_egress_sync_resyncs_total", "");
  const stall = loopStallMeter();
  try {
    // Cold: a standby process just started (empty table, nothing compiled yet) connects and gets
    // the connect-time resync of the other address's N entries.
    sender.setOwned(new Set([OTHER]));
    t0 = performance.now();
    sender.start();
    await waitUntil("the connect-time resync", () => resyncs.get() >= 1, 60_000);
    await sender.flush();
    const coldS = (performance.now() - t0) / 1000;
    // Warm: both processes running; FLOATING becomes owned and its N entries, new to B, go over.
    const cpu0 = { sender: cpuTotal(), receiver: await receiver.cpuUs() };
    t0 = performance.now();
    sender.setOwned(new Set([FLOATING]));
    await sender.resync();
    await sender.flush();
    const syncS = (performance.now() - t0) / 1000;
    const stallMs = stall.stop();
    const cpu1 = { sender: cpuTotal(), receiver: await receiver.cpuUs() };
    const inB = ctB.dump({ natSrcAddrs: new Set([FLOATING]) }).length;
    if (inB !== n) {
      throw new Error(`Sync bench: B holds ${inB} entries after the resync, want ${n}`);
    }
    // The periodic refresh: B already holds every entry.
    t0 = performance.now();
    await sender.resync();
    await sender.flush();
    const refreshS = (performance.now() - t0) / 1000;
    const eventMs = await eventLatencies(sender, ctA, topo.ns("syncb"));
    return {
      sender_loop_stall_ms_max: Math.round(stallMs * 10) / 10,
      event_to_standby_ms_p50: median(eventMs),
      event_to_standby_ms_max: Math.max(...eventMs),
      sync_entries_per_s: n / syncS,
      cold_sync_entries_per_s: n / coldS,
      inject_cpu_us_per_entry: injectCpuUs / n,
      sender_cpu_us_per_entry: (cpu1.sender - cpu0.sender) / n,
      receiver_cpu_us_per_entry: (cpu1.receiver - cpu0.receiver) / n,
      refresh_entries_per_s: n / refreshS,
      inject_entries_per_s: n / injectS,
      dump_entries_per_s: n / dumpS,
    };
  } finally {
    stall.stop();
    await sender.stop();
    events.close();
    ctA.close();
    ctB.close();
  }
}

if (import.meta.main) {
  const cmd = readCommandLineOrExit(Deno.args, {
    command: "bench/_egress_sync.ts",
    usage: `usage: ./hf deno run -P=netns bench/_egress_sync.ts [--quick] [--entries N]
  Conntrack entries synced per second between two NAT namespaces (root). --quick: 5,000 entries
  (seconds, one round); default 100,000, median of 3 rounds.`,
    options: {
      quick: { type: "boolean" },
      entries: { type: "string" },
    },
  }, ({ values }) => ({
    rounds: values.quick === true ? 1 : 3,
    entries: intOption(values, "entries", {
      default: values.quick === true ? 5_000 : 100_000,
      min: 1,
      max: 250_000,
    }),
  }));
  setLogLevel("warn");
  const result = await measureSync({ entries: cmd.entries, rounds: cmd.rounds });
  console.log(`sync A -> B of ${cmd.entries} SNAT entries to ${formatIpv4(FLOATING)}`);
  console.log(JSON.stringify(result));
}
