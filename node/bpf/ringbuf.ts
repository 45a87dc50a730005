/**
 * BPF ring-buffer consumption that never blocks the event loop: `epoll_wait` on libbpf's epoll
 * fd runs as a nonblocking FFI call (a worker thread waits); when it returns, the JS thread calls
 * `ring_buffer__consume`, which invokes the sample callback synchronously on the JS thread.
 * An eventfd in the same epoll set ends a wait at once on close(), so an idle reader can wait
 * long (`pollMs`) instead of waking every 100 ms: a wake-up costs an agent ~100–400 µs of CPU.
 *
 * @module
 */

import { bpf, c, errno } from "./_ffi.ts";
import { BpfError } from "./errors.ts";
import type { BpfMap } from "./map.ts";
import { log } from "../../lib/log.ts";

const EPOLL_CTL_ADD = 1;
const EPOLLIN = 1;
const EFD_NONBLOCK = 0o4000;
const EFD_CLOEXEC = 0o2000000;

/** Options for {@linkcode RingBufferReader}. */
export interface RingBufferOptions {
  /**
   * Longest single wait for the first record (default 100 ms). close() ends a wait at once
   * (an eventfd in the epoll set), so this may be long; only if the eventfd cannot be made does
   * close() wait for the wait to end.
   */
  readonly pollMs?: number;
  /**
   * After a wake-up that delivered records, take the next ones this much later (default 0), and
   * so on while records keep coming: they gather in the ring and arrive in bursts, one wake-up
   * per burst instead of one per record (interrupt coalescing; delays a record by at most this).
   * The ring must hold what arrives meanwhile.
   */
  readonly coalesceMs?: number;
  /**
   * Adaptive coalescing: the wait grows from `coalesceMs` up to this (default `coalesceMs`: a
   * fixed wait) while fewer than {@link coalesceRecords} records arrive per wait, so a slow
   * trickle still comes in bursts of about that many; it shrinks back as the rate rises.
   */
  readonly coalesceMaxMs?: number;
  /** Records per burst the adaptive wait aims at (default 100). */
  readonly coalesceRecords?: number;
}

/**
 * The next coalescing wait, ms: what `records` per burst take at the rate just seen (`got`
 * records in `waitedMs`), within [`minMs`, `maxMs`]. Also the flow agent's stream-read gather.
 */
export function adaptiveWaitMs(
  got: number,
  waitedMs: number,
  o: { minMs: number; maxMs: number; records: number },
): number {
  if (o.maxMs <= o.minMs) return o.minMs;
  const wanted = got > 0 ? o.records * Math.max(1, waitedMs) / got : o.maxMs;
  return Math.min(o.maxMs, Math.max(o.minMs, Math.round(wanted)));
}

/**
 * An eventfd added to epoll set `epfd` (libbpf's own: it only ever waits through our
 * epoll_wait, and consume() reads the rings whatever woke it); -1 if it cannot be made.
 */
function stopEventFd(epfd: number): number {
  const fd = c().eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return -1;
  // struct epoll_event: u32 events, then u64 data (unused here); 12 bytes packed on x86-64, 16
  // elsewhere.
  const ev = new Uint8Array(16);
  new DataView(ev.buffer).setUint32(0, EPOLLIN, true);
  if (c().epoll_ctl(epfd, EPOLL_CTL_ADD, fd, ev) < 0) {
    c().close(fd);
    return -1;
  }
  return fd;
}

/** Reads records from a BPF_MAP_TYPE_RINGBUF map and hands each to `onRecord`. */
export class RingBufferReader implements AsyncDisposable {
  #rb: Deno.PointerValue;
  readonly #callback: Deno.UnsafeCallback<
    { readonly parameters: readonly ["pointer", "pointer", "usize"]; readonly result: "i32" }
  >;
  readonly #epfd: number;
  readonly #pollMs: number;
  readonly #coalesceMs: number;
  readonly #coalesceMaxMs: number;
  readonly #coalesceRecords: number;
  readonly #events = new Uint8Array(16 * 4); // 4 epoll_events (12 or 16 bytes each)
  /** eventfd in the epoll set: written by close() to end a wait (-1: none, close waits). */
  #stopFd = -1;
  /** Ends the coalescing pause early (close). */
  #endPause: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #closing = false;
  #error: unknown;
  /** Records delivered so far. */
  delivered = 0;

