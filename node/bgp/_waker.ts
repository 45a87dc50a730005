/**
 * Keeps the node's bird from sleeping on work it has queued: one control-socket connection that
 * asks `show status` every {@linkcode WAKE_INTERVAL_MS}.
 *
 * Why (issue 27, part 3): bird 2.0's main loop runs its event list, then its low-priority "work"
 * list, and decides how long to `poll()` from whether the *first* list was left non-empty. The
 * feed of a channel that just came up is a work event; it queues the BGP transmit event on the
 * first list, which nobody looks at before `poll()` sleeps its default 3 s (shown with strace on
 * 2.0.12: `poll(…, 3000)` right after the route was fed to the session, the UPDATE written when
 * the poll returned). Nothing else wakes that loop soon: BFD has its own thread, the keepalive
 * timer is a minute away, and the router's End-of-RIB is late by the same bug on its side. So
 * after every session establishment (a restarted bird, a router that restarted, a flapped link)
 * the node's routes reached the router either at once (something else happened to wake bird, e.g.
 * BFD coming up after the session) or 3 s later — 4 of 16 IPv4 and 4 of 8 IPv6 bird kills in the
 * field, 10 of 16 in the anycast lab.
 *
 * Any readable socket ends the `poll()`, after which the loop runs the queued transmit. A command
 * on the control socket every 50 ms bounds that stall to 50 ms, whatever queued the work. It costs
 * bird one tiny reply per tick (no log line, no route work): about 0.1 % of a CPU; the agent about
 * 0.5–0.8 %, most of it the 50 ms timer itself (measured on a loaded 2-CPU machine).
 * Later bird versions compute the sleep after running every list (BIRD 3's io loop does).
 *
 * The waker never throws: a bird that is restarting, hung or gone is retried (bounded backoff)
 * until {@linkcode BirdWaker.stop}; the daemon's own supervision deals with the bird itself.
 * Deno counts a unix socket as net access: the agent needs `--allow-net` (the `agent` and
 * `anycast` permission sets have it) or `--allow-net=unix:DIR/bird.ctl`; without it the waker
 * logs one warning naming the flag and stops.
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import { Backoff, sleep } from "../../lib/backoff.ts";

/** How often bird is woken: the longest a queued BGP update can wait (issue 27: ≤ ~100 ms). */
export const WAKE_INTERVAL_MS = 50;

/** How long one reply may take before the connection is dropped and made again. */
const REPLY_TIMEOUT_MS = 5_000;
const COMMAND = new TextEncoder().encode("show status\n");

/**
 * Whether `text` (bird CLI output so far) holds a complete reply: a line of four digits and a
 * space (`0013 Daemon is up and running`, or an error such as `9001 …`); continuation lines have
 * a `-` after the code or start with a space.
 *
 * @example
 * ```ts
 * import { replyComplete } from "./_waker.ts";
 * if (replyComplete("1000-BIRD 2.0.12\n1011-Router ID is 10.9.1.2\n")) throw new Error();
 * if (!replyComplete("1000-BIRD 2.0.12\n 1011-x\n0013 Daemon is up and running\n")) {
 *   throw new Error();
 * }
 * ```
 */
export function replyComplete(text: string): boolean {
  return /(^|\n)\d{4} [^\n]*\n/.test(text);
}

/** One connection to bird's control socket that wakes bird's main loop every interval. */
export class BirdWaker {
  readonly #stop = new AbortController();
  #conn: Deno.UnixConn | null = null;
  readonly #done: Promise<void>;
  #wakes = 0;
  readonly #buf = new Uint8Array(4_096);

  private constructor(
    readonly socket: string,
    readonly intervalMs: number,
    readonly log: Logger,
  ) {
    this.#done = this.#run();
  }

  /** Starts waking the bird of control socket `socket` (until {@linkcode BirdWaker.stop}). */
  static start(
    socket: string,
    options: { log: Logger; intervalMs?: number },
  ): BirdWaker {
    return new BirdWaker(socket, options.intervalMs ?? WAKE_INTERVAL_MS, options.log);
  }

  /** Replies bird gave so far (each one a wake-up). */
  get wakes(): number {
    return this.#wakes;
  }

  async #run(): Promise<void> {
    const backoff = new Backoff({ minMs: 50, maxMs: 1_000 });
    const signal = this.#stop.signal;
    let warned = false;
    // Bounded by count (a year of connection attempts) and by stop().
    for (let attempt = 0; attempt < 1_000_000 && !signal.aborted; attempt++) {
      try {
        this.#conn = await Deno.connect({ transport: "unix", path: this.socket });
        if (signal.aborted) break;
        await this.#read(); // the `0001 BIRD … ready.` banner
        backoff.reset();
        warned = false;
        for (let i = 0; i < Number.MAX_SAFE_INTEGER && !signal.aborted; i++) {
          await this.#conn.write(COMMAND);
          await this.#read();
          this.#wakes++;
          await sleep(this.intervalMs, signal);
        }
      } catch (e) {
        if (signal.aborted) break;
        if (e instanceof Deno.errors.NotCapable || e instanceof Deno.errors.PermissionDenied) {
          this.log.warn(
            "cannot wake bird: no permission for its control socket; a BGP update may wait up " +
              "to 3 s after a session comes up",
            { socket: this.socket, fix: `--allow-net=unix:${this.socket}`, error: e },
          );
          break;
        }
        if (!warned) {
          warned = true;
          this.log.debug("cannot reach bird's control socket to wake it; retrying", {
            socket: this.socket,
            error: e,
          });
        }
      } finally {
        this.#close();
      }
      await sleep(backoff.next(), signal).catch(() => {});
    }
  }

  /** Reads one complete reply (bounded by size and {@linkcode REPLY_TIMEOUT_MS}). */
  async #read(): Promise<void> {
    const conn = this.#conn!;
    const buf = this.#buf;
    const decoder = new TextDecoder();
    let text = "";
    const timer = setTimeout(() => this.#close(), REPLY_TIMEOUT_MS);
    try {
      for (let i = 0; i < 256; i++) {
        const n = await conn.read(buf);
        if (n === null) throw new Error("bird closed its control socket");
        text += decoder.decode(buf.subarray(0, n), { stream: true });
        // `0001 BIRD 2.0.12 ready.` ends the banner; any other reply ends with its code line.
        if (replyComplete(text)) return;
      }
      throw new Error(`bird's reply never ended: ${JSON.stringify(text.slice(0, 200))}`);
    } finally {
      clearTimeout(timer);
    }
  }

  #close(): void {
    try {
      this.#conn?.close();
    } catch { /* closed */ }
    this.#conn = null;
  }

  /** Stops waking and closes the connection. Safe to call twice. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#close();
    await this.#done;
  }
}
