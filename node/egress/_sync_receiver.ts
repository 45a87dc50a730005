/**
 * The receiving side of the conntrack sync: accepts owners' connections, applies their frames to
 * this pod's conntrack table, acknowledges what it applied. Re-exported by `sync.ts`.
 *
 * @module
 */

import {
  type Conntrack,
  type CtEntry,
  type CtTuple,
  failureText,
  inverse,
  RECORD_LEN,
} from "../conntrack/mod.ts";
import { log as rootLog, type Logger } from "../../lib/log.ts";
import { loopTurn } from "../../lib/backoff.ts";
import type { Registry } from "../../lib/metrics.ts";
import { type SyncMetrics, syncMetrics } from "./_sync_metrics.ts";
import {
  encodeAck,
  ENTRIES_PER_TURN,
  type EntriesFrame,
  FRAME,
  type Frame,
  frameEntries,
  FrameReader,
  SyncWireError,
} from "./_sync_wire.ts";
import { TupleTable } from "./_tuple_table.ts";

/** Options of {@linkcode SyncReceiver}. */
export interface SyncReceiverOptions {
  /** Conntrack socket of this pod's namespace (injects and removes); a stand-in in tests. */
  ct:
    & Pick<Conntrack, "injectRecords" | "remove">
    & Partial<Pick<Conntrack, "injectRecordsPipelined">>;
  /**
   * NAT addresses (u32) whose entries are neither injected nor removed now: the ones this pod
   * handed over and still streams (`_sync_linger.ts`), whose flows it has from its own kernel;
   * changing them would make events it streams back to the new owner.
   */
  skip?: () => ReadonlySet<number> | undefined;
  /** Where to listen for owners' streams. */
  listen: { host: string; port: number };
  /**
   * Inject on a worker thread while the next batch is encoded (Conntrack.injectRecordsPipelined).
   * Faster only with a spare core: on the 2-CPU test machine, busy with the owner too, it cost
   * 5% more CPU per entry for no gain (measured), so off by default.
   */
  pipelined?: boolean;
  log?: Logger;
  registry?: Registry;
}

const SUMMARY_EVERY_MS = 10_000;
/**
 * Entries remembered (for the update-first hint and stale removal after a resync); past this
 * (4× nf_conntrack_max here, about 40 MB of table) new ones are injected but not remembered.
 */
const MAX_KNOWN = 1_048_576;

interface ConnState {
  /** Remote address:port. */
  peer: string;
  /** The sender's name from HELLO. */
  name: string;
  /** Frames applied (acknowledged) on this connection. */
  applied: number;
  /** Epoch of this connection's latest resync. */
  epoch: number;
  /** Closes the connection (a newer one from the same sender supersedes it). */
  close: () => void;
  /** A newer connection from the same sender took over: this one's frames are ignored. */
  superseded: boolean;
}

const EPOCHS = 2 ** 20;
const ADDR_IDS = 1024;

/** Injects what owners stream; one instance per NAT pod. */
export class SyncReceiver {
  readonly #o: SyncReceiverOptions;
  readonly #log: Logger;
  readonly #m: SyncMetrics;
  /**
   * Entries injected, by original tuple, with the resync epoch (numbered here, one per BEGIN on
   * any connection) of the connection that last carried them.
   */
  readonly #known = new TupleTable();
  /**
   * NAT addresses by small id: a known entry is one small integer, epoch × 1024 + address id (no
   * object or heap number per entry: 100,000s of them retained make every GC slow). Id 0 =
   * no NAT address or more than 1023 of them (never removed as stale).
   */
  readonly #addrIds = new Map<number, number>();
  readonly #addrs: number[] = [0];
  readonly #conns = new Set<Deno.TcpConn>();
  /** The live connection of each sender (by its HELLO name). */
  readonly #bySender = new Map<string, ConnState>();
  #listener: Deno.TcpListener | null = null;
  #accepting: Promise<void> = Promise.resolve();
  #serving = new Set<Promise<void>>();
  #injected = 0;
  #turn: Promise<void> = Promise.resolve();
  #epoch = 0;
  #summary = { upserts: 0, removes: 0, failed: 0, stale: 0, firstFailure: "" };
  #summaryTimer: ReturnType<typeof setInterval> | undefined;

  constructor(options: SyncReceiverOptions) {
    this.#o = options;
    this.#log = (options.log ?? rootLog).with({ component: "egress-sync" });
    this.#m = syncMetrics(options.registry);
  }

  /** Entries injected (created or updated) so far. */
  get injected(): number {
    return this.#injected;
  }

