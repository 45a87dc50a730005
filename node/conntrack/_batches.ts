/**
 * Batched ctnetlink writes on one socket: create-or-update injection of compact records and
 * deletion, many messages per `sendto`, without NLM_F_ACK. The kernel processes a netlink request
 * inside `sendto` and answers only failures (NLMSG_ERROR carrying the failed message's sequence
 * number), so after each send the queued errors are read without blocking and matched to
 * entries by sequence number.
 *
 * Create-or-update: the kernel (ctnetlink_new_conntrack) creates an absent entry when
 * NLM_F_CREATE is set and, without NLM_F_EXCL, updates an existing one, but refuses to change the
 * NAT binding of an existing entry (EOPNOTSUPP). Those are sent again in the update form
 * (timeout, TCP state, mark); an entry sent in the update form first that does not exist
 * (ENOENT) is sent again in the create form.
 *
 * Private to node/conntrack (used by conntrack.ts).
 *
 * @module
 */

import {
  type CtEntry,
  encodeDelete,
  encodeNewRecord,
  MAX_NEW_LEN,
  type NewForm,
  NLMSG_ERROR,
  readRecord,
  RECORD_LEN,
  tupleText,
} from "./_ctnetlink.ts";
import { decodeError, splitMessages } from "./_ctnetlink_decode.ts";
import { E, MSG_DONTWAIT, NetlinkError, type NetlinkSocket } from "./_netlink.ts";

/** Messages per synchronous sendto (each at most MAX_NEW_LEN bytes). */
const BATCH = 2048;
/** Messages per pipelined sendto: small, so preparing the next overlaps most of the kernel's work. */
const PIPE_BATCH = 512;

/** An entry the kernel refused, with its errno. */
export interface CtFailure {
  entry: CtEntry;
  errno: number;
  /** Its position in the entries (or records) passed. */
  index: number;
}

/** Result of an injection. */
export interface InjectResult {
  injected: number;
  failed: CtFailure[];
}

/** Which records to send in the update form first. */
export type LikelyExisting = ((index: number) => boolean) | undefined;

interface Sent {
  base: number;
  items: number[];
  forms: NewForm[];
}

/** The batched writer of one socket. */
export class Batches {
  readonly #sock: NetlinkSocket;
  readonly #nextSeq: (count: number) => number;
  readonly #out = new DataView(new ArrayBuffer(BATCH * MAX_NEW_LEN));
  readonly #pipe = [0, 1].map(() => new DataView(new ArrayBuffer(PIPE_BATCH * MAX_NEW_LEN)));
  readonly #in = new Uint8Array(64 * 1024);
  readonly #inView = new DataView(this.#in.buffer);

  constructor(sock: NetlinkSocket, nextSeq: (count: number) => number) {
    this.#sock = sock;
    this.#nextSeq = nextSeq;
  }

  /** Injects `count` records at `view[offset]` (checked by the caller). */
  inject(view: DataView, offset: number, count: number, likely: LikelyExisting): InjectResult {
    const result: InjectResult = { injected: 0, failed: [] };
    for (let start = 0; start < count; start += BATCH) {
      const { items, forms } = plan(start, Math.min(BATCH, count - start), likely);
      const sent = this.#encode(this.#out, view, offset, items, forms);
      this.#sock.send(bytes(this.#out), sent.end);
      this.#settle(view, offset, sent, result);
    }
    return result;
  }

