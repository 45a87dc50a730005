/**
 * A router's BGP session as `birdc show protocols` shows it: its `Since` time read as epoch ms,
 * and whether two readings are the same session. bird prints `Since` by converting its monotonic
 * clock to wall-clock time at the moment it prints, so one unchanged session reads a millisecond
 * apart from one `show` to the next (CI saw `04:38:54.201` then `.202`): readings are compared
 * with {@linkcode SAME_SESSION_MS} of slack. A session that really went down and came back needs a
 * TCP connect and an OPEN/KEEPALIVE exchange after bird noticed, far longer than that slack.
 *
 * @module
 */

/** Two `Since` readings this close (ms) are one session (bird's print-time clock conversion). */
export const SAME_SESSION_MS = 20;

/** Whether two `Since` readings (epoch ms) are the same session (see the module doc). */
export function sameSession(a: number, b: number): boolean {
  return Math.abs(a - b) <= SAME_SESSION_MS;
}

/**
 * The wall-clock time (epoch ms) of a `Since` column of `birdc show protocols` (`02:02:29.474`,
 * local time of day as bird prints it), taking the day that puts it nearest to `near` (epoch ms),
 * so a session that came up just before midnight reads right after it.
 *
 * @example
 * ```ts
 * import { sinceToEpochMs } from "./_bird_session.ts";
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
 * Waits (bounded by `timeoutMs`) until protocol `name` is Established in `birdc show protocols`
 * — with a `Since` at or after `after` (epoch ms, less bird's 1 ms granularity) when given: a
 * session that came back — and returns its `Since` (epoch ms); throws with the last output.
 */
export async function waitEstablishedSince(
  birdc: (...args: string[]) => Promise<{ stdout: string }>,
  name: string,
  timeoutMs = 5_000,
  after = -Infinity,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let out = "";
  for (let i = 0; i < 1_000 && Date.now() < deadline; i++) {
    out = (await birdc("show", "protocols")).stdout;
    const since = establishedSince(out, name, Date.now());
    if (since !== null && since >= after - 1) return since;
    await new Promise((r) => setTimeout(r, 50));
  }
  const what = after === -Infinity ? "Established" : "back";
  throw new Error(`BGP session "${name}" not ${what} after ${timeoutMs} ms:\n${out}`);
}