  /** The port listened on (useful with port 0). */
  get port(): number {
    return (this.#listener?.addr as Deno.NetAddr | undefined)?.port ?? 0;
  }

  /** Listens and starts accepting owners. */
  start(): Promise<void> {
    const { host, port } = this.#o.listen;
    try {
      this.#listener = Deno.listen({ hostname: host, port });
    } catch (e) {
      throw new Error(
        `Cannot listen for conntrack sync on "${host}:${port}": ${(e as Error).message}`,
        {
          cause: e,
        },
      );
    }
    this.#log.info("sync receiver listening", { address: `${host}:${this.port}` });
    this.#accepting = this.#accept(this.#listener);
    this.#summaryTimer = setInterval(() => this.#logSummary(), SUMMARY_EVERY_MS);
    return Promise.resolve();
  }

  /** Stops listening and closes every connection. */
  async stop(): Promise<void> {
    clearInterval(this.#summaryTimer);
    try {
      this.#listener?.close();
    } catch { /* closed */ }
    this.#listener = null;
    for (const c of this.#conns) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    await this.#accepting;
    await Promise.all([...this.#serving]);
    this.#logSummary();
  }

  async #accept(listener: Deno.TcpListener): Promise<void> {
    try {
      for await (const conn of listener) {
        const p = this.#serve(conn).finally(() => this.#serving.delete(p));
        this.#serving.add(p);
      }
    } catch (e) {
      if (this.#listener) this.#log.error("sync receiver stopped accepting", { error: e });
    }
  }

  async #serve(conn: Deno.TcpConn): Promise<void> {
    const remote = conn.remoteAddr as Deno.NetAddr;
    const state: ConnState = {
      peer: `${remote.hostname}:${remote.port}`,
      name: "",
      applied: 0,
      epoch: 0,
      superseded: false,
      close: () => {
        try {
          conn.close();
        } catch { /* closed */ }
      },
    };
    this.#conns.add(conn);
    conn.setNoDelay(true);
    const reader = new FrameReader();
    const buf = new Uint8Array(256 * 1024);
    try {
      for (;;) {
        const n = await conn.read(buf);
        if (n === null) break;
        reader.push(buf.subarray(0, n));
        const frames = reader.frames();
        for (const f of frames) await this.#serial(() => this.#apply(f, state));
        state.applied = (state.applied + frames.length) >>> 0;
        if (frames.length > 0) await writeAll(conn, encodeAck(state.applied));
      }
      this.#log.info("sync sender disconnected", {
        peer: state.name || state.peer,
        address: state.peer,
      });
    } catch (e) {
      if (this.#listener) {
        const what = e instanceof SyncWireError ? "malformed frame" : "error";
        this.#log.warn(`sync connection closed on ${what}`, {
          peer: state.name || state.peer,
          address: state.peer,
          error: e,
        });
      }
    } finally {
      if (this.#bySender.get(state.name) === state) this.#bySender.delete(state.name);
      this.#conns.delete(conn);
      try {
        conn.close();
      } catch { /* closed */ }
    }
  }

  /** Runs `fn` after every earlier one: owners' connections share one conntrack socket. */
  #serial(fn: () => Promise<void>): Promise<void> {
    const run = this.#turn.then(fn);
    this.#turn = run.catch(() => {});
    return run;
  }

