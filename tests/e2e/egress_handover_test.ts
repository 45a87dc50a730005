/**
 * Egress NAT planned handover and partition (issue 11): a rolling restart of every NAT pod
 * (SIGTERM → drain → start again, one at a time) resets no connection; cutting the owner's
 * internal link never leaves two NAT pods holding the floating address at once, and its long,
 * idle and UDP connections survive it. New connections
 * opened while addresses move in a rolling restart are not lost either (issue 29).
 */
import { rootTest } from "../harness/mod.ts";
import { createEgressLab, floatingAddress } from "../../lab/egress.ts";
import { summary, waitForSuccessor } from "../../lab/egress_scenario.ts";
import { waitForStandbyFlows } from "../../lab/egress_checks.ts";

/** Waits far above what they take on an idle machine (how fast: bench/egress). */
const WAIT_MS = 15_000;
/** A UDP stream with no echo in its last 5 s died (a loaded machine delays one by a second). */
const DEAD_UDP_MS = 5_000;

function json(line: string): Record<string, unknown> {
  return JSON.parse(line);
}

rootTest(
  "egress: rolling restart of every NAT pod (drain, restart, one at a time) resets nothing",
  async () => {
    await using lab = await createEgressLab({ natPods: 2 });
    await lab.startServer();
    await lab.startAll();
    await lab.settle();
    const holdMs = 4_000 + lab.pods.size * 9_000; // each pod: drain, start, hand-back (2 s), settle
    const clients = [
      await lab.startTcp(0, 25, holdMs),
      await lab.startTcp(1, 25, holdMs),
    ];
    const streams = [await lab.startUdp(0, holdMs), await lab.startUdp(1, holdMs)];
    for (const k of [0, 1]) await waitForStandbyFlows(lab, k, 25);
    const problems: string[] = [];
    let moved = 0;
    for (const name of lab.pods.keys()) {
      const held: number[] = [];
      for (const k of [0, 1]) if ((await lab.holders(k)).includes(name)) held.push(k);
      const code = await lab.drainNat(name);
      if (code !== 0) problems.push(`${name} exited with ${code} after SIGTERM`);
      for (const k of held) {
        const next = await waitForSuccessor(lab, k, name, WAIT_MS);
        if (next !== name) moved++;
      }
      await lab.startNat(name);
      await lab.settle();
      await new Promise((r) => setTimeout(r, 500));
    }
    const tcp = await Promise.all(clients.map((c) => summary(c, holdMs + 20_000)));
    const udp = await Promise.all(streams.map((s) => summary(s, 10_000)));
    const sources = lab.server!.udp.lines.map(json).filter((l) => l.msg === "udp source");
    console.log(
      JSON.stringify({ scenario: "rolling restart", moved, tcp, udp, udp_sources: sources }),
    );
    if (moved === 0) problems.push("no address moved: the restarts did not reach the traffic");
    for (const t of tcp) {
      if (t.survived !== t.connections) {
        problems.push(
          `${Number(t.connections) - Number(t.survived)} of ${t.connections} TCP ` +
            `connections lost: ${JSON.stringify(t.deaths)}`,
        );
      }
    }
    for (const u of udp) {
      if (Number(u.last_echo_age_ms) > DEAD_UDP_MS) {
        problems.push(
          `a UDP stream died: ${JSON.stringify(u)}`,
        );
      }
    }
    for (const stream of ["egc1", "egc2"]) {
      const seen = sources.filter((l) => l.stream === stream).map((l) => l.from);
      if (seen.length !== 1) problems.push(`the server saw ${stream} from ${JSON.stringify(seen)}`);
    }
    if (problems.length) throw new Error(`rolling restart:\n  ${problems.join("\n  ")}`);
  },
);

