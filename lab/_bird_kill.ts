/**
 * A node's bird killed (SIGKILL) under its running agent, timed from the router's side: when the
 * router's session with the node came back (its `Since` column, bird's own clock) and when the
 * router's kernel had the node's route again. The second minus the first is what issue 27 (part
 * 3) is about: bird 2.0 could hold a fresh session's first UPDATE for 3 s (node/bgp/_waker.ts).
 * Used by tests/netns/bgp_bird_kill_test.ts and `bench:anycast`.
 *
 * @module
 */

import type { AnycastLab } from "./anycast.ts";
import type { RouteWatch } from "./_anycast_router.ts";
import { waitEstablishedSince } from "./_bird_session.ts";

/** One kill's timings, in ms. */
export interface BirdKillTiming {
  /** SIGKILL → the router's kernel no longer routes through the node (failure detection). */
  readonly goneMs: number;
  /** SIGKILL → the router's session with the node Established again. */
  readonly sessionMs: number;
  /** SIGKILL → the router's kernel routes the address through the node again. */
  readonly routeMs: number;
  /** Session Established → route back (issue 27: was 3–4 s in a quarter to half of kills). */
  readonly routeAfterSessionMs: number;
}

/**
 * Waits (bounded by `timeoutMs`) until `router`'s protocol `name` is Established with a `Since`
 * after `after` (epoch ms, minus bird's clock granularity): the session that came back.
 */
export function sessionBackSince(
  birdc: (...args: string[]) => Promise<{ stdout: string }>,
  name: string,
  after: number,
  timeoutMs = 15_000,
): Promise<number> {
  return waitEstablishedSince(birdc, name, timeoutMs, after);
}

/**
 * Kills `node`'s bird under its agent and times its return (see {@linkcode BirdKillTiming}):
 * `route` must show `back` before the kill; the route must leave (`back` false) and return.
 */
export async function killBirdAndTime(
  lab: AnycastLab,
  node: string,
  route: RouteWatch,
  back: (gateways: string[]) => boolean,
  timeoutMs = 15_000,
): Promise<BirdKillTiming> {
  if (!back(route.gateways)) throw new Error(`${node}: the route is not there before the kill`);
  const killedAt = Date.now();
  const t0 = performance.now();
  await lab.signalBird(node, "KILL");
  const goneAt = await route.until((g) => !back(g), timeoutMs);
  const routeAt = await route.until(back, timeoutMs);
  const routeEpoch = performance.timeOrigin + routeAt;
  const since = await sessionBackSince((...a) => lab.birdc(...a), `hf_${node}`, killedAt);
  return {
    goneMs: goneAt - t0,
    sessionMs: since - killedAt,
    routeMs: routeAt - t0,
    routeAfterSessionMs: routeEpoch - since,
  };
}