  async #apply(f: Frame, state: ConnState): Promise<void> {
    // An older connection of a sender that reconnected (its TCP outlived a partition, and what it
    // had queued arrives after the heal): its frames are stale, and its END would drop entries the
    // newer connection's resync just refreshed.
    if (state.superseded) return;
    switch (f.type) {
      case FRAME.HELLO: {
        state.name = f.name;
        const older = this.#bySender.get(f.name);
        this.#bySender.set(f.name, state);
        if (older && older !== state) {
          older.superseded = true;
          older.close();
          this.#log.info("sync sender reconnected: older connection closed", {
            peer: f.name,
            address: state.peer,
            older: older.peer,
          });
        }
        this.#log.info("sync sender connected", { peer: f.name, address: state.peer });
        return;
      }
      case FRAME.UPSERT:
        return await this.#upsert(f, state.epoch);
      case FRAME.REMOVE:
        return this.#remove(frameEntries(f));
      case FRAME.BEGIN:
        state.epoch = this.#epoch = (this.#epoch + 1) % EPOCHS || 1;
        return;
      case FRAME.END:
        return this.#dropStale(new Set(f.addrs), state);
      case FRAME.ACK:
        throw new Error("an ACK frame from a sender");
    }
  }

  async #upsert(f: EntriesFrame, epoch: number): Promise<void> {
    const { view, offset, count } = f;
    // Remember each entry now (epoch and NAT address id) and whether it was known before.
    const seen: boolean[] = new Array(count);
    const known = this.#known, room = known.size < MAX_KNOWN;
    const skip = this.#o.skip?.(), skipped: boolean[] = [];
    for (let i = 0, r = offset; i < count; i++, r += RECORD_LEN) {
      // record: src u32 @0, dst u32 @4, sport:dport u32 @8, proto u8 @12, flags @14, NAT addr @24
      const nat = view.getUint8(r + 14) & 1 ? view.getUint32(r + 24) : 0;
      if (skip?.size && nat !== 0 && skip.has(nat)) {
        skipped[i] = true;
        continue;
      }
      const id = nat !== 0 ? this.#addrId(nat) : 0;
      const old = known.put(
        view.getUint32(r),
        view.getUint32(r + 4),
        view.getUint32(r + 8),
        view.getUint8(r + 12),
        epoch * ADDR_IDS + id,
        room,
      );
      seen[i] = old >= 0;
    }
    // In slices of ENTRIES_PER_TURN with a turn of the event loop before each: a resync of
    // 10,000s of entries must not hold up this pod's lease renewals (issue 29).
    const ct = this.#o.ct;
    for (let from = 0, n = 0; from < count; from += n) {
      if (skipped[from]) {
        n = 1;
        continue;
      }
      for (n = 1; n < ENTRIES_PER_TURN && from + n < count && !skipped[from + n];) n++;
      await loopTurn();
      const likelyExisting = (i: number) => seen[from + i] === true;
      const at = offset + from * RECORD_LEN;
      const { injected, failed } = this.#o.pipelined && ct.injectRecordsPipelined
        ? await ct.injectRecordsPipelined(view, at, n, { likelyExisting })
        : ct.injectRecords(view, at, n, { likelyExisting });
      this.#injected += injected;
      this.#summary.upserts += injected;
      if (failed.length > 0) {
        this.#m.failed.inc(undefined, failed.length);
        this.#summary.failed += failed.length;
        this.#summary.firstFailure ||= failureText(failed[0]!);
      }
    }
    this.#m.entries.inc({ direction: "received", op: "upsert" }, count);
  }

  #forget(o: CtTuple): void {
    this.#known.delete(o.src, o.dst, ((o.sport << 16) | o.dport) >>> 0, o.proto);
  }

  #addrId(addr: number): number {
    let id = this.#addrIds.get(addr);
    if (id === undefined) {
      if (this.#addrs.length >= ADDR_IDS) return 0;
      id = this.#addrs.length;
      this.#addrs.push(addr);
      this.#addrIds.set(addr, id);
    }
    return id;
  }

  #remove(all: CtEntry[]): void {
    this.#m.entries.inc({ direction: "received", op: "remove" }, all.length);
    const skip = this.#o.skip?.();
    const entries = skip?.size ? all.filter((e) => !e.natSrc || !skip.has(e.natSrc.addr)) : all;
    for (const { orig: o } of entries) this.#forget(o);
    this.#summary.removes += this.#removeFromKernel(entries);
  }

  /** After a resync: entries of the resynced addresses it did not carry are gone at the owner. */
  #dropStale(
    addrs: Set<number>,
    state: ConnState,
  ): void {
    const stale: CtEntry[] = [];
    const skip = this.#o.skip?.();
    this.#known.forEach((src, dst, ports, proto, v) => {
      const epoch = Math.floor(v / ADDR_IDS), id = v % ADDR_IDS;
      if (epoch === state.epoch || id === 0 || !addrs.has(this.#addrs[id]!)) return;
      // Refreshed by a later resync (of another connection): not stale.
      const ahead = (epoch - state.epoch + EPOCHS) % EPOCHS;
      if (epoch !== 0 && ahead < EPOCHS / 2) return;
      if (skip?.has(this.#addrs[id]!)) return;
      const orig = { src, dst, sport: ports >>> 16, dport: ports & 0xffff, proto: proto as 6 | 17 };
      stale.push({ orig, reply: inverse(orig), status: 0, timeoutS: 0 });
    });
    for (const { orig } of stale) this.#forget(orig);
    if (stale.length === 0) return;
    const removed = this.#removeFromKernel(stale);
    this.#summary.stale += removed;
    this.#log.info("sync removed stale entries after resync", {
      peer: state.name || state.peer,
      entries: stale.length,
      removed,
    });
  }

  #removeFromKernel(entries: CtEntry[]): number {
    try {
      return this.#o.ct.remove(entries);
    } catch (e) {
      this.#m.failed.inc(undefined, 1);
      this.#summary.failed++;
      this.#summary.firstFailure ||= (e as Error).message;
      return 0;
    }
  }

  #logSummary(): void {
    const s = this.#summary;
    if (s.upserts + s.removes + s.failed + s.stale === 0) return;
    this.#log.info("sync entries applied", {
      upserts: s.upserts,
      removes: s.removes,
      stale: s.stale,
      failed: s.failed,
      ...(s.firstFailure ? { first_failure: s.firstFailure } : {}),
      interval_ms: SUMMARY_EVERY_MS,
    });
    this.#summary = { upserts: 0, removes: 0, failed: 0, stale: 0, firstFailure: "" };
  }
}

async function writeAll(conn: Deno.TcpConn, bytes: Uint8Array): Promise<void> {
  for (let o = 0; o < bytes.length;) o += await conn.write(bytes.subarray(o));
}
