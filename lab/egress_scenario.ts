/**
 * Egress NAT scenarios on the egress lab (lab/egress.ts), shared by the e2e tests and
 * `bench/egress.ts`: the owner of floating address 0 dies (links down + SIGKILL) or hangs
 * (SIGSTOP) while client 0 holds long-lived TCP connections and a UDP stream through it; what
 * survived, what the server saw, and when each step happened (from the agents' log lines).
 *
 * @module
 */
import type { HostProcess } from "./host_process.ts";
import { clientSummary } from "./clients/summary.ts";
import { createEgressLab, type EgressLab, floatingAddress } from "./egress.ts";
import { waitForStandbyFlows } from "./egress_checks.ts";

/** Options of {@linkcode runFailover}. */
export interface FailoverOptions {
  /** NAT pods (default 2). */
  readonly natPods?: number;
  /** Conntrack sync (default true; false is the baseline). */
  readonly sync?: boolean;
  /** How the owner goes: links down + SIGKILL, or SIGSTOP. */
  readonly how: "kill" | "hang";
  /** Sequential deaths of address 0's owner (default 1; needs natPods > deaths). */
  readonly deaths?: number;
  /** TCP connections from client 0 (default 50). */
  readonly connections?: number;
  /** UDP stream interval (default 100 ms). */
  readonly udpIntervalMs?: number;
  /** How long clients keep going after the last takeover (default 2,000 ms). */
  readonly afterMs?: number;
  /** Print the agents' log lines. */
  readonly verbose?: boolean;
}

/** One death and its takeover, times in epoch ms. */
export interface Takeover {
  readonly victim: string;
  readonly successor: string;
  readonly diedAt: number;
  /** The successor logged the victim down. */
  readonly detectedAt: number | null;
  /** The successor logged the address assumed. */
  readonly assumedAt: number | null;
  /** The UDP stream's first echo after the death. */
  readonly resumedAt: number | null;
}

/** What a failover run saw. */
export interface FailoverResult {
  readonly connections: number;
  readonly survived: number;
  readonly deaths: unknown[];
  readonly maxStallMs: number;
  readonly udp: { sent: number; echoed: number; maxGapMs: number; lastEchoAgeMs: number };
  /** Sources the server saw for the UDP stream, in order (one = unchanged). */
  readonly udpSources: string[];
  /** Sources of the TCP connections the server accepted (all must be floating address 0). */
  readonly tcpSources: string[];
  readonly takeovers: Takeover[];
  /** After a hang: whether the resumed agent gave the address up (null when not a hang). */
  readonly hungReleased: boolean | null;
}

function json(line: string): Record<string, unknown> {
  try {
    return JSON.parse(line);
  } catch {
    return {};
  }
}

/** Epoch ms of the first log line of `proc` at or after `from` that matches. */
export function logTime(
  proc: HostProcess | null,
  from: number,
  match: (l: Record<string, unknown>) => boolean,
): number | null {
  for (const line of proc?.lines ?? []) {
    const l = json(line);
    const ts = typeof l.ts === "string" ? Date.parse(l.ts) : NaN;
    if (ts >= from - 5 && match(l)) return ts;
  }
  return null;
}

/**
 * When the successor's agent logged the victim `peer down` (heartbeats) and `address assumed`
 * for floating address k (the lease), waiting up to `timeoutMs` for both lines: the lease can
 * expire before the heartbeats call the peer down.
 */
