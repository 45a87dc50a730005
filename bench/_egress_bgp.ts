/**
 * The BGP part of `bench:egress` (issue 23 item 4): in the egress lab's BGP mode
 * (lab/egress_bgp.ts: two NAT pods, one floating address, a router bird in `ext`), ROUNDS times:
 * the owner's agent is SIGKILLed (its watchdog kills its bird: the router drops the route at
 * once), and the convergence is the successor's `address assumed` log line → the router's kernel
 * route to the /32 via the successor (`ip -o monitor route` in `ext`). Then the victim restarts,
 * ownership settles (it may hand the address back) and the route follows before the next round.
 * Every route change of the whole run is kept: `doubles` counts moments with two next hops (two
 * announcers at once; must be 0).
 *
 * @module
 */

import { floatingAddress } from "../lab/egress.ts";
import { createEgressBgpLab, natExternal } from "../lab/egress_bgp.ts";
import { takeoverTimes } from "../lab/egress_scenario.ts";

/** What {@linkcode measureBgpConvergence} saw. */
export interface BgpConvergence {
  /** Successor's `address assumed` → the router's route via it, ms, one per round. */
  readonly convergeMs: number[];
  /** Rounds whose route or log line was not seen. */
  readonly unseen: number;
  /** Route states with two next hops over the whole run. */
  readonly doubles: number;
}

/** Runs `rounds` SIGKILLs of the owner in one BGP lab. */
export async function measureBgpConvergence(
  rounds: number,
  note: (msg: string, fields?: Record<string, unknown>) => void,
): Promise<BgpConvergence> {
  await using lab = await createEgressBgpLab({ natPods: 2, addresses: 1 });
  const egress = lab.lab;
  await egress.startAll();
  const address = floatingAddress(0);
  const route = await lab.watch(address);
  const hopOf = (pod: string) => natExternal(egress.pods.get(pod)!.index);
  const convergeMs: number[] = [];
  let unseen = 0;
  for (let i = 0; i < rounds; i++) {
    const [owner] = await egress.settle({ timeoutMs: 30_000 });
    await route.until((h) => h.join() === hopOf(owner!), 30_000);
    const other = [...egress.pods.keys()].find((p) => p !== owner)!;
    const pod = egress.pods.get(owner!)!;
    const diedAt = Date.now();
    await pod.agent!.stop("SIGKILL");
    pod.agent = null;
    const routed = await route.until((h) => h.join() === hopOf(other), 10_000).then(
      () => route.changes.at(-1)!.wall,
      () => null,
    );
    const t = await takeoverTimes(egress.pods.get(other)!.agent, owner!, 0, diedAt);
    if (routed === null || t.assumedAt === null) unseen++;
    else convergeMs.push(routed - t.assumedAt);
    note("bgp failover", {
      i,
      victim: owner,
      successor: other,
      assume_ms: t.assumedAt === null ? null : t.assumedAt - diedAt,
      route_ms: routed === null ? null : routed - diedAt,
      converge_ms: routed === null || t.assumedAt === null ? null : routed - t.assumedAt,
    });
    await egress.startNat(owner!);
  }
  return { convergeMs, unseen, doubles: route.doubles().length };
}
