/**
 * The routed egress measurement (issue 23 item 3) shared by `deno task bench:egress-steer`
 * (`bench/egress_steer.ts`) and the routed part of `deno task bench:egress`: the routed egress lab
 * (lab/egress_routed.ts) with `clientNodes` client nodes, each running `main.ts node
 * --egress-steer` with one client pod that sends a UDP probe every 10 ms to the server, two NAT
 * pods. `rounds` times the owner dies (links down + SIGKILL), then returns and ownership settles.
 * Per round:
 *
 * - repoint = the successor's `address assumed` log line → each node agent's `egress steering to
 *   owner` line naming it (the slowest node is the round's "every node repointed");
 * - lag = the owner-change entry's Redis time → applied on the node (`lag_ms` of that line);
 * - takeover = death (the start of the kill) → each client's first UDP echo that ends a silence
 *   begun before the owner's links were down (steering and the external side's gratuitous ARP
 *   both followed), and follow = `address assumed` → that echo.
 *
 * Times of different processes come from their log lines' wall clock (one machine).
 *
 * @module
 */

import { clientNode, createRoutedEgressLab, FLOATING, NATS } from "../lab/egress_routed.ts";
import type { HostProcess } from "../lab/host_process.ts";
import { median } from "./_stats.ts";

function json(line: string): Record<string, unknown> {
  try {
    return JSON.parse(line);
  } catch {
    return {};
  }
}

/** Wall time (ms) of the first line of `p` from `fromLine` that matches, waiting up to `ms`. */
async function lineTime(
  p: HostProcess | null | undefined,
  fromLine: number,
  match: (l: Record<string, unknown>) => boolean,
  ms: number,
): Promise<{ at: number; line: Record<string, unknown> } | null> {
  if (!p) return null;
  const line = await p.waitForLine((l) => match(json(l)), { fromLine, timeoutMs: ms })
    .catch(() => null);
  if (line === null) return null;
  const l = json(line);
  return { at: Date.parse(String(l.ts)), line: l };
}

function max(xs: number[]): number | null {
  return xs.length === 0 ? null : Math.max(...xs);
}

/** p50/max of each measure over `rounds` owner deaths with `clientNodes` client nodes. */
export async function measureSteering(
  rounds: number,
  clientNodes: number,
  note: (msg: string, fields?: Record<string, unknown>) => void,
) {
  const ROUNDS = rounds, CLIENT_NODES = clientNodes;
  await using lab = await createRoutedEgressLab(CLIENT_NODES);
  await lab.publish();
  await lab.startServer();
  for (const name of NATS) await lab.startNat(name);
  const nodes = Array.from({ length: CLIENT_NODES }, (_, i) => clientNode(i + 1));
  for (const n of nodes) await lab.startNode(false, [], n.node);
  const probeMs = 10;
  const probes = new Map<string, HostProcess>();
  for (const n of nodes) {
    probes.set(n.node, await lab.startUdp(ROUNDS * 12_000 + 10_000, probeMs, n.pod));
  }

  const repoint: number[] = [], repointEvery: number[] = [], lag: number[] = [];
  const takeover: number[] = [], follow: number[] = [];
  let unseen = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const victim = await lab.owner({ timeoutMs: 30_000 });
    const successor = NATS.find((n) => n !== victim)!;
    const succ = lab.nat.get(successor)!;
    const from = { succ: succ.lineCount, nodes: new Map(nodes.map((n) => [n.node, 0])) };
    for (const n of nodes) from.nodes.set(n.node, lab.nodes.get(n.node)!.lineCount);
    const probeFrom = new Map(nodes.map((n) => [n.node, probes.get(n.node)!.lineCount]));
    const diedAt = Date.now();
    await lab.killNat(victim);
    const downAt = Date.now(); // links down (the `ip` runs take a while on a loaded machine)
    const assumed = await lineTime(
      succ,
      from.succ,
      (l) => l.msg === "address assumed" && l.address === FLOATING,
      10_000,
    );
    const perNode: Record<string, unknown> = {};
    let slowest = -Infinity;
    for (const n of nodes) {
      const r = await lineTime(
        lab.nodes.get(n.node),
        from.nodes.get(n.node)!,
        (l) => l.msg === "egress steering to owner" && l.pod === successor,
        10_000,
      );
      const echo = await lineTime(
        probes.get(n.node),
        probeFrom.get(n.node)!,
        // The silence it ends must have begun by the time the links were down (not a pause of
        // the loaded probe before the death, nor one that began after the takeover).
        (l) =>
          l.msg === "resumed" && Number(l.at) >= diedAt &&
          Number(l.at) - Number(l.gap_ms) <= downAt + probeMs,
        10_000,
      );
      const echoAt = echo ? Number(echo.line.at) : null;
      if (!assumed || !r) {
        unseen++;
        continue;
      }
      const ms = r.at - assumed.at;
      repoint.push(ms);
      slowest = Math.max(slowest, ms);
      if (typeof r.line.lag_ms === "number") lag.push(r.line.lag_ms);
      if (echoAt !== null) {
        takeover.push(echoAt - diedAt);
        follow.push(echoAt - assumed.at);
      }
      perNode[n.node] = {
        repoint_ms: ms,
        lag_ms: r.line.lag_ms,
        takeover_ms: echoAt === null ? null : echoAt - diedAt,
      };
    }
    if (slowest > -Infinity) repointEvery.push(slowest);
    note("failover", {
      i,
      victim,
      successor,
      assume_ms: assumed ? assumed.at - diedAt : null,
      every_node_repointed_ms: slowest > -Infinity ? slowest : null,
      nodes: perNode,
    });
    await lab.restartNat(victim);
    await new Promise((r) => setTimeout(r, 500));
  }
  return {
    rounds: ROUNDS,
    client_nodes: CLIENT_NODES,
    repoint_ms_p50: median(repoint),
    repoint_ms_max: max(repoint),
    every_node_repointed_ms_p50: median(repointEvery),
    every_node_repointed_ms_max: max(repointEvery),
    lag_ms_p50: median(lag),
    lag_ms_max: max(lag),
    takeover_ms_p50: median(takeover),
    takeover_ms_max: max(takeover),
    follow_ms_p50: median(follow),
    follow_ms_max: max(follow),
    unseen,
  };
}
