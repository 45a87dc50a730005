/**
 * Egress NAT failover (issue 11): the owner of a floating address dies (links down + SIGKILL) or
 * hangs (SIGSTOP) while 50 long-lived TCP connections and a UDP stream go through it. The standby
 * takes over; every connection survives and the server sees the same source address and port
 * before and after. The same kill with conntrack sync off is the baseline: its losses are printed
 * beside ours, not asserted (whether it loses is the kernel's port choice, FINDINGS).
 */
import { rootTest } from "../harness/mod.ts";
import { failoverProblems, type FailoverResult, runFailover } from "../../lab/egress_scenario.ts";

function report(name: string, r: FailoverResult): void {
  console.log(JSON.stringify({
    scenario: name,
    connections: r.connections,
    survived: r.survived,
    max_stall_ms: r.maxStallMs,
    udp: r.udp,
    udp_sources: r.udpSources,
    takeovers: r.takeovers.map((t) => ({
      victim: t.victim,
      successor: t.successor,
      detect_ms: t.detectedAt === null ? null : t.detectedAt - t.diedAt,
      assume_ms: t.assumedAt === null ? null : t.assumedAt - t.diedAt,
      resume_ms: t.resumedAt === null ? null : t.resumedAt - t.diedAt,
    })),
  }));
}

rootTest(
  "egress: the owner dies (links down + SIGKILL) — every TCP connection and the UDP stream survive, same source",
  async () => {
    const r = await runFailover({ how: "kill" });
    report("kill", r);
    const problems = failoverProblems(r);
    if (r.takeovers.length !== 1) problems.push("no takeover was seen");
    if (problems.length) throw new Error(`egress kill:\n  ${problems.join("\n  ")}`);
  },
);

rootTest(
  "egress: the owner hangs (SIGSTOP) — the standby takes over, connections survive; resumed, the old owner lets go",
  async () => {
    const r = await runFailover({ how: "hang" });
    report("hang", r);
    const problems = failoverProblems(r);
    if (r.hungReleased !== true) {
      problems.push("the resumed agent still holds the address after 15 s");
    }
    if (problems.length) throw new Error(`egress hang:\n  ${problems.join("\n  ")}`);
  },
);

rootTest("egress: three NAT pods, two sequential deaths — connections survive both", async () => {
  const r = await runFailover({ how: "kill", natPods: 3, deaths: 2 });
  report("two deaths", r);
  const problems = failoverProblems(r);
  if (r.takeovers.length !== 2) problems.push(`${r.takeovers.length} takeovers seen, want 2`);
  if (problems.length) throw new Error(`egress two deaths:\n  ${problems.join("\n  ")}`);
});

rootTest(
  "egress: baseline — the same kill with conntrack sync off (losses reported, not asserted)",
  async () => {
    const r = await runFailover({ how: "kill", sync: false, connections: 20 });
    report("baseline (sync off)", r);
    console.log(JSON.stringify({
      baseline_connections: r.connections,
      baseline_survived: r.survived,
      baseline_udp_sources: r.udpSources.length,
    }));
    if (r.takeovers.length !== 1) throw new Error("baseline: no takeover was seen");
  },
);
