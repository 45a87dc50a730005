/**
 * Which BGP sessions of a bird are Established, followed over one control-socket connection
 * (`show protocols` every {@linkcode SESSIONS_POLL_MS}, no `birdc` process per look). The egress
 * NAT pods use it (node/egress/_bgp.ts): a pod whose announcements would reach no router must not
 * be given floating addresses (docs/egress.md "BGP mode").
 *
 * The connection follows the socket's path, so a bird restarted by the supervisor is found again;
 * while bird cannot be reached (killed, restarting, hung past the reply timeout) no session counts
 * as established. Never throws; bounded by {@linkcode BirdSessions.stop}.
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import { Backoff, sleep } from "../../lib/backoff.ts";
import { parseShowProtocols } from "./bird.ts";
import { replyComplete } from "./_waker.ts";

/** How often the sessions are read (a lost session is seen within about this). */
export const SESSIONS_POLL_MS = 100;

/** How long one reply may take before bird counts as unreachable (and the connection is remade). */
const REPLY_TIMEOUT_MS = 1_000;
const COMMAND = new TextEncoder().encode("show protocols\n");

/**
 * The names of the BGP protocols that are Established in a `show protocols` reply read off the
 * control socket (each line led by its reply code, `1002-` or a space).
 *
 * @example
 * ```ts
 * import { establishedSessions } from "./_sessions.ts";
 * const reply = "2002-Name  Proto  Table  State  Since  Info\n" +
 *   "1002-device1  Device  ---  up  15:07:51.988\n" +
 *   " hf_peer_1  BGP  ---  up  15:07:52.100  Established\n" +
 *   " hf_peer_2  BGP  ---  start  15:07:52.100  Active  Socket: Connection refused\n0000 \n";
 * if (establishedSessions(reply).join() !== "hf_peer_1") throw new Error();
 * ```
 */
export function establishedSessions(reply: string): string[] {
  const text = reply.split("\n").map((l) => l.replace(/^\d{4}[ -]/, "")).join("\n");
  return parseShowProtocols(text)
    .filter((p) => p.proto === "BGP" && p.info.startsWith("Established"))
    .map((p) => p.name)
    .sort();
}

/** Options of {@linkcode BirdSessions.start}. */
export interface BirdSessionsOptions {
  /** Called with the Established sessions each time that set changes (first: the first read). */
  readonly onChange: (established: readonly string[]) => void;
  readonly log: Logger;
  /** Poll period, ms (default {@linkcode SESSIONS_POLL_MS}). */
  readonly intervalMs?: number;
}

/** Follows a bird's Established BGP sessions; see the module doc. */
export class BirdSessions {
  readonly #stop = new AbortController();
  readonly #buf = new Uint8Array(16_384);
  readonly #done: Promise<void>;
  #conn: Deno.UnixConn | null = null;
  #established: readonly string[] | null = null;

  private constructor(readonly socket: string, readonly options: BirdSessionsOptions) {
    this.#done = this.#run();
  }

  /** Starts following the bird of control socket `socket`. */
  static start(socket: string, options: BirdSessionsOptions): BirdSessions {
    return new BirdSessions(socket, options);
  }

  /** The Established sessions as last read (empty before the first read). */
  get established(): readonly string[] {
    return this.#established ?? [];
  }

  #set(next: readonly string[]): void {
    if (this.#established !== null && next.join() === this.#established.join()) return;
    this.#established = next;
    try {
      this.options.onChange(next);
    } catch (err) {
      this.options.log.error("BGP session callback failed", { err });
    }
  }

  async #run(): Promise<void> {
    const signal = this.#stop.signal;
    const backoff = new Backoff({ minMs: 50, maxMs: 500 });
    const interval = this.options.intervalMs ?? SESSIONS_POLL_MS;
    // Bounded by count (years of attempts at the longest backoff) and by stop().
    for (let attempt = 0; attempt < 1_000_000 && !signal.aborted; attempt++) {
      try {
        this.#conn = await Deno.connect({ transport: "unix", path: this.socket });
        if (signal.aborted) break;
        await this.#read(); // the `0001 BIRD … ready.` banner
        backoff.reset();
        for (let i = 0; i < Number.MAX_SAFE_INTEGER && !signal.aborted; i++) {
          await this.#conn.write(COMMAND);
          this.#set(establishedSessions(await this.#read()));
          await sleep(interval, signal);
        }
      } catch (e) {
        if (signal.aborted) break;
        if (e instanceof Deno.errors.NotCapable || e instanceof Deno.errors.PermissionDenied) {
          this.options.log.warn(
            "cannot read BGP sessions: no permission for bird's control socket",
            { socket: this.socket, fix: `--allow-net=unix:${this.socket}`, error: e },
          );
          break;
        }
        this.#set([]); // bird unreachable: no session can be counted on
      } finally {
        this.#close();
      }
      await sleep(backoff.next(), signal).catch(() => {});
    }
  }

  /** One complete reply (bounded by size and {@linkcode REPLY_TIMEOUT_MS}). */
  async #read(): Promise<string> {
    const conn = this.#conn!;
    const decoder = new TextDecoder();
    let text = "";
    const timer = setTimeout(() => this.#close(), REPLY_TIMEOUT_MS);
    try {
      for (let i = 0; i < 256; i++) {
        const n = await conn.read(this.#buf);
        if (n === null) throw new Error("bird closed its control socket");
        text += decoder.decode(this.#buf.subarray(0, n), { stream: true });
        if (replyComplete(text)) return text;
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

  /** Stops following and closes the connection. Safe to call twice. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#close();
    await this.#done;
  }
}
