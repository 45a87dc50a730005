/**
 * Anycast announce and withdraw latency (root, network namespaces; lab/anycast.ts):
 *
 * 1. pod ready → the router's kernel routes the LB /32 through that node, and pod terminating →
 *    that nexthop gone, over ROUNDS (20; `--quick` 3) rounds on one node while a second node
 *    keeps a pod (so each change is a multipath route replace). Timed from the state-file write
 *    (what a pod watch would deliver) to the `ip monitor route` line on the router.
 * 2. the floor, side by side: the same change made by `ip addr add/del` on the node's `lo`
 *    directly (bird alone, no agent).
 * 3. long-lived connections across a membership change, with and without flow redirection
 *    (lab/_anycast_scale.ts): CONNECTIONS (100; `--quick` 40) TCP connections from the client
 *    held open while a third node gains a ready pod and then drains (2 → 3 → 2 nexthops); the
 *    ones reset because ECMP moved them are counted — plain anycast, then the same run with
 *    `main.ts anycast --redirect` on every node (issue 12's side-by-side).
 *
 * 4. a node's bird killed (SIGKILL) under its running agent, KILLS (10; `--quick` 3; `--kills=N`)
 *    times, each once the previous bird ran HEALTHY_RUN_MS (so each restart is immediate):
 *    SIGKILL → the router's kernel routes the /32 through the node again, and the router's
 *    session Established → that route (lab/_bird_kill.ts; issue 27 part 3: it was 3 s in most
 *    kills).
 *
 * 5. failure detection: how long the router's kernel keeps a failed node's nexthop. Each kill of
 *    part 4 (SIGKILL ends the session at once), HUNGS (3; `--quick` 1) hangs of the node's bird
 *    (SIGSTOP: only BFD, 100 ms × 3, notices; then SIGCONT and the route back), and the node's
 *    link taken down once at the end. Timed from just before the `kill`/`ip` command.
 *
 * Last stdout line: one JSON object with announce_ms_p50/max, withdraw_ms_p50/max, the floor's,
 * plain_lost / redirect_lost (of longlived_connections), bird_kill_route_ms_p50/max,
 * bird_kill_route_after_session_ms_p50/max, and nexthop_gone_kill_ms_p50/max,
 * nexthop_gone_hung_ms_p50/max and nexthop_gone_link_down_ms. Goal (issue 12): each p50 ≤ 50 ms, max ≤ 200 ms;
 * redirect_lost 0; (issue 27) the route within ~100 ms of the session.
 *
 * @module
 */

import { intOption, readCommandLineOrExit } from "../lib/args.ts";
import { AnycastLab } from "../lab/anycast.ts";
import { median } from "./_stats.ts";
import { ECHO_SERVICES, holdAcrossScale } from "../lab/_anycast_scale.ts";
import { killBirdAndTime } from "../lab/_bird_kill.ts";
import { HEALTHY_RUN_MS } from "../node/bgp/mod.ts";

const OPTIONS = {
  command: "bench:anycast",
  usage: `usage: deno task bench:anycast [--quick] [--kills=N]
  Anycast latency in network namespaces (root): pod ready → route on the router, terminating →
  route withdrawn; long-lived connections lost across 2 → 3 → 2 nodes with and without flow
  redirection; a node's bird killed under its agent → its route back; a failed node's nexthop
  gone (bird killed, hung, link down). --quick: 3 rounds instead of 20, 40 connections instead of
  100, 3 bird kills instead of 10, 1 hang instead of 3. --kills: that many bird kills.`,
  options: { quick: { type: "boolean" }, kills: { type: "string" } },
} as const;
const args = readCommandLineOrExit(Deno.args, OPTIONS, ({ values }) => ({
  quick: values.quick === true,
  kills: intOption(values, "kills", { default: values.quick === true ? 3 : 10, min: 1, max: 100 }),
}));
const ROUNDS = args.quick ? 3 : 20;
const CONNECTIONS = args.quick ? 40 : 100;
const KILLS = args.kills;
const HUNGS = args.quick ? 1 : 3;

const round1 = (x: number) => Math.round(x * 10) / 10;
const stats = (xs: number[]) => ({ p50: round1(median(xs)), max: round1(Math.max(...xs)) });