  /**
   * {@linkcode inject} with each sendto on a worker thread while the next batch is prepared here:
   * the kernel's work (most of the cost) overlaps this thread's.
   */
  async injectPipelined(
    view: DataView,
    offset: number,
    count: number,
    likely: LikelyExisting,
  ): Promise<InjectResult> {
    const result: InjectResult = { injected: 0, failed: [] };
    let inflight: { sent: Sent; done: Promise<void> } | null = null;
    for (let start = 0, k = 0; start < count; start += PIPE_BATCH, k++) {
      const { items, forms } = plan(start, Math.min(PIPE_BATCH, count - start), likely);
      const buf = this.#pipe[k % 2]!;
      const sent = this.#encode(buf, view, offset, items, forms);
      if (inflight) {
        await inflight.done;
        this.#settle(view, offset, inflight.sent, result);
      }
      inflight = { sent, done: this.#sock.sendAsync(bytes(buf), sent.end) };
    }
    if (inflight) {
      await inflight.done;
      this.#settle(view, offset, inflight.sent, result);
    }
    return result;
  }

  /** Deletes by original tuple; returns how many existed; throws on another error than ENOENT. */
  remove(entries: readonly CtEntry[]): number {
    let removed = 0;
    for (let start = 0; start < entries.length; start += BATCH) {
      const chunk = entries.slice(start, start + BATCH);
      const base = this.#nextSeq(chunk.length);
      let off = 0;
      for (let i = 0; i < chunk.length; i++) {
        off = encodeDelete(this.#out, off, chunk[i]!.orig, base + i);
      }
      this.#sock.send(bytes(this.#out), off);
      const errors = this.#collectErrors(base, chunk.length);
      for (const [i, code] of errors) {
        if (code === E.ENOENT) continue;
        throw new NetlinkError(
          `Cannot delete conntrack entry ${tupleText(chunk[i]!.orig)} in ${this.#sock.where}`,
          code,
        );
      }
      removed += chunk.length - errors.size;
    }
    return removed;
  }

  #encode(
    out: DataView,
    view: DataView,
    offset: number,
    items: number[],
    forms: NewForm[],
  ): Sent & { end: number } {
    const base = this.#nextSeq(items.length);
    let off = 0;
    for (let k = 0; k < items.length; k++) {
      off = encodeNewRecord(out, off, view, offset + items[k]! * RECORD_LEN, base + k, forms[k]!);
    }
    return { base, items, forms, end: off };
  }

  /** Reads a sent batch's errors, resends what the other form may take (synchronously), counts. */
  #settle(view: DataView, offset: number, sent: Sent, result: InjectResult): void {
    const errors = this.#collectErrors(sent.base, sent.items.length);
    const again: number[] = [];
    const againForms: NewForm[] = [];
    for (const [k, code] of errors) {
      const form = sent.forms[k]!, index = sent.items[k]!;
      if (form === "create" && (code === E.EOPNOTSUPP || code === E.EEXIST)) {
        again.push(index);
        againForms.push("update");
      } else if (form === "update" && code === E.ENOENT) {
        again.push(index);
        againForms.push("create");
      } else {
        result.failed.push(failure(view, offset, index, code));
      }
    }
    let lost = 0;
    if (again.length > 0) {
      const retry = this.#encode(this.#out, view, offset, again, againForms);
      this.#sock.send(bytes(this.#out), retry.end);
      for (const [k, code] of this.#collectErrors(retry.base, again.length)) {
        result.failed.push(failure(view, offset, again[k]!, code));
        lost++;
      }
    }
    result.injected += sent.items.length - (errors.size - again.length) - lost;
  }

  /** Reads the queued NLMSG_ERRORs of requests base..base+count-1 without blocking. */
  #collectErrors(base: number, count: number): Map<number, number> {
    const errors = new Map<number, number>();
    for (let reads = 0; reads <= count + 16; reads++) {
      const n = this.#sock.recv(this.#in, MSG_DONTWAIT);
      if (n === -E.EINTR) continue;
      if (n === -E.EAGAIN) break;
      if (n < 0) {
        throw new NetlinkError(`Cannot read conntrack acknowledgements in ${this.#sock.where}`, -n);
      }
      if (n > this.#in.length) continue; // not an error message of ours (they are tiny)
      for (const m of splitMessages(this.#inView, n)) {
        if (m.type !== NLMSG_ERROR) continue;
        const { errno, seq } = decodeError(this.#inView, m);
        const i = (seq - base) >>> 0;
        if (errno !== 0 && i < count) errors.set(i, errno);
      }
    }
    return errors;
  }
}

function bytes(view: DataView): Uint8Array<ArrayBuffer> {
  return new Uint8Array(view.buffer as ArrayBuffer);
}

function plan(
  start: number,
  n: number,
  likely: LikelyExisting,
): { items: number[]; forms: NewForm[] } {
  const items: number[] = new Array(n);
  const forms: NewForm[] = new Array(n);
  for (let k = 0; k < n; k++) {
    items[k] = start + k;
    forms[k] = likely?.(start + k) ? "update" : "create";
  }
  return { items, forms };
}

function failure(view: DataView, offset: number, index: number, errno: number): CtFailure {
  return { entry: readRecord(view, offset + index * RECORD_LEN), errno, index };
}
