/**
 * Anycast announce and withdraw latency (root, network namespaces; lab/anycast.ts):
 *
 * 1. pod ready → the router's kernel routes the LB /32 through that node, and pod terminating →
 *    that nexthop gone, over ROUNDS (20; `--quick` 3) rounds on one node while a second node
 *    keeps a pod (so each change is a multipath route replace). Timed from the state-file write
 *    (what a pod watch would deliver) to the `ip monitor route` line on the router.
 * 2. the floor, side by side: the same change made by `ip addr add/del` on the node's `lo`
 *    directly (bird alone, no agent).
 * 3. what plain anycast costs long-lived connections: CONNECTIONS (100; `--quick` 40) TCP
 *    connections from the client held open while a third node gains a ready pod and then
 *    drains (2 → 3 → 2 nexthops); the ones reset because ECMP moved them are counted. This is
 *    the "without flow redirection" half of issue 12's side-by-side (the "with" is not built).
 *
 * Last stdout line: one JSON object with announce_ms_p50/max, withdraw_ms_p50/max and the
 * floor's. Goal (issue 12): each p50 ≤ 50 ms, max ≤ 200 ms.
 *
 * @module
 */

import { readCommandLineOrExit } from "../lib/args.ts";
import { AnycastLab } from "../lab/anycast.ts";
import { median } from "./_stats.ts";
import { clientSummary } from "../lab/clients/summary.ts";

const ECHO = new URL("../lab/clients/tcp_echo.ts", import.meta.url).pathname;
const HOLD = new URL("../lab/clients/hold_client.ts", import.meta.url).pathname;

const OPTIONS = {
  command: "bench:anycast",
  usage: `usage: deno task bench:anycast [--quick]
  Anycast latency in network namespaces (root): pod ready → route on the router, terminating →
  route withdrawn. --quick: 3 rounds instead of 20.`,
  options: { quick: { type: "boolean" } },
} as const;
const args = readCommandLineOrExit(Deno.args, OPTIONS, ({ values }) => ({
  quick: values.quick === true,
}));
const ROUNDS = args.quick ? 3 : 20;
const CONNECTIONS = args.quick ? 40 : 100;

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
  return out;
}

/** Part 3: long-lived connections across 2 → 3 → 2 nodes (echo pods on port 9000). */
async function longLived() {
  await using lab = await AnycastLab.create({ nodes: 3 });
  const route = await lab.watchRoute();
  for (const n of ["n1", "n2", "n3"]) {
    const echo = lab.topo.spawnDeno(n, ECHO, {
      args: ["server", "0.0.0.0", "9000"],
      permissions: ["--allow-net"],
    });
    await echo.waitForLine((l) => l.includes("listening"));
  }
  await lab.startPod("n1", "default/web-1", { port: 0 });
  await lab.startPod("n2", "default/web-2", { port: 0 });
  await lab.startPod("n3", "default/web-3", { port: 0, ready: false });
  await route.until((g) => g.join() === "10.9.1.2,10.9.2.2", 5_000);
  const hold = lab.topo.spawnDeno("client", HOLD, {
    args: [lab.vip, "9000", String(CONNECTIONS), "3000", "50"],
    permissions: ["--allow-net"],
  });
  await hold.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
  await lab.updatePod("default/web-3", { ready: true });
  await route.until((g) => g.length === 3, 5_000);
  await new Promise((r) => setTimeout(r, 1_000));
  await lab.updatePod("default/web-3", { terminating: true });
  await route.until((g) => g.length === 2, 5_000);
  return await clientSummary(hold, 20_000);
}

const { announce, withdraw, floorAdd, floorDel } = await latency();
const held = await longLived();

const a = stats(announce), w = stats(withdraw), fa = stats(floorAdd), fd = stats(floorDel);
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
  longlived_connections: held.connections,
  longlived_lost_2_3_2_nodes: held.connections - held.survived,
  goal_met: a.p50 <= 50 && w.p50 <= 50 && a.max <= 200 && w.max <= 200,
}));