  /** `onRecord` gets a copy of each record; an exception from it stops nothing (it is logged). */
  constructor(
    map: BpfMap,
    onRecord: (record: Uint8Array) => void,
    options: RingBufferOptions = {},
  ) {
    this.#pollMs = options.pollMs ?? 100;
    this.#coalesceMs = options.coalesceMs ?? 0;
    this.#coalesceMaxMs = Math.max(this.#coalesceMs, options.coalesceMaxMs ?? 0);
    this.#coalesceRecords = options.coalesceRecords ?? 100;
    this.#callback = new Deno.UnsafeCallback(
      { parameters: ["pointer", "pointer", "usize"], result: "i32" } as const,
      (_ctx, data, size) => {
        if (data === null) return 0;
        const bytes = new Uint8Array(
          Deno.UnsafePointerView.getArrayBuffer(data, Number(size)).slice(0),
        );
        this.delivered++;
        try {
          onRecord(bytes);
        } catch (e) {
          log.error("ringbuf: record handler threw", {
            component: "bpf",
            map: map.name,
            error: String(e),
          });
        }
        return 0;
      },
    );
    const rb = bpf().ring_buffer__new(map.fd, this.#callback.pointer, null, null);
    if (rb === null) {
      const e = errno();
      this.#callback.close();
      throw new BpfError(`Cannot open ring buffer on map "${map.name}"`, e);
    }
    this.#rb = rb;
    this.#epfd = bpf().ring_buffer__epoll_fd(rb);
    this.#stopFd = stopEventFd(this.#epfd);
  }

  /** Consumes everything available now, synchronously; returns the number of records. */
  consume(): number {
    if (this.#rb === null) return 0;
    const n = bpf().ring_buffer__consume(this.#rb);
    if (n < 0) throw new BpfError("Cannot consume ring buffer", -n);
    return n;
  }

  /** Starts the background wait/consume loop (idempotent). */
  start(): void {
    if (this.#loop) return;
    this.#loop = (async () => {
      let failures = 0;
      while (!this.#closing) {
        const r = await c().epoll_wait(this.#epfd, this.#events, 4, this.#pollMs);
        if (this.#closing) break;
        if (r < 0) {
          // errno belongs to the worker thread that waited; EINTR is the expected cause
          if (++failures > 100) {
            this.#error = new Error(
              `Cannot wait on ring buffer: epoll_wait failed ${failures} times in a row`,
            );
            break;
          }
          continue;
        }
        failures = 0;
        // Coalescing: while records keep coming, take them every coalesceMs straight from the
        // ring (consume reads the shared pages, no syscall), without the epoll thread hop;
        // back to waiting once a turn finds none.
        // The wait adapts to the rate (coalesceMaxMs): one timer per burst either way.
        const o = {
          minMs: this.#coalesceMs,
          maxMs: this.#coalesceMaxMs,
          records: this.#coalesceRecords,
        };
        let waitMs = this.#coalesceMs;
        for (let n = this.consume(); n > 0 && this.#coalesceMs > 0 && !this.#closing;) {
          await this.#pause(waitMs);
          if (this.#closing) break;
          n = this.consume();
          waitMs = adaptiveWaitMs(n, waitMs, o);
        }
      }
    })();
  }

  /** Waits `ms` (the coalescing pause), or less if close() comes first. */
  #pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#endPause = undefined;
        resolve();
      }, ms);
      this.#endPause = () => {
        clearTimeout(timer);
        this.#endPause = undefined;
        resolve();
      };
    });
  }

  /** The error that stopped the loop, if any. */
  get error(): unknown {
    return this.#error;
  }

  /** Stops the loop (at once; within pollMs without the eventfd), drains what is left, frees. */
  async close(): Promise<void> {
    if (this.#rb === null) return;
    this.#closing = true;
    this.#endPause?.();
    if (this.#stopFd >= 0) c().write(this.#stopFd, new BigUint64Array([1n]), 8n);
    await this.#loop;
    try {
      this.consume();
    } finally {
      bpf().ring_buffer__free(this.#rb);
      this.#rb = null;
      this.#callback.close();
      if (this.#stopFd >= 0) c().close(this.#stopFd);
      this.#stopFd = -1;
    }
  }

  /** Same as close(). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