export async function takeoverTimes(
  agent: HostProcess | null,
  victim: string,
  k: number,
  diedAt: number,
  timeoutMs = 2_000,
): Promise<{ detectedAt: number | null; assumedAt: number | null }> {
  const down = (l: Record<string, unknown>) => l.msg === "peer down" && l.peer === victim;
  const assumed = (l: Record<string, unknown>) =>
    l.msg === "address assumed" && l.address === floatingAddress(k);
  const deadline = Date.now() + timeoutMs;
  let detectedAt = null, assumedAt = null;
  while (Date.now() < deadline) {
    detectedAt = logTime(agent, diedAt, down);
    assumedAt = logTime(agent, diedAt, assumed);
    if (detectedAt !== null && assumedAt !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { detectedAt, assumedAt };
}

/** The first `resumed` (or any echo) time of a UDP stream after `from`. */
function resumedAfter(udp: HostProcess, from: number): number | null {
  for (const line of udp.lines) {
    const l = json(line);
    if (l.msg === "resumed" && typeof l.at === "number" && l.at >= from) return l.at;
  }
  return null;
}

/** Summary line of a client process (waits for it). */
export function summary(proc: HostProcess, timeoutMs: number): Promise<Record<string, unknown>> {
  return clientSummary<Record<string, unknown>>(proc, timeoutMs);
}

/** Waits until a pod other than `ignore` holds floating address k; returns it. */
export async function waitForSuccessor(
  lab: EgressLab,
  k: number,
  ignore: string,
  timeoutMs = 10_000,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let seen: string[] = [];
  while (Date.now() < deadline) {
    seen = (await lab.holders(k)).filter((n) => n !== ignore);
    if (seen.length === 1) return seen[0]!;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(
    `No pod but "${ignore}" took ${floatingAddress(k)} within ${timeoutMs} ms (holders ${
      JSON.stringify(seen)
    })`,
  );
}

/** Runs one failover scenario in a fresh lab and tears it down. */
export async function runFailover(o: FailoverOptions): Promise<FailoverResult> {
  const deaths = o.deaths ?? 1;
  const natPods = o.natPods ?? Math.max(2, deaths + 1);
  await using lab = await createEgressLab({ natPods, sync: o.sync, verbose: o.verbose });
  await lab.startServer();
  await lab.startAll();
  await lab.settle();
  const afterMs = o.afterMs ?? 2_000;
  // Long enough for every death (≤ 3 s each with the settle time) plus afterMs; a baseline run
  // needs the clients' 10 s dead-connection timeout to pass after the death.
  const holdMs = 1_500 + deaths * 3_000 + afterMs + (o.sync === false ? 10_000 : 0);
  const tcp = await lab.startTcp(0, o.connections ?? 50, holdMs);
  const udp = await lab.startUdp(0, holdMs, o.udpIntervalMs ?? 100);
  // Entries stream to the standbys (a baseline run has no sync: a second to settle instead).
  if (o.sync === false) await new Promise((r) => setTimeout(r, 1_000));
  else await waitForStandbyFlows(lab, 0, o.connections ?? 50);
  const takeovers: Takeover[] = [];
  let hung: string | null = null;
  for (let d = 0; d < deaths; d++) {
    const victim = (await lab.holders(0)).find((n) => n !== hung);
    if (!victim) throw new Error(`No owner of ${floatingAddress(0)} to take down`);
    let diedAt: number;
    if (o.how === "hang") {
      diedAt = await lab.hangNat(victim);
      hung = victim;
    } else {
      diedAt = await lab.killNat(victim);
    }
    const successor = await waitForSuccessor(lab, 0, victim);
    await new Promise((r) => setTimeout(r, d + 1 < deaths ? 1_500 : 300));
    const times = await takeoverTimes(lab.pods.get(successor)!.agent, victim, 0, diedAt);
    takeovers.push({ victim, successor, diedAt, ...times, resumedAt: resumedAfter(udp, diedAt) });
  }
  let hungReleased: boolean | null = null;
  if (hung) {
    await lab.resumeNat(hung);
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && (await lab.holders(0)).includes(hung)) {
      await new Promise((r) => setTimeout(r, 20));
    }
    hungReleased = !(await lab.holders(0)).includes(hung);
  }
  const t = await summary(tcp, holdMs + 20_000);
  const u = await summary(udp, 10_000);
  const server = lab.server!;
  const tcpSources = server.tcp.lines.map(json).filter((l) => l.msg === "accepted").map((l) =>
    String(l.peer)
  );
  const udpSources = server.udp.lines.map(json).filter((l) =>
    l.msg === "udp source" && l.stream === "egc1"
  ).map((l) => String(l.from));
  return {
    connections: Number(t.connections),
    survived: Number(t.survived),
    deaths: (t.deaths as unknown[]) ?? [],
    maxStallMs: Number(t.max_stall_ms),
    udp: {
      sent: Number(u.sent),
      echoed: Number(u.echoed),
      maxGapMs: Number(u.max_gap_ms),
      lastEchoAgeMs: Number(u.last_echo_age_ms),
    },
    udpSources,
    tcpSources,
    takeovers,
    hungReleased,
  };
}

/** Problems a user would notice in a sync-on failover run (empty = every connection survived). */
export function failoverProblems(r: FailoverResult): string[] {
  const p: string[] = [];
  if (r.survived !== r.connections) {
    p.push(
      `${r.connections - r.survived} of ${r.connections} TCP connections lost: ${
        JSON.stringify(r.deaths.slice(0, 3))
      }`,
    );
  }
  // Dead: no echo in the stream's last 5 s (a loaded machine can delay one by a second or so).
  if (r.udp.lastEchoAgeMs > 5_000 || r.udp.echoed < r.udp.sent * 0.5) {
    p.push(`the UDP stream did not survive: ${JSON.stringify(r.udp)}`);
  }
  if (r.udpSources.length !== 1) {
    p.push(`the server saw the UDP stream from ${JSON.stringify(r.udpSources)} (want one source)`);
  }
  const wrong = r.tcpSources.filter((s) => !s.startsWith(`${floatingAddress(0)}:`));
  if (r.tcpSources.length !== r.connections || wrong.length) {
    p.push(
      `the server accepted ${r.tcpSources.length} TCP connections (want ${r.connections}, ` +
        `all from ${floatingAddress(0)}): ${JSON.stringify(wrong.slice(0, 3))}`,
    );
  }
  return p;
}
