/**
 * The sender's TCP link to one standby peer: connect with backoff, a bounded send queue drained
 * by one writer, ACKs read back (frames applied on this connection) for `flush()`.
 *
 * A full queue closes the connection (its entries counted as dropped) and the link reconnects at
 * once: the reconnect's resync restores the peer, and ACK counting stays exact because a
 * connection never loses a frame it accepted.
 *
 * @module
 */

import { Backoff, sleep } from "../../lib/backoff.ts";
import type { Logger } from "../../lib/log.ts";
import { encodeHello, FRAME, FrameReader, SyncWireError } from "./_sync_wire.ts";

/** A standby peer's sync endpoint. */
export interface SyncPeer {
  name: string;
  host: string;
  port: number;
}

/** What a link needs from its sender. */
export interface PeerLinkOptions {
  /** This pod's name, sent in HELLO. */
  self: string;
  /** Bytes queued before the connection is dropped and resynced. */
  maxQueueBytes: number;
  log: Logger;
  /** Called once a connection is up (HELLO queued): the sender resyncs this peer. */
  onConnect: (link: PeerLink) => void;
  /** Called when a full queue forced a reconnect, with the entries dropped. */
  onOverflow: (link: PeerLink, droppedEntries: number) => void;
}

const CONNECT_TIMEOUT_MS = 3_000;
const WRITE_CHUNK = 1024 * 1024;

interface Waiter {
  target: number;
  resolve: (acked: boolean) => void;
}

/** One peer's link; `start()` runs it until `stop()`. */
export class PeerLink {
  readonly peer: SyncPeer;
  readonly #o: PeerLinkOptions;
  readonly #stop = new AbortController();
  #conn: Deno.TcpConn | null = null;
  #connAbort: AbortController | null = null;
  #queue: { bytes: Uint8Array; entries: number }[] = [];
  #queuedBytes = 0;
  #enqueued = 0;
  #acked = 0;
  #wake: (() => void) | null = null;
  #waiters = new Set<Waiter>();
  #done: Promise<void> = Promise.resolve();

  constructor(peer: SyncPeer, options: PeerLinkOptions) {
    this.peer = peer;
    this.#o = options;
  }

  /** Whether a connection is up (frames are accepted). */
  get connected(): boolean {
    return this.#conn !== null;
  }

  /** Starts the connect / send / reconnect loop. */
  start(): void {
    this.#done = this.#run();
  }

  /** Stops the loop and closes the connection. */
  async stop(): Promise<void> {
    this.#stop.abort(new Error("sync sender stopped"));
    this.#connAbort?.abort();
    this.#wake?.();
    await this.#done;
  }

