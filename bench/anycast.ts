/**
 * Anycast announce and withdraw latency (root, network namespaces; lab/anycast.ts):
 *
 * 1. pod ready → the router's kernel routes the LB /32 through that node, and pod terminating →
 *    that nexthop gone, over ROUNDS (20; `--quick` 3) rounds on one node while a second node
 *    keeps a pod (so each change is a multipath route replace). Timed from the state-file write
 *    (what a pod watch would deliver) to the `ip monitor route` line on the router.
 * 2. the floor, side by side: the same change made by `ip addr add/del` on the node's `lo`
 *    directly (bird alone, no agent).
 *
 * Last stdout line: one JSON object with announce_ms_p50/max, withdraw_ms_p50/max and the
 * floor's. Goal (issue 12): each p50 ≤ 50 ms, max ≤ 200 ms.
 *
 * @module
 */

import { readCommandLineOrExit } from "../lib/args.ts";
import { AnycastLab } from "../lab/anycast.ts";
import { median } from "./_stats.ts";

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

const round1 = (x: number) => Math.round(x * 10) / 10;
const stats = (xs: number[]) => ({ p50: round1(median(xs)), max: round1(Math.max(...xs)) });

await using lab = await AnycastLab.create({ nodes: 2 });
const route = await lab.watchRoute();
await lab.startPod("n2", "default/web-2");
await route.until((g) => g.join() === "10.9.2.2");
await lab.startPod("n1", "default/web-1", { ready: false });
const both = (g: string[]) => g.join() === "10.9.1.2,10.9.2.2";
const one = (g: string[]) => g.join() === "10.9.2.2";

const announce: number[] = [], withdraw: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  let t0 = performance.now();
  await lab.updatePod("default/web-1", { ready: true, terminating: false });
  announce.push(await route.until(both, 5_000) - t0);
  t0 = performance.now();
  await lab.updatePod("default/web-1", { terminating: true });
  withdraw.push(await route.until(one, 5_000) - t0);
  // Settle: the agent's log line and bird's update are out before the next round.
  await new Promise((r) => setTimeout(r, 50));
}
await lab.deletePod("default/web-1");

const floorAdd: number[] = [], floorDel: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  let t0 = performance.now();
  await lab.topo.exec("n1", ["ip", "addr", "add", `${lab.vip}/32`, "dev", "lo"]);
  floorAdd.push(await route.until(both, 5_000) - t0);
  t0 = performance.now();
  await lab.topo.exec("n1", ["ip", "addr", "del", `${lab.vip}/32`, "dev", "lo"]);
  floorDel.push(await route.until(one, 5_000) - t0);
  await new Promise((r) => setTimeout(r, 50));
}

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
  goal_met: a.p50 <= 50 && w.p50 <= 50 && a.max <= 200 && w.max <= 200,
}));
