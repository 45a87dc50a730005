/**
 * The conntrack sync wire format between NAT pods (TCP, one connection per owner → standby):
 * length-prefixed binary frames.
 *
 *     frame   = u32 len (bytes after this field) | u8 type | payload
 *     HELLO   = u32 magic "HFCS" | u16 version | u16 name length | name (UTF-8)
 *     UPSERT  = u32 count | count × 36-byte record      (inject: create or update)
 *     REMOVE  = u32 count | count × 36-byte record      (delete by original tuple)
 *     BEGIN   = u32 generation                          (a full resync starts)
 *     END     = u32 generation | u32 n | n × u32 addr   (resync done for these NAT addresses)
 *     ACK     = u32 frames applied on this connection   (receiver → sender)
 *     record  = src u32 | dst u32 | sport u16 | dport u16 | proto u8 | tcpState u8 (255 none) |
 *               flags u8 (1 natSrc, 2 mark) | 0 u8 | status u32 | timeoutS u32 |
 *               natAddr u32 | natPort u16 | 0 u16 | mark u32
 *
 * All numbers big-endian. Decoding checks every length and value and throws
 * {@linkcode SyncWireError}; the receiver then closes that connection.
 *
 * @module
 */

import {
  checkRecords,
  CtDecodeError,
  type CtEntry,
  readRecord,
  RECORD_LEN,
  writeRecord,
} from "../conntrack/mod.ts";

/** A frame that breaks the format. */
export class SyncWireError extends Error {
  override name = "SyncWireError";
}

/** Frame types. */
export const FRAME = { HELLO: 1, UPSERT: 2, REMOVE: 3, BEGIN: 4, END: 5, ACK: 6 } as const;
const MAGIC = 0x48464353; // "HFCS"
/**
 * Version of the sync wire, in HELLO (docs/contracts.md "Format versions"). A receiver refuses a
 * HELLO of another version (`SyncWireError`: the connection is closed and logged), so a sender
 * must speak the version its peers read.
 */
export const SYNC_WIRE_VERSION = 1;
/** Frame header: length, type. */
export const HEADER_LEN = 5;
/** Largest frame accepted (bytes after the length field). */
export const MAX_FRAME = 16 * 1024 * 1024;
/** Records per UPSERT/REMOVE frame written by {@linkcode encodeEntries}. */
export const RECORDS_PER_FRAME = 4096;
/**
 * Entries a sender dumps or a receiver injects between two turns of the event loop (a few ms of
 * work here). A full resync of 10,000s of entries in one go blocked the loop for 110–241 ms, the
 * lease renew came late and the pod forfeited its own address (issue 29); in slices of this size
 * every due timer (renew, fence, heartbeat) runs between two of them.
 */
export const ENTRIES_PER_TURN = 1024;

/**
 * An UPSERT or REMOVE frame: `count` records (node/conntrack's compact entry form, checked) at
 * `view[offset]`, in the reader's buffer until its next `push`.
 */
export interface EntriesFrame {
  type: typeof FRAME.UPSERT | typeof FRAME.REMOVE;
  view: DataView;
  offset: number;
  count: number;
}

/** The entries of an UPSERT/REMOVE frame as objects. */
export function frameEntries(f: EntriesFrame): CtEntry[] {
  const out: CtEntry[] = new Array(f.count);
  for (let i = 0; i < f.count; i++) out[i] = readRecord(f.view, f.offset + i * RECORD_LEN);
  return out;
}

/** One decoded frame. */
export type Frame =
  | { type: typeof FRAME.HELLO; name: string }
  | EntriesFrame
  | { type: typeof FRAME.BEGIN; generation: number }
  | { type: typeof FRAME.END; generation: number; addrs: number[] }
  | { type: typeof FRAME.ACK; applied: number };

function frame(type: number, payloadLen: number): { bytes: Uint8Array; view: DataView } {
  const bytes = new Uint8Array(HEADER_LEN + payloadLen);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, 1 + payloadLen);
  view.setUint8(4, type);
  return { bytes, view };
}

/** A HELLO frame naming the sender. */
export function encodeHello(name: string): Uint8Array {
  const text = new TextEncoder().encode(name).subarray(0, 1024);
  const { bytes, view } = frame(FRAME.HELLO, 8 + text.length);
  view.setUint32(HEADER_LEN, MAGIC);
  view.setUint16(HEADER_LEN + 4, SYNC_WIRE_VERSION);
  view.setUint16(HEADER_LEN + 6, text.length);
  bytes.set(text, HEADER_LEN + 8);
  return bytes;
}

/** An ACK: `applied` frames of this connection are applied (mod 2^32). */
export function encodeAck(applied: number): Uint8Array {
  const { bytes, view } = frame(FRAME.ACK, 4);
  view.setUint32(HEADER_LEN, applied >>> 0);
  return bytes;
}

/** A BEGIN of resync `generation`. */
export function encodeBegin(generation: number): Uint8Array {
  const { bytes, view } = frame(FRAME.BEGIN, 4);
  view.setUint32(HEADER_LEN, generation >>> 0);
  return bytes;
}

/** An END of resync `generation` covering the NAT addresses `addrs`. */
export function encodeEnd(generation: number, addrs: readonly number[]): Uint8Array {
  const { bytes, view } = frame(FRAME.END, 8 + 4 * addrs.length);
  view.setUint32(HEADER_LEN, generation >>> 0);
  view.setUint32(HEADER_LEN + 4, addrs.length);
  addrs.forEach((a, i) => view.setUint32(HEADER_LEN + 8 + 4 * i, a >>> 0));
  return bytes;
}

