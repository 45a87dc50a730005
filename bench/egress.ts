/**
 * Egress NAT benchmark (`deno task bench:egress`), in network namespaces (needs root):
 *
 * 1. detection and takeover over FAILOVERS (20; `--quick` 3) deaths of the owner of floating
 *    address 0 in one two-pod lab (links down + SIGKILL, then the victim restarts and the
 *    ownership settles before the next): detect = death → the successor's `peer down` log line;
 *    assume = death → its `address assumed` line (the lease can expire before the heartbeats
 *    call the peer down, so assume may come first); takeover = death → the first echo of a UDP
 *    stream probing every 10 ms through the address (the floating address serving again, routing
 *    followed: the clients' ARP entry moved by the gratuitous ARP); routing follow = the
 *    successor's `address assumed` line (its first gratuitous ARPs go out then) → that echo;
 * 2. survival: one kill with 50 TCP connections and a UDP stream (100 ms) through the owner,
 *    and the same kill with conntrack sync off (the baseline) beside it;
 * 3. conntrack entries synced per second between two NAT pods (a full resync A → B: dump,
 *    stream, inject, ACK): `measureSync()` of `bench/_egress_sync.ts`; beside the warm rate (both
 *    processes running), the end-to-end rate into a freshly started standby process (from the
 *    sender's start to the standby's ACK of the connect-time resync: `sync_cold_entries_per_s`,
 *    what a restarted pod gets, issue 29) and the owner's longest event-loop stall meanwhile.
 *
 * 4. BGP convergence (`bench/_egress_bgp.ts`): in BGP mode, the owner SIGKILLed ROUNDS times (10;
 *    `--quick` 3): the successor's `address assumed` → the router's kernel route via it, p50/max,
 *    and the moments the router had two next hops (must be 0).
 * 5. Routed mode, steering (`bench/_egress_steer.ts`, what `bench:egress-steer` runs): 4 client
 *    nodes (`--quick` 2), the owner SIGKILLed 20 times (`--quick` 2): the successor's `address
 *    assumed` → every node agent repointed (the slowest node per round), p50/max, and the
 *    takeover the client pods' probes see.
 *
 * Last line: one JSON object with `sync_entries_per_s`, `detect_ms_p50`, `takeover_ms_p50`,
 * `takeover_ms_max`, `survived`, `connections` and the baseline's `baseline_survived`.
 * Goals (issue 11): survived == connections, takeover_ms_max ≤ 400, sync ≥ 250,000/s. Anchors:
 * keepalived VRRP ~3.5 s with default timers, BFD 300 ms × 3 = 900 ms.
 *
 * @module
 */

import { readCommandLineOrExit } from "../lib/args.ts";
import { createEgressLab } from "../lab/egress.ts";
import { runFailover, takeoverTimes, waitForSuccessor } from "../lab/egress_scenario.ts";
import { median } from "./_stats.ts";
import { measureSync, type SyncMeasurement } from "./_egress_sync.ts";
import { type BgpConvergence, measureBgpConvergence } from "./_egress_bgp.ts";
import { measureSteering } from "./_egress_steer.ts";

const OPTIONS = {
  command: "bench:egress",
  usage: `usage: deno task bench:egress [--quick] [--failovers N]
  Egress NAT failover benchmark in network namespaces (root). --quick: 3 failovers, smaller
  survival runs (seconds, a smoke test); --failovers N (default 20).`,
  options: { quick: { type: "boolean" }, failovers: { type: "string" } },
} as const;
const args = readCommandLineOrExit(Deno.args, OPTIONS, ({ values }) => ({
  quick: values.quick === true,
  failovers: values.failovers === undefined ? undefined : Number(values.failovers),
}));
const FAILOVERS = args.failovers ?? (args.quick ? 3 : 20);
if (!(FAILOVERS >= 1 && FAILOVERS <= 200)) {
  console.error(`Cannot parse bench:egress arguments: --failovers "${args.failovers}": 1..200`);
  Deno.exit(2);
}

function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

function note(msg: string, fields: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ msg, ...fields }));
}

interface Sample {
  detect: number | null;
  assume: number | null;
  takeover: number | null;
  follow: number | null;
}

