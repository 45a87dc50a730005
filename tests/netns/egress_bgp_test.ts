/**
 * Egress NAT in BGP mode (issue 23 item 4): two NAT pods, one floating address, a router bird
 * (`ext`, lab/egress_bgp.ts) that installs the /32 via whichever pod announces it. The owner is
 * SIGKILLed (its watchdog kills its bird at once) or SIGSTOPped (its watchdog kills its bird by
 * the lease deadline): the route moves to the new owner, and at no moment did the router's route
 * have both pods as next hops (every change is read from `ip -o monitor route`). Continued, the
 * stopped agent forfeits, and its restarted bird announces nothing.
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { floatingAddress } from "../../lab/egress.ts";
import { waitForStandbyFlows } from "../../lab/egress_checks.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import {
  createEgressBgpLab,
  natExternal,
  podOfHop,
  type RouteHistory,
} from "../../lab/egress_bgp.ts";

const ADDRESS = floatingAddress(0);

function noDoubles(route: RouteHistory): void {
  const doubles = route.doubles();
  ok(
    doubles.length === 0,
    `the router had two next hops for ${ADDRESS} at once: ${JSON.stringify(doubles)}; ` +
      `history ${JSON.stringify(route.changes.map((c) => c.hops))}`,
  );
}

/**
 * A pod assumes an address only while it is a candidate: its own last `assignment leaves out pods
 * not ready` line before that (if any) does not leave it out. (Left out = no BGP session while
 * another pod has one; with none ready every pod counts, so at a cold start or when every bird
 * restarts a pod may assume before its session is up, and its route comes with the session.)
 */
function assumedOnlyAsCandidate(pod: string, lines: readonly string[]): void {
  let leftOut = false;
  for (const [i, line] of lines.entries()) {
    if (line.includes('"msg":"assignment leaves out pods not ready"')) {
      leftOut = (JSON.parse(line).unready as string[]).includes(pod);
    } else if (line.includes('"msg":"address assumed"')) {
      ok(!leftOut, `${pod} assumed an address while left out for want of a BGP session: line ${i}`);
    }
  }
}

/** The lab with both pods up and the router's route on the settled owner; returns the owner. */
async function setUp(lab: Awaited<ReturnType<typeof createEgressBgpLab>>) {
  await lab.lab.startAll();
  const [owner] = await lab.lab.settle();
  const route = await lab.watch(ADDRESS);
  const ownerIndex = lab.lab.pods.get(owner!)!.index;
  // First sessions: bird's connect delay (1 s), then the UPDATE.
  await route.until((h) => h.join() === natExternal(ownerIndex), 30_000);
  const other = [...lab.lab.pods.keys()].find((p) => p !== owner)!;
  return { owner: owner!, other, route };
}

rootTest(
  "egress bgp: the owner is SIGKILLed — the route follows to the new owner, never two next hops; TCP and UDP through it survive",
  async () => {
    await using lab = await createEgressBgpLab({
      natPods: 2,
      addresses: 1,
      verbose: Deno.env.get("HF_VERBOSE") === "1",
    });
    await lab.lab.startServer();
    const { owner, other, route } = await setUp(lab);
    // The server's replies reach the owner through the router's /32 (no GARP in bgp mode).
    const holdMs = 9_000, connections = 20;
    const tcp = await lab.lab.startTcp(0, connections, holdMs);
    const udp = await lab.lab.startUdp(0, holdMs, 100);
    await waitForStandbyFlows(lab.lab, 0, connections);
    const pod = lab.lab.pods.get(owner)!;
    await pod.agent!.stop("SIGKILL");
    pod.agent = null;
    await route.until((h) => h.join() === natExternal(lab.lab.pods.get(other)!.index), 15_000);
    noDoubles(route);
    assumedOnlyAsCandidate(other, lab.lab.pods.get(other)!.agent!.lines);
    const t = await clientSummary(tcp, holdMs + 20_000);
    const u = await clientSummary<Record<string, number>>(udp, holdMs + 10_000);
    const sources = lab.lab.server!.udp.lines.filter((l) => l.includes('"msg":"udp source"'));
    const hops = route.changes.map((c) => c.hops.map(podOfHop).join("+") || "none");
    console.log(JSON.stringify({ scenario: "kill", owner, route: hops, tcp: t, udp: u }));
    noDoubles(route);
    ok(t.survived === connections, `TCP: ${t.survived} of ${connections} survived`);
    ok(Number(u.last_echo_age_ms) < 5_000, `the UDP stream stopped: ${JSON.stringify(u)}`);
    ok(sources.length === 1, `the server saw the UDP stream from several sources: ${sources}`);
  },
);

rootTest(
  "egress bgp: the owner is SIGSTOPped — its bird goes by the lease deadline, the new owner announces after, the continued one withdraws",
  async () => {
    await using lab = await createEgressBgpLab({
      natPods: 2,
      addresses: 1,
      verbose: Deno.env.get("HF_VERBOSE") === "1",
    });
    const { owner, other, route } = await setUp(lab);
    const [ownerHop, otherHop] = [owner, other].map((p) => natExternal(lab.lab.pods.get(p)!.index));
    const successor = lab.lab.pods.get(other)!.agent!;
    const from = successor.lineCount;
    await lab.lab.hangNat(owner);
    await route.until((h) => h.join() === otherHop, 15_000);
    noDoubles(route);
    // The old route went away (its bird killed by the deadline) before the new one came.
    const after = route.changes.slice(
      route.changes.findLastIndex((c) => c.hops.join() === ownerHop),
    );
    ok(
      after.some((c) => c.hops.length === 0),
      `the route went from ${owner} to ${other} without a withdrawal between: ` +
        JSON.stringify(after.map((c) => c.hops)),
    );
    await successor.waitForLine((l) => l.includes('"msg":"address assumed"'), {
      fromLine: from,
      timeoutMs: 10_000,
    });

    // Continued: the old agent forfeits (its lease is gone; its bird was killed meanwhile). As
    // the assigned owner it gets the address back by a planned handover (withdraw, release,
    // acquire, announce): the route follows, still never through both.
    const hung = lab.lab.pods.get(owner)!.agent!;
    const resumedFrom = hung.lineCount;
    await lab.lab.resumeNat(owner);
    await hung.waitForLine(
      (l) => l.includes('"msg":"address forfeited"') && l.includes(ADDRESS),
      { fromLine: resumedFrom, timeoutMs: 10_000 },
    );
    const [settled] = await lab.lab.settle({ timeoutMs: 30_000 });
    // Its restarted bird has no session for a while (its heartbeats say not ready): it takes
    // nothing meanwhile while the other pod has one.
    for (const p of [owner, other]) assumedOnlyAsCandidate(p, lab.lab.pods.get(p)!.agent!.lines);
    const settledHop = natExternal(lab.lab.pods.get(settled!)!.index);
    await route.until((h) => h.join() === settledHop, 15_000);
    const rib = (await lab.router.birdc("show", "route", `${ADDRESS}/32`, "all")).stdout;
    const loser = settledHop === ownerHop ? otherHop : ownerHop;
    ok(!rib.includes(`via ${loser}`), `the router has a route via ${loser} too:\n${rib}`);
    noDoubles(route);
    const hops = route.changes.map((c) => c.hops.map(podOfHop).join("+") || "none");
    console.log(JSON.stringify({ scenario: "hang", owner, route: hops }));
  },
);
