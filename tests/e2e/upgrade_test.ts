/**
 * Upgrading Holdfast's LB agents under traffic (issue 26): the virtual cluster's four LB nodes run
 * the previous release (`scripts/previous-release.txt`, exported and built by
 * `lab/previous_release.ts`), and the LB agents are rolled to this build one node at a time, as a
 * DaemonSet rolls them: each new agent adopts the programs and pinned maps the old one left. In
 * the mixed state new connections are learned by both versions, the backends scale 3 → 5 (every
 * Maglev table changes, so a moved flow keeps its backend only through the store), an old LB node
 * dies (its flows go to new and old nodes: shared old → new), then a new one (shared new → old). Then the rollback:
 * the remaining new agents are replaced by the previous release again, over the pins this build
 * made. Every held connection survives, through every step, and of the new connections opened all
 * along (20 a second) none fails; UDP streams, each from one source port, stay on one backend
 * each to the end.
 */
import { rootTest } from "../harness/mod.ts";
import { Cluster } from "../../lab/cluster.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import type { HoldSummary } from "../../lab/clients/summary.ts";
import { previousRelease } from "../../lab/previous_release.ts";
import { Disturbances } from "../../lab/chaos_steps.ts";

/** Which build LB node i's agent runs now, from its `starting` line (this build logs more). */
function builds(cluster: Cluster): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [i, n] of cluster.lbNodes) {
    const start = n.agent?.lines.find((l) => l.includes('"msg":"starting"'));
    if (start) out[`lb${i}`] = start.includes('"flow_buckets"') ? "current" : "previous";
  }
  return out;
}

/** The connect loop's summary (lab/clients/connect_loop.ts). */
interface LoopSummary {
  attempts: number;
  ok: number;
  failed: number;
}

/** The UDP stream's summary (lab/clients/udp_stream.ts). */
interface UdpSummary {
  sent: number;
  echoed: number;
  wrong: number;
  max_gap_ms: number;
  last_echo_age_ms: number;
}

function check(what: string, s: HoldSummary): string | null {
  if (s.survived === s.connections) return null;
  return `${what}: ${s.connections - s.survived} of ${s.connections} lost: ${
    JSON.stringify(s.deaths.slice(0, 5))
  }`;
}

rootTest(
  "upgrade: LB agents rolled from the previous release to this build and back, one node at a time, under held connections; flows shared across versions both ways",
  async () => {
    const previous = await previousRelease();
    await using cluster = await Cluster.create({
      lbNodes: 4,
      backends: 3,
      ipv6: false,
      udp: true,
      release: previous,
    });
    const disturb = new Disturbances(cluster); // each change checked to have happened
    const steps: { step: string; builds: Record<string, string> }[] = [];
    const note = (step: string) => steps.push({ step, builds: builds(cluster) });
    note(`all on ${previous.version}`);
    if (Object.values(builds(cluster)).some((b) => b !== "previous")) {
      throw new Error(`not every LB node runs the previous release: ${JSON.stringify(steps)}`);
    }
    // A: open before the upgrade, held through all of it.
    const a = await cluster.startClient(40, 75_000);
    await a.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
    // New connections all along (20 a second, each an exchange and a close), as a request load.
    const loop = await cluster.startConnectLoop(60_000, 50);
    // UDP streams, each from one source port, through all of it: each must reach one backend only
    // (four, so that some cross the LB nodes that die).
    const udp = await Promise.all([1, 2, 3, 4].map(() => cluster.startUdpStream(75_000, 50)));

    // Roll forward lb1 and lb2, one at a time (the agent replaced, datapath and pins kept).
    for (const i of [1, 2]) {
      await cluster.killAgent(i);
      cluster.setRelease(i, undefined);
      await cluster.startAgent(i);
      note(`lb${i} rolled to this build`);
    }
    // B: opened in the mixed state, so both versions learn some of them.
    const b = await cluster.startClient(40, 55_000);
    await b.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });

    // The backends scale 3 → 5: every LB node's Maglev table changes, so from here a flow that
    // moves to another LB node keeps its backend only if that node has it from the store.
    await disturb.addBackend(4);
    await disturb.addBackend(5);
    note("backends 3 → 5");
    // An old node dies: its flows move to lb1, lb2 (this build) and lb4 (previous).
    await cluster.killLbNode(3);
    note("lb3 (previous) died");
    // A new node dies: its flows move to lb2 (this build) and lb4 (previous).
    await cluster.killLbNode(1);
    note("lb1 (this build) died");
    // lb4 rolls forward too; then the rollback: lb2 and lb4 back to the previous release, over
    // the pins this build made.
    await cluster.killAgent(4);
    cluster.setRelease(4, undefined);
    await cluster.startAgent(4);
    note("lb4 rolled to this build");
    for (const i of [2, 4]) {
      await cluster.killAgent(i);
      cluster.setRelease(i, previous);
      await cluster.startAgent(i);
      note(`lb${i} rolled back to ${previous.version}`);
    }
    const [sa, sb, sl] = await Promise.all([
      clientSummary<HoldSummary>(a, 120_000),
      clientSummary<HoldSummary>(b, 120_000),
      clientSummary<LoopSummary>(loop, 120_000),
    ]);
    const su = await Promise.all(udp.map((u) => clientSummary<UdpSummary>(u, 120_000)));
    // Which backends each stream reached (each echo server logs a new UDP peer once).
    const udpBackends: Record<string, string[]> = {};
    for (const [j, server] of cluster.backends) {
      for (const l of server.lines.filter((l) => l.includes('"msg":"udp peer"'))) {
        (udpBackends[(JSON.parse(l) as { peer: string }).peer] ??= []).push(`be${j}`);
      }
    }
    console.log(
      JSON.stringify({
        previous: previous.commit,
        steps,
        a: sa,
        b: sb,
        loop: sl,
        udp: su,
        udpBackends,
      }),
    );
    const expected = [
      "previous",
      "previous",
      "current",
      "current",
      "current",
      "current",
      "current",
      "previous",
      "previous",
    ];
    const lb2 = steps.map((s) => s.builds.lb2 ?? "-");
    if (lb2.join() !== expected.join()) {
      throw new Error(`lb2 ran ${lb2.join()}, want ${expected.join()}: ${JSON.stringify(steps)}`);
    }
    const problems = [check("held through the upgrade", sa), check("opened mixed", sb)]
      .filter((p) => p !== null);
    for (const c of disturb.checks) if (!c.ok) problems.push(`${c.what}: ${c.seen}`);
    const moved = Object.entries(udpBackends).filter(([, bes]) => bes.length > 1);
    if (Object.keys(udpBackends).length !== udp.length || moved.length > 0) {
      problems.push(`UDP streams reached ${JSON.stringify(udpBackends)}: want one backend each`);
    }
    for (const u of su) {
      if (u.echoed === 0 || u.wrong > 0 || u.last_echo_age_ms > 2_000) {
        problems.push(`a UDP stream stopped or went wrong: ${JSON.stringify(u)}`);
      }
    }
    if (sl.failed > 0 || sl.ok === 0) {
      problems.push(`${sl.failed} of ${sl.attempts} new connections failed: ${JSON.stringify(sl)}`);
    }
    if (problems.length) throw new Error(problems.join("\n"));
  },
);
