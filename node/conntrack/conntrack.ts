/**
 * The kernel conntrack table of one network namespace through ctnetlink: dump (filtered in the
 * kernel by NAT address), batched create-or-update injection in the form NAT failover needs, and
 * delete (the batching is in `_batches.ts`).
 *
 * @module
 */

import {
  checkRecords,
  CtDecodeError,
  type CtEntry,
  encodeDumpRequest,
  IPCTNL_MSG_CT_NEW,
  MAX_NEW_LEN,
  NLMSG_DONE,
  NLMSG_ERROR,
  RECORD_LEN,
  tupleText,
  writeRecord,
} from "./_ctnetlink.ts";
import { decodeEntry, decodeError, splitMessages } from "./_ctnetlink_decode.ts";
import { E, errnoText, MSG_DONTWAIT, NetlinkError, NetlinkSocket } from "./_netlink.ts";
import { Batches, type CtFailure } from "./_batches.ts";

export type { CtFailure } from "./_batches.ts";

/** Send buffer: room for a batch of 2,048 messages of at most MAX_NEW_LEN bytes, twice. */
const SNDBUF = 2 * 2048 * MAX_NEW_LEN;
const RECV_BYTES = 128 * 1024;
const DUMP_TIMEOUT_MS = 5_000;
/** Bound of one dump: entries (far above nf_conntrack_max here) and wall time. */
const DUMP_MAX_ENTRIES = 16_000_000;
const DUMP_MAX_MS = 120_000;
/** Up to this many NAT addresses, dumps are filtered in the kernel, one dump per address. */
const KERNEL_FILTER_MAX = 16;

/** `tcp 10.8.0.11:40000 > 198.18.0.1:80: Device or resource busy (errno 16)`. */
export function failureText(f: CtFailure): string {
  return `${tupleText(f.entry.orig)}: ${errnoText(f.errno)} (errno ${f.errno})`;
}

/** Filter of {@linkcode Conntrack.dump}. */
export interface DumpFilter {
  /** Only source-NAT'd entries whose translated address is in this set. */
  natSrcAddrs?: ReadonlySet<number>;
}

/** One ctnetlink socket opened in a network namespace; not for concurrent use. */
export class Conntrack {
  readonly #sock: NetlinkSocket;
  readonly #out = new Uint8Array(1024); // dump requests
  readonly #outView = new DataView(this.#out.buffer);
  readonly #in = new Uint8Array(RECV_BYTES);
  readonly #inView = new DataView(this.#in.buffer);
  #seq = 1;
  #dumping = false;
  #busy: string | null = null;
  readonly #batches: Batches;

  private constructor(sock: NetlinkSocket) {
    this.#sock = sock;
    this.#batches = new Batches(sock, (n) => this.#nextSeq(n));
  }

  /**
   * Opens a ctnetlink socket in `options.netns` (a `/run/netns` name), or in the caller's
   * namespace. The socket keeps working on that namespace's table wherever it is used from.
   *
   * @example
   * ```ts ignore
   * const ct = Conntrack.open({ netns: "hf-1234-nat1" });
   * const natted = ct.dump({ natSrcAddrs: new Set([parseIpv4("198.18.0.100")]) });
   * ct.close();
   * ```
   */
  static open(options: { netns?: string } = {}): Conntrack {
    return new Conntrack(NetlinkSocket.open({
      netns: options.netns,
      rcvbuf: 16 * 1024 * 1024,
      sndbuf: SNDBUF,
      recvTimeoutMs: DUMP_TIMEOUT_MS,
    }));
  }

  /** Every IPv4 TCP/UDP entry (optionally only SNAT'd ones to `filter.natSrcAddrs`). */
  dump(filter: DumpFilter = {}): CtEntry[] {
    let out: CtEntry[] = [];
    for (const chunk of this.dumpChunks(filter, Infinity)) {
      out = out.length ? out.concat(chunk) : chunk;
    }
    return out;
  }

