/**
 * The dead-man switch of a NAT pod's bird: a small `bash` process beside it that kills bird
 * (SIGKILL: its BGP sessions close, the routers drop every route it announced) unless the agent
 * keeps telling it, in time, until when it may still announce.
 *
 * Why: bird is a process of its own. A SIGSTOPped, starving or killed agent cannot withdraw, and
 * bird would keep announcing the floating addresses it owned while the lease expires and the
 * standby announces them too — two announcers at once. The agent writes one line per tick (and
 * before each announcement): the seconds left until the earliest lease deadline of what bird
 * announces (`ownership.ts` `validUntil`: its last renew sent + ttl − margin, the same deadline
 * its own fence removes the addresses at). The watchdog reads with that timeout (`read -t`); a
 * line that does not come in time (the agent stopped or stalled) or the end of its input (the
 * agent died: the pipe closes) kills bird. So bird stops announcing by the deadline the lease
 * gives, whatever happens to the agent, and the lease itself expires only `margin` later.
 *
 * A line `exit` ends the watchdog without a kill (the agent stops bird itself, or bird was
 * replaced and a new watchdog watches the new one).
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";

/** When nothing is announced: no deadline (an hour, renewed every tick). */
const NO_DEADLINE_S = 3600;

/** The watchdog (`bash -c SCRIPT NAME BIRD_PID`): reads deadlines (seconds left) line by line; kills bird when one passes or its input ends. */
export const WATCHDOG_SCRIPT = `t=${NO_DEADLINE_S}
while :; do
  IFS= read -r -t "$t" line; rc=$?
  [ "$rc" -ne 0 ] && break
  [ "$line" = exit ] && exit 0
  t=$line
done
why=agent-gone; [ "$rc" -gt 128 ] && why=deadline-passed
kill -KILL "$1" 2>/dev/null
printf '{"level":"warn","component":"egress-bgp-watchdog","msg":"bird killed: its agent is gone or missed its lease deadline","why":"%s","bird_pid":%s}\\n' "$why" "$1" >&2
`;

/** A watchdog over one bird process. */
export class BirdWatchdog {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #log: Logger;
  #closed = false;
  #last = "";

  private constructor(readonly birdPid: number, child: Deno.ChildProcess, log: Logger) {
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    this.#log = log;
    void child.status.then((s) => {
      if (!this.#closed) {
        this.#closed = true;
        log.warn("bird watchdog ended", { bird_pid: birdPid, code: s.code });
      }
    });
  }

  /** Starts a watchdog for bird `birdPid` (no deadline until the first {@linkcode feed}). */
  static start(birdPid: number, log: Logger): BirdWatchdog {
    const child = new Deno.Command("bash", {
      args: ["-c", WATCHDOG_SCRIPT, "hf-bird-watchdog", String(birdPid)],
      stdin: "piped",
      stdout: "null",
      stderr: "inherit",
    }).spawn();
    return new BirdWatchdog(birdPid, child, log);
  }

  /** Whether the watchdog has ended (killed bird, or was told to exit). */
  get ended(): boolean {
    return this.#closed;
  }

  /**
   * The latest moment (`performance.now()` time) bird may still announce; `Infinity` when it
   * announces nothing. A deadline already passed kills bird within a millisecond.
   */
  feed(deadline: number): void {
    if (this.#closed) return;
    const s = deadline === Infinity
      ? String(NO_DEADLINE_S)
      : Math.max(0.001, (deadline - performance.now()) / 1000).toFixed(3);
    if (s === this.#last && deadline === Infinity) return;
    this.#last = s;
    // A write fails only once the watchdog has ended (it killed bird): logged by `status`.
    this.#writer.write(new TextEncoder().encode(`${s}\n`)).catch(() => {});
  }

  /** Ends the watchdog without killing bird. */
  async stop(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#writer.write(new TextEncoder().encode("exit\n")).catch(() => {});
    await this.#writer.close().catch(() => {});
    const timer = setTimeout(() => {
      try {
        this.#child.kill("SIGKILL");
      } catch { /* gone */ }
    }, 2_000);
    await this.#child.status;
    clearTimeout(timer);
  }
}
