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
 * The wall-clock time (epoch ms) of a `Since` column of `birdc show protocols` (`02:02:29.474`,
 * local time of day as bird prints it), taking the day that puts it nearest to `near` (epoch ms),
 * so a session that came up just before midnight reads right after it.
 *
 * @example
 * ```ts
 * import { sinceToEpochMs } from "./_bird_kill.ts";
 * const near = new Date(2026, 10, 29, 0, 0, 1, 0).getTime();
 * const t = sinceToEpochMs("23:59:59.500", near);
 * if (near - t !== 1_500) throw new Error(String(near - t));
 * ```
 */
export function sinceToEpochMs(since: string, near: number): number {
  const m = /^(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?$/.exec(since);
  if (!m) throw new Error(`Cannot read bird's "Since" time ${JSON.stringify(since)}`);
  const day = new Date(near);
  const at = (offsetDays: number) =>
    new Date(
      day.getFullYear(),
      day.getMonth(),
      day.getDate() + offsetDays,
      Number(m[1]),
      Number(m[2]),
      Number(m[3]),
      Number((m[4] ?? "0").padEnd(3, "0")),
    ).getTime();
  return [-1, 0, 1].map(at).reduce((a, b) => Math.abs(a - near) <= Math.abs(b - near) ? a : b);
}

/**
 * The `Since` time (epoch ms) of the router protocol `name` in `birdc show protocols` output once
 * it is Established, else null.
 */
export function establishedSince(protocols: string, name: string, near: number): number | null {
  const row = protocols.split("\n").find((l) => l.startsWith(`${name} `));
  const f = row?.trim().split(/\s+/) ?? [];
  if (f[5] !== "Established" || f[4] === undefined) return null;
  return sinceToEpochMs(f[4], near);
}

/**
 * Waits (bounded by `timeoutMs`) until `router`'s protocol `name` is Established with a `Since`
 * after `after` (epoch ms, minus bird's clock granularity): the session that came back.
 */
export async function sessionBackSince(
  birdc: (...args: string[]) => Promise<{ stdout: string }>,
  name: string,
  after: number,
  timeoutMs = 15_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let out = "";
  for (let i = 0; i < 1_000 && Date.now() < deadline; i++) {
    out = (await birdc("show", "protocols")).stdout;
    const since = establishedSince(out, name, Date.now());
    if (since !== null && since >= after - 1) return since;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`Router session "${name}" not back after ${timeoutMs} ms:\n${out}`);
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