rootTest(
  "egress: rolling restart under 35 new connections/s loses none (issue 29)",
  async () => {
    await using lab = await createEgressLab({ natPods: 2 });
    await lab.startServer();
    await lab.startAll();
    await lab.settle();
    // Each pod: drain (two handovers), start, hand-back by rebalance (two more), settle.
    const durationMs = 4_000 + lab.pods.size * 9_000;
    // 35 new connections/s in all, half from each client (one per floating address), each with
    // three exchanges 150 ms apart: one opened just before a handover goes on after it.
    const loops = [
      await lab.startConnectLoop(0, durationMs, 57, 3, 150),
      await lab.startConnectLoop(1, durationMs, 57, 3, 150),
    ];
    await new Promise((r) => setTimeout(r, 1_000)); // some connections before the first drain
    const problems: string[] = [];
    let moved = 0;
    for (const name of lab.pods.keys()) {
      const held: number[] = [];
      for (const k of [0, 1]) if ((await lab.holders(k)).includes(name)) held.push(k);
      const code = await lab.drainNat(name);
      if (code !== 0) problems.push(`${name} exited with ${code} after SIGTERM`);
      for (const k of held) if (await waitForSuccessor(lab, k, name, WAIT_MS) !== name) moved++;
      await lab.startNat(name);
      await lab.settle();
      await new Promise((r) => setTimeout(r, 500));
    }
    const results = await Promise.all(loops.map((l) => summary(l, durationMs + 20_000)));
    console.log(JSON.stringify({ scenario: "rolling restart, new connections", moved, results }));
    if (moved === 0) problems.push("no address moved: the restarts did not reach the traffic");
    for (const [k, r] of results.entries()) {
      if (Number(r.failed) !== 0 || Number(r.ok) !== Number(r.attempts)) {
        problems.push(
          `client ${k}: ${r.failed} of ${r.attempts} new connections lost: ` +
            JSON.stringify(r.failures),
        );
      }
    }
    if (problems.length) throw new Error(`rolling restart:\n  ${problems.join("\n  ")}`);
  },
);

/**
 * Idle TCP connections in the partition test, one exchange every 6 s (issue 29 had 5,000; they
 * passed here too, 34 s, but CI runs on 2 shared CPUs and hold_client opens them one by one
 * within 20 s).
 */
const IDLE = 2_000;

rootTest(
  "egress: partition — the owner's internal link cut, never two NAT pods hold the address; 80 long and 2,000 idle connections and a UDP stream survive",
  async () => {
    await using lab = await createEgressLab({ natPods: 2 });
    await lab.startServer();
    await lab.startAll();
    const owner = (await lab.settle())[0]!;
    const holdMs = 14_000;
    const tcp = await lab.startTcp(0, 80, holdMs);
    const idle = await lab.startTcp(0, IDLE, holdMs, 6_000);
    const udp = await lab.startUdp(0, holdMs);
    await waitForStandbyFlows(lab, 0, 80 + IDLE); // what the takeover below needs
    let samples = 0, doubles = 0;
    let polling = true;
    const poller = (async () => {
      for (let i = 0; polling && i < 100_000; i++) {
        const holders = await lab.holders(0);
        samples++;
        if (holders.length > 1) doubles++;
      }
    })();
    try {
      const cutAt = Date.now();
      await lab.partitionNat(owner, true);
      const successor = await waitForSuccessor(lab, 0, owner, WAIT_MS);
      const movedMs = Date.now() - cutAt; // logged only: bench/egress measures takeovers
      await new Promise((r) => setTimeout(r, 1_500));
      await lab.partitionNat(owner, false);
      await new Promise((r) => setTimeout(r, 2_000)); // the poller watches the heal a while
      let after = await lab.holders(0);
      const healDeadline = Date.now() + WAIT_MS;
      for (let i = 0; i < 1_000 && after.length !== 1 && Date.now() < healDeadline; i++) {
        await new Promise((r) => setTimeout(r, 50));
        after = await lab.holders(0);
      }
      polling = false;
      await poller;
      const [t, i, u] = await Promise.all([
        summary(tcp, holdMs + 20_000),
        summary(idle, holdMs + 30_000),
        summary(udp, holdMs + 10_000),
      ]);
      const sources = lab.server!.udp.lines.map(json).filter((l) => l.msg === "udp source")
        .filter((l) => l.stream === "egc1").map((l) => l.from);
      console.log(JSON.stringify({
        scenario: "partition",
        owner,
        successor,
        moved_ms: movedMs,
        samples,
        doubles,
        holders_after_heal: after,
        tcp: t,
        idle: i,
        udp: u,
        udp_sources: sources,
      }));
      const problems: string[] = [];
      if (doubles > 0) {
        problems.push(
          `${doubles} of ${samples} samples saw two pods holding ${floatingAddress(0)}`,
        );
      }
      if (after.length !== 1) {
        problems.push(`after the heal ${JSON.stringify(after)} hold ${floatingAddress(0)}`);
      }
      for (const [what, r] of [["long", t], ["idle", i]] as const) {
        if (r.survived !== r.connections) {
          problems.push(
            `${Number(r.connections) - Number(r.survived)} of ${r.connections} ${what} TCP ` +
              `connections lost: ${JSON.stringify(r.deaths)}`,
          );
        }
      }
      if (sources.length !== 1) {
        problems.push(`the UDP stream came from ${JSON.stringify(sources)}`);
      }
      if (Number(u.last_echo_age_ms) > DEAD_UDP_MS) {
        problems.push(`the UDP stream died: ${JSON.stringify(u)}`);
      }
      if (problems.length) throw new Error(`partition:\n  ${problems.join("\n  ")}`);
    } finally {
      polling = false;
      await poller;
    }
  },
);