/** One UPSERT or REMOVE frame of `entries` (at most {@linkcode RECORDS_PER_FRAME}). */
export function encodeEntries(
  type: typeof FRAME.UPSERT | typeof FRAME.REMOVE,
  entries: readonly CtEntry[],
): Uint8Array {
  const { bytes, view } = frame(type, 4 + RECORD_LEN * entries.length);
  view.setUint32(HEADER_LEN, entries.length);
  for (let i = 0; i < entries.length; i++) {
    writeRecord(view, HEADER_LEN + 4 + i * RECORD_LEN, entries[i]!);
  }
  return bytes;
}

function checkEntries(view: DataView, off: number, end: number): number {
  if (end - off < 4) throw new SyncWireError(`entry frame of ${end - off} bytes has no count`);
  const count = view.getUint32(off);
  if (end - off - 4 !== count * RECORD_LEN) {
    throw new SyncWireError(
      `entry frame says ${count} records but carries ${end - off - 4} bytes (${RECORD_LEN} each)`,
    );
  }
  try {
    checkRecords(view, off + 4, count);
  } catch (e) {
    if (e instanceof CtDecodeError) throw new SyncWireError(e.message, { cause: e });
    throw e;
  }
  return count;
}

/** Decodes one complete frame `bytes[off, off + 4 + len)`. */
export function decodeFrame(view: DataView, off: number): Frame {
  const len = view.getUint32(off);
  if (len < 1) throw new SyncWireError(`frame length ${len} is shorter than its header`);
  if (off + 4 + len > view.byteLength) {
    throw new SyncWireError(
      `frame of ${len} bytes runs past the ${view.byteLength - off} received`,
    );
  }
  const type = view.getUint8(off + 4);
  const p = off + HEADER_LEN, end = off + 4 + len;
  switch (type) {
    case FRAME.HELLO: {
      if (end - p < 8 || view.getUint32(p) !== MAGIC) throw new SyncWireError("bad HELLO magic");
      if (view.getUint16(p + 4) !== SYNC_WIRE_VERSION) {
        throw new SyncWireError(
          `unsupported version ${view.getUint16(p + 4)}, expected ${SYNC_WIRE_VERSION}`,
        );
      }
      const n = view.getUint16(p + 6);
      if (end - p !== 8 + n) throw new SyncWireError(`HELLO name of ${n} bytes does not fit`);
      const name = new TextDecoder().decode(
        new Uint8Array(view.buffer, view.byteOffset + p + 8, n),
      );
      return { type, name };
    }
    case FRAME.UPSERT:
    case FRAME.REMOVE:
      return { type, view, offset: p + 4, count: checkEntries(view, p, end) };
    case FRAME.BEGIN:
      if (end - p !== 4) throw new SyncWireError(`BEGIN of ${end - p} bytes, expected 4`);
      return { type, generation: view.getUint32(p) };
    case FRAME.END: {
      if (end - p < 8) throw new SyncWireError(`END of ${end - p} bytes, expected at least 8`);
      const n = view.getUint32(p + 4);
      if (end - p !== 8 + 4 * n) throw new SyncWireError(`END says ${n} addresses, does not fit`);
      const addrs: number[] = [];
      for (let i = 0; i < n; i++) addrs.push(view.getUint32(p + 8 + 4 * i));
      return { type, generation: view.getUint32(p), addrs };
    }
    case FRAME.ACK:
      if (end - p !== 4) throw new SyncWireError(`ACK of ${end - p} bytes, expected 4`);
      return { type, applied: view.getUint32(p) };
    default:
      throw new SyncWireError(`unknown frame type ${type}`);
  }
}

/** Reassembles frames from a byte stream; bounded by {@linkcode MAX_FRAME}. */
export class FrameReader {
  #buf = new Uint8Array(256 * 1024);
  #start = 0;
  #end = 0;

  /** Appends received bytes. */
  push(chunk: Uint8Array): void {
    if (this.#buf.length - this.#end < chunk.length) {
      const pending = this.#end - this.#start;
      const size = Math.max(this.#buf.length, (pending + chunk.length) * 2);
      const next = size > this.#buf.length ? new Uint8Array(size) : this.#buf;
      next.set(this.#buf.subarray(this.#start, this.#end), 0);
      this.#buf = next;
      this.#start = 0;
      this.#end = pending;
    }
    this.#buf.set(chunk, this.#end);
    this.#end += chunk.length;
  }

  /**
   * The complete frames received so far; throws SyncWireError on a bad frame. Entry frames point
   * into the reader's buffer: use them before the next `push`.
   */
  frames(): Frame[] {
    const out: Frame[] = [];
    const view = new DataView(this.#buf.buffer);
    while (this.#end - this.#start >= 4) {
      const len = view.getUint32(this.#start);
      if (len > MAX_FRAME || len < 1) {
        throw new SyncWireError(`frame length ${len} outside 1..${MAX_FRAME}`);
      }
      if (this.#end - this.#start < 4 + len) break;
      out.push(decodeFrame(view, this.#start));
      this.#start += 4 + len;
    }
    if (this.#start === this.#end) this.#start = this.#end = 0;
    return out;
  }
}