  /**
   * {@linkcode dump} in chunks of about `chunkSize` entries as the kernel produces them, so a
   * caller can send each chunk on before the dump ends. The socket serves nothing else until the
   * iteration ends (an abandoned iteration reads the rest of the dump away).
   */
  *dumpChunks(filter: DumpFilter = {}, chunkSize = 4096): Generator<CtEntry[], void, undefined> {
    if (this.#dumping) {
      throw new Error(`Cannot dump conntrack in ${this.#sock.where}: a dump is in progress`);
    }
    this.#dumping = true;
    try {
      const addrs = filter.natSrcAddrs;
      // A few NAT addresses: one kernel-filtered dump each (the table also holds the entries a
      // standby keeps for others); many: one full dump filtered here.
      const targets = addrs && addrs.size <= KERNEL_FILTER_MAX ? [...addrs] : [undefined];
      let out: CtEntry[] = [];
      for (const target of targets) {
        for (const entries of this.#dumpOnce(target)) {
          for (const entry of entries) {
            if (addrs && (!entry.natSrc || !addrs.has(entry.natSrc.addr))) continue;
            out.push(entry);
          }
          if (out.length >= chunkSize) {
            yield out;
            out = [];
          }
        }
      }
      if (out.length > 0) yield out;
    } finally {
      this.#dumping = false;
    }
  }