  /**
   * Queues a frame carrying `entries` entries; false when not connected. Past the queue bound the
   * connection is dropped (see the module doc).
   */
  send(bytes: Uint8Array, entries: number): boolean {
    if (!this.#conn) return false;
    this.#queue.push({ bytes, entries });
    this.#queuedBytes += bytes.length;
    this.#enqueued++;
    if (this.#queuedBytes > this.#o.maxQueueBytes) {
      const dropped = this.#queue.reduce((n, f) => n + f.entries, 0);
      this.#queue = [];
      this.#queuedBytes = 0;
      this.#o.log.warn("sync peer send buffer full: reconnecting to resync", {
        peer: this.peer.name,
        dropped_entries: dropped,
        max_bytes: this.#o.maxQueueBytes,
      });
      this.#connAbort?.abort(new Error("send buffer full"));
      this.#o.onOverflow(this, dropped);
      return false;
    }
    this.#wake?.();
    return true;
  }

  /** Resolves true once every frame queued so far is applied by the peer, false if it went down. */
  acked(timeoutMs: number): Promise<boolean> {
    const target = this.#enqueued >>> 0;
    if (!this.#conn || this.#acked === target) return Promise.resolve(this.#conn !== null);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        target,
        resolve: (ok) => {
          clearTimeout(timer);
          this.#waiters.delete(waiter);
          resolve(ok);
        },
      };
      const timer = setTimeout(() => waiter.resolve(false), timeoutMs);
      this.#waiters.add(waiter);
    });
  }

  async #run(): Promise<void> {
    const backoff = new Backoff({ minMs: 100, maxMs: 5_000 });
    const signal = this.#stop.signal;
    for (let attempt = 0; !signal.aborted; attempt++) {
      let conn: Deno.TcpConn;
      try {
        conn = await this.#connect();
      } catch (e) {
        const retryMs = Math.round(backoff.next());
        if (backoff.attempt === 1) {
          this.#o.log.info("sync peer unreachable", {
            peer: this.peer.name,
            error: e,
            retry_ms: retryMs,
          });
        }
        await sleep(retryMs, signal).catch(() => {});
        continue;
      }
      backoff.reset();
      const reason = await this.#serve(conn);
      if (signal.aborted) break;
      const retryMs = reason === "send buffer full" ? 0 : Math.round(backoff.next());
      this.#o.log.info("sync peer down", { peer: this.peer.name, reason, retry_ms: retryMs });
      await sleep(retryMs, signal).catch(() => {});
    }
  }

  async #connect(): Promise<Deno.TcpConn> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const pending = Deno.connect({ hostname: this.peer.host, port: this.peer.port });
    try {
      return await Promise.race([
        pending,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS} ms`)),
            CONNECT_TIMEOUT_MS,
          );
        }),
      ]);
    } catch (e) {
      pending.then((c) => c.close(), () => {});
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Runs one connection until it fails; returns why it ended. */
  async #serve(conn: Deno.TcpConn): Promise<string> {
    conn.setNoDelay(true);
    const abort = new AbortController();
    this.#connAbort = abort;
    this.#conn = conn;
    this.#queue = [];
    this.#queuedBytes = 0;
    this.#enqueued = 0;
    this.#acked = 0;
    this.#o.log.info("sync peer connected", {
      peer: this.peer.name,
      address: `${this.peer.host}:${this.peer.port}`,
    });
    this.send(encodeHello(this.#o.self), 0);
    this.#o.onConnect(this);
    const ended = (e: unknown) => {
      if (!abort.signal.aborted) abort.abort(e);
    };
    const onAbort = () => {
      try {
        conn.close();
      } catch { /* closed */ }
      this.#wake?.();
    };
    abort.signal.addEventListener("abort", onAbort, { once: true });
    await Promise.all([
      this.#pump(conn, abort.signal).catch(ended),
      this.#readAcks(conn).catch(ended),
    ]);
    const reason = abort.signal.reason instanceof Error ? abort.signal.reason.message : "closed";
    this.#conn = null;
    this.#connAbort = null;
    this.#queue = [];
    this.#queuedBytes = 0;
    for (const w of [...this.#waiters]) w.resolve(false);
    return reason;
  }

  async #pump(conn: Deno.TcpConn, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      if (this.#queue.length === 0) {
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = null;
        continue;
      }
      let size = 0, count = 0;
      while (
        count < this.#queue.length &&
        (count === 0 || size + this.#queue[count]!.bytes.length <= WRITE_CHUNK)
      ) {
        size += this.#queue[count]!.bytes.length;
        count++;
      }
      const frames = this.#queue.splice(0, count);
      this.#queuedBytes -= size;
      const chunk = count === 1 ? frames[0]!.bytes : new Uint8Array(size);
      if (count > 1) {
        let o = 0;
        for (const f of frames) (chunk.set(f.bytes, o), o += f.bytes.length);
      }
      for (let o = 0; o < chunk.length;) o += await conn.write(chunk.subarray(o));
    }
  }

  async #readAcks(conn: Deno.TcpConn): Promise<void> {
    const reader = new FrameReader();
    const buf = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) throw new Error("peer closed the connection");
      reader.push(buf.subarray(0, n));
      for (const f of reader.frames()) {
        if (f.type !== FRAME.ACK) {
          throw new SyncWireError(`unexpected frame type ${f.type} from the receiver`);
        }
        this.#acked = f.applied;
        for (const w of [...this.#waiters]) {
          if (((this.#acked - w.target) | 0) >= 0) w.resolve(true);
        }
      }
    }
  }
}