/** FAILOVERS deaths of address 0's owner in one lab, probed by a 10 ms UDP stream. */
async function failovers(n: number): Promise<Sample[]> {
  await using lab = await createEgressLab({ natPods: 2 });
  await lab.startServer();
  await lab.startAll();
  await lab.settle();
  const probeMs = 10;
  const probe = await lab.startUdp(0, n * 8_000 + 5_000, probeMs);
  const samples: Sample[] = [];
  for (let i = 0; i < n; i++) {
    const victim = await lab.waitForOwner(0);
    const diedAt = await lab.killNat(victim);
    const successor = await waitForSuccessor(lab, 0, victim);
    // The first echo after the death: the probe logs "resumed" after a silence > 3 intervals.
    const echoLine = await probe.waitForLine((l) => {
      if (!l.includes('"msg":"resumed"')) return false;
      return JSON.parse(l).at >= diedAt;
    }, { timeoutMs: 5_000 }).catch(() => null);
    const t = await takeoverTimes(lab.pods.get(successor)!.agent, victim, 0, diedAt);
    const sample = {
      detect: t.detectedAt === null ? null : t.detectedAt - diedAt,
      assume: t.assumedAt === null ? null : t.assumedAt - diedAt,
      takeover: echoLine === null ? null : JSON.parse(echoLine).at - diedAt,
      // Routing following: the successor's first gratuitous ARPs (sent as it logs the address
      // assumed) → the probe's first echo through it.
      follow: echoLine === null || t.assumedAt === null
        ? null
        : JSON.parse(echoLine).at - t.assumedAt,
    };
    samples.push(sample);
    note("failover", { i, victim, successor, ...sample });
    await lab.restartNat(victim);
    await lab.settle(); // a hand-back (planned) to the restarted pod is over
    await new Promise((r) => setTimeout(r, 500)); // entries of new flows reach the standby
  }
  await probe.stop("SIGKILL");
  return samples;
}

/** E1's sync throughput (bench/_egress_sync.ts), or null when it cannot run. */
async function syncRate(quick: boolean): Promise<SyncMeasurement | null> {
  try {
    return await measureSync({ quick });
  } catch (err) {
    note("sync measure failed", { err: (err as Error).message });
    return null;
  }
}

const samples = await failovers(FAILOVERS);
const kill = await runFailover({ how: "kill", connections: 50 });
note("kill run", { connections: kill.connections, survived: kill.survived, udp: kill.udp });
const baseline = await runFailover({ how: "kill", sync: false, connections: args.quick ? 20 : 50 });
note("baseline kill run (sync off)", {
  connections: baseline.connections,
  survived: baseline.survived,
  udp_sources: baseline.udpSources,
});
const sync = await syncRate(args.quick);
let bgp: BgpConvergence | null = null;
try {
  bgp = await measureBgpConvergence(args.quick ? 3 : 10, note);
} catch (err) {
  note("bgp measure failed", { err: (err as Error).message });
}

let steer: Awaited<ReturnType<typeof measureSteering>> | null = null;
try {
  steer = await measureSteering(args.quick ? 2 : 20, args.quick ? 2 : 4, note);
} catch (err) {
  note("steering measure failed", { err: (err as Error).message });
}

const got = (k: keyof Sample) => samples.map((s) => s[k]).filter((v): v is number => v !== null);
const takeover = got("takeover"), detect = got("detect"), assume = got("assume");
const follow = got("follow");
const result = {
  failovers: samples.length,
  detect_ms_p50: median(detect),
  detect_ms_max: Math.max(...detect),
  assume_ms_p50: median(assume),
  takeover_ms_p50: median(takeover),
  takeover_ms_p99: percentile(takeover, 99),
  takeover_ms_max: takeover.length === samples.length ? Math.max(...takeover) : null,
  takeovers_unseen: samples.length - takeover.length,
  routing_follow_ms_p50: median(follow),
  routing_follow_ms_max: Math.max(...follow),
  connections: kill.connections,
  survived: kill.survived,
  udp_source_changes: kill.udpSources.length - 1,
  udp_max_gap_ms: kill.udp.maxGapMs,
  baseline_connections: baseline.connections,
  baseline_survived: baseline.survived,
  baseline_udp_source_changes: baseline.udpSources.length - 1,
  sync_entries_per_s: sync?.sync_entries_per_s ?? null,
  sync_refresh_entries_per_s: sync?.refresh_entries_per_s ?? null,
  sync_inject_entries_per_s: sync?.inject_entries_per_s ?? null,
  sync_cold_entries_per_s: sync?.cold_sync_entries_per_s ?? null,
  sync_sender_loop_stall_ms_max: sync?.sender_loop_stall_ms_max ?? null,
  sync_entries: sync?.entries ?? null,
  bgp_converge_ms_p50: bgp ? median(bgp.convergeMs) : null,
  bgp_converge_ms_max: bgp && bgp.convergeMs.length > 0 ? Math.max(...bgp.convergeMs) : null,
  bgp_failovers: bgp ? bgp.convergeMs.length : null,
  bgp_unseen: bgp?.unseen ?? null,
  bgp_two_next_hops: bgp?.doubles ?? null,
  steer_rounds: steer?.rounds ?? null,
  steer_client_nodes: steer?.client_nodes ?? null,
  steer_every_node_repointed_ms_p50: steer?.every_node_repointed_ms_p50 ?? null,
  steer_every_node_repointed_ms_max: steer?.every_node_repointed_ms_max ?? null,
  steer_takeover_ms_p50: steer?.takeover_ms_p50 ?? null,
  steer_takeover_ms_max: steer?.takeover_ms_max ?? null,
  steer_unseen: steer?.unseen ?? null,
  quick: args.quick,
};
console.log(JSON.stringify(result));