  /** One dump request (filtered in the kernel by reply destination when given), per recv. */
  *#dumpOnce(replyDst: number | undefined): Generator<CtEntry[], void, undefined> {
    this.#drain();
    const seq = this.#nextSeq(1);
    this.#sock.send(this.#out, encodeDumpRequest(this.#outView, 0, seq, replyDst));
    const deadline = Date.now() + DUMP_MAX_MS;
    let done = false, seen = 0;
    try {
      while (!done) {
        if (seen > DUMP_MAX_ENTRIES || Date.now() > deadline) {
          throw new Error(
            `Cannot dump conntrack in ${this.#sock.where}: over ${DUMP_MAX_ENTRIES} entries or ${DUMP_MAX_MS} ms`,
          );
        }
        const n = this.#recv(0, "dump");
        const batch: CtEntry[] = [];
        for (const m of splitMessages(this.#inView, n)) {
          if (m.seq !== seq) continue;
          if (m.type === NLMSG_DONE) done = true;
          if (m.type === NLMSG_ERROR) {
            const { errno } = decodeError(this.#inView, m);
            if (errno !== 0) {
              throw new NetlinkError(`Cannot dump conntrack in ${this.#sock.where}`, errno);
            }
          }
          if (m.type !== IPCTNL_MSG_CT_NEW) continue;
          seen++;
          const entry = decodeEntry(this.#inView, m);
          if (entry) batch.push(entry);
        }
        yield batch;
      }
    } finally {
      if (!done) this.#finishDump(seq);
    }
  }

  /** Reads an abandoned dump away (bounded) so the next request sees only its own answers. */
  #finishDump(seq: number): void {
    const deadline = Date.now() + DUMP_MAX_MS;
    try {
      while (Date.now() < deadline) {
        const n = this.#recv(0, "dump");
        if (
          splitMessages(this.#inView, n).some((m) => m.seq === seq && m.type !== IPCTNL_MSG_CT_NEW)
        ) return;
      }
    } catch { /* the socket has nothing more: the dump is over either way */ }
  }

  /**
   * Creates each entry, or updates it when it exists (timeout, TCP state, mark; the kernel keeps
   * an existing entry's NAT binding). Returns how many succeeded and the refused ones.
   * `options.likelyExisting` (e.g. "injected before") sends those in the update form first,
   * saving the refused create of a periodic refresh; a vanished one is then created.
   */
  inject(
    entries: readonly CtEntry[],
    options: { likelyExisting?: (entry: CtEntry, index: number) => boolean } = {},
  ): { injected: number; failed: CtFailure[] } {
    const view = new DataView(new ArrayBuffer(entries.length * RECORD_LEN));
    entries.forEach((e, i) => writeRecord(view, i * RECORD_LEN, e));
    const likely = options.likelyExisting;
    const { injected, failed } = this.injectRecords(view, 0, entries.length, {
      likelyExisting: likely && ((i) => likely(entries[i]!, i)),
    });
    for (const f of failed) f.entry = entries[f.index]!; // the caller's own object back
    return { injected, failed };
  }

  /**
   * {@linkcode inject} of `count` compact records (`RECORD_LEN` bytes each, see `writeRecord`)
   * at `view[offset]`: the sync stream carries entries in this form, so a standby injects without
   * building an object per entry. Throws CtDecodeError when a record is not TCP/UDP.
   */
  injectRecords(
    view: DataView,
    offset: number,
    count: number,
    options: { likelyExisting?: (index: number) => boolean } = {},
  ): { injected: number; failed: CtFailure[] } {
    this.#checkIdle("inject");
    checkRecords(view, offset, count);
    return this.#batches.inject(view, offset, count, options.likelyExisting);
  }

  /**
   * {@linkcode injectRecords} with the kernel's work on a worker thread while the next batch is
   * prepared on this one (the socket serves nothing else until it resolves; `view` must stay
   * unchanged meanwhile).
   */
  async injectRecordsPipelined(
    view: DataView,
    offset: number,
    count: number,
    options: { likelyExisting?: (index: number) => boolean } = {},
  ): Promise<{ injected: number; failed: CtFailure[] }> {
    this.#checkIdle("inject");
    checkRecords(view, offset, count);
    this.#busy = "an injection";
    try {
      return await this.#batches.injectPipelined(view, offset, count, options.likelyExisting);
    } finally {
      this.#busy = null;
    }
  }

  /**
   * Deletes the entries with these original tuples; returns how many existed. Throws a
   * NetlinkError naming the first entry the kernel refused for another reason than ENOENT.
   */
  remove(entries: readonly CtEntry[]): number {
    this.#checkIdle("remove");
    return this.#batches.remove(entries);
  }

  /** Closes the socket; safe to call twice. */
  close(): void {
    this.#sock.close();
  }

  /** recv into #in: the length, 0 for EAGAIN when non-blocking; throws otherwise. */
  #recv(flags: number, what: string): number {
    for (let attempt = 0; attempt < 100; attempt++) {
      const n = this.#sock.recv(this.#in, flags);
      if (n > this.#in.length) {
        throw new CtDecodeError(`Cannot read conntrack ${what}: ${n}-byte message truncated`);
      }
      if (n >= 0) return n;
      if (n === -E.EINTR) continue;
      if (n === -E.EAGAIN) {
        if (flags & MSG_DONTWAIT) return 0;
        throw new NetlinkError(
          `Cannot read conntrack ${what} in ${this.#sock.where}: no answer within ${DUMP_TIMEOUT_MS} ms`,
          E.EAGAIN,
        );
      }
      throw new NetlinkError(`Cannot read conntrack ${what} in ${this.#sock.where}`, -n);
    }
    throw new NetlinkError(`Cannot read conntrack ${what} in ${this.#sock.where}`, E.EINTR);
  }

  /** Discards anything left queued (e.g. by an interrupted dump). */
  #drain(): void {
    for (let i = 0; i < 100_000; i++) {
      const n = this.#sock.recv(this.#in, MSG_DONTWAIT);
      if (n < 0 && n !== -E.EINTR && n !== -E.ENOBUFS) return;
    }
  }

  #checkIdle(what: string): void {
    if (this.#busy) {
      throw new Error(
        `Cannot ${what} conntrack entries in ${this.#sock.where}: ${this.#busy} is in progress`,
      );
    }
    if (this.#dumping) {
      throw new Error(
        `Cannot ${what} conntrack entries in ${this.#sock.where}: a dump is in progress`,
      );
    }
  }

  #nextSeq(count: number): number {
    const base = this.#seq;
    this.#seq = (this.#seq + count) >>> 0;
    if (this.#seq < base) this.#seq = 1;
    return base;
  }
}