/** Parts 1 and 2: announce/withdraw latency through the agent, and bird alone. */
async function latency() {
  await using lab = await AnycastLab.create({ nodes: 2 });
  const route = await lab.watchRoute();
  await lab.startPod("n2", "default/web-2");
  await route.until((g) => g.join() === "10.9.2.2");
  await lab.startPod("n1", "default/web-1", { ready: false });
  const both = (g: string[]) => g.join() === "10.9.1.2,10.9.2.2";
  const one = (g: string[]) => g.join() === "10.9.2.2";
  const out = {
    announce: [] as number[],
    withdraw: [] as number[],
    floorAdd: [] as number[],
    floorDel: [] as number[],
    killRoute: [] as number[],
    killAfterSession: [] as number[],
    goneKill: [] as number[],
    goneHung: [] as number[],
    goneLinkDown: 0,
  };
  for (let i = 0; i < ROUNDS; i++) {
    let t0 = performance.now();
    await lab.updatePod("default/web-1", { ready: true, terminating: false });
    out.announce.push(await route.until(both, 5_000) - t0);
    t0 = performance.now();
    await lab.updatePod("default/web-1", { terminating: true });
    out.withdraw.push(await route.until(one, 5_000) - t0);
    // Settle: the agent's log line and bird's update are out before the next round.
    await new Promise((r) => setTimeout(r, 50));
  }
  // The floor edits n1's lo behind its agent: first let the agent see its last state (one pod
  // left), so no later pass of it removes the floor's address as a leftover.
  const agent = lab.nodes.get("n1")!.agent;
  const from = agent.lineCount;
  await lab.deletePod("default/web-1");
  await agent.waitForLine(
    (l) => l.includes('"msg":"anycast state applied"') && l.includes('"pods":1,'),
    {
      fromLine: from,
    },
  );
  for (let i = 0; i < ROUNDS; i++) {
    let t0 = performance.now();
    await lab.topo.exec("n1", ["ip", "addr", "add", `${lab.vip}/32`, "dev", "lo"]);
    out.floorAdd.push(await route.until(both, 5_000) - t0);
    t0 = performance.now();
    await lab.topo.exec("n1", ["ip", "addr", "del", `${lab.vip}/32`, "dev", "lo"]);
    out.floorDel.push(await route.until(one, 5_000) - t0);
    await new Promise((r) => setTimeout(r, 50));
  }
  // Part 4: n2's bird killed under its agent (n2 holds the route alone now).
  for (let i = 0; i < KILLS; i++) {
    await new Promise((r) => setTimeout(r, HEALTHY_RUN_MS + 100)); // the last bird ran long enough
    const t = await killBirdAndTime(lab, "n2", route, one);
    out.killRoute.push(t.routeMs);
    out.killAfterSession.push(t.routeAfterSessionMs);
    out.goneKill.push(t.goneMs);
  }
  // Part 5: n2's bird hung (only BFD notices), then resumed and its route back; last, its link.
  const gone = async (act: () => Promise<void>) => {
    const t0 = performance.now();
    await act();
    return await route.until((g) => !one(g), 15_000) - t0;
  };
  for (let i = 0; i < HUNGS; i++) {
    try {
      out.goneHung.push(await gone(() => lab.signalBird("n2", "STOP")));
    } finally {
      await lab.signalBird("n2", "CONT");
    }
    await route.until(one, 30_000);
  }
  out.goneLinkDown = await gone(() => lab.topo.setLink("n2", "eth0", false));
  return out;
}

/** Part 3: long-lived connections across 2 → 3 → 2 nodes, plain anycast or with redirection. */
async function longLived(redirect: boolean) {
  await using lab = await AnycastLab.create({ nodes: 3, services: ECHO_SERVICES, redirect });
  return await holdAcrossScale(lab, CONNECTIONS);
}

const {
  announce,
  withdraw,
  floorAdd,
  floorDel,
  killRoute,
  killAfterSession,
  goneKill,
  goneHung,
  goneLinkDown,
} = await latency();
const plain = await longLived(false);
const redirected = await longLived(true);

const a = stats(announce), w = stats(withdraw), fa = stats(floorAdd), fd = stats(floorDel);
const kr = stats(killRoute), ks = stats(killAfterSession);
const gk = stats(goneKill), gh = stats(goneHung);
console.log(JSON.stringify({
  msg: "anycast",
  rounds: ROUNDS,
  announce_ms_p50: a.p50,
  announce_ms_max: a.max,
  withdraw_ms_p50: w.p50,
  withdraw_ms_max: w.max,
  floor_ip_addr_add_ms_p50: fa.p50,
  floor_ip_addr_add_ms_max: fa.max,
  floor_ip_addr_del_ms_p50: fd.p50,
  floor_ip_addr_del_ms_max: fd.max,
  longlived_connections: plain.connections,
  plain_lost: plain.connections - plain.survived,
  redirect_lost: redirected.connections - redirected.survived,
  plain_max_stall_ms: plain.max_stall_ms,
  redirect_max_stall_ms: redirected.max_stall_ms,
  bird_kills: KILLS,
  bird_kill_route_ms_p50: kr.p50,
  bird_kill_route_ms_max: kr.max,
  bird_kill_route_after_session_ms_p50: ks.p50,
  bird_kill_route_after_session_ms_max: ks.max,
  nexthop_gone_kill_ms_p50: gk.p50,
  nexthop_gone_kill_ms_max: gk.max,
  nexthop_gone_hung_ms_p50: gh.p50,
  nexthop_gone_hung_ms_max: gh.max,
  nexthop_gone_link_down_ms: round1(goneLinkDown),
  goal_met: a.p50 <= 50 && w.p50 <= 50 && a.max <= 200 && w.max <= 200,
}));
