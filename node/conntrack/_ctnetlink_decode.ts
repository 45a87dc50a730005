/**
 * ctnetlink decoding: netlink message splitting, NLMSG_ERROR, conntrack entries. Every read is
 * bounds-checked; a short or malformed message is a {@linkcode CtDecodeError}. Written as plain
 * loops (no callbacks per attribute): dumps and events decode hundreds of thousands of entries.
 *
 * @module
 */

import {
  AF_INET,
  CTA_ID,
  CTA_IP_V4_DST,
  CTA_IP_V4_SRC,
  CTA_MARK,
  CTA_PROTO_DST_PORT,
  CTA_PROTO_NUM,
  CTA_PROTO_SRC_PORT,
  CTA_PROTOINFO,
  CTA_PROTOINFO_TCP,
  CTA_PROTOINFO_TCP_STATE,
  CTA_STATUS,
  CTA_TIMEOUT,
  CTA_TUPLE_IP,
  CTA_TUPLE_ORIG,
  CTA_TUPLE_PROTO,
  CTA_TUPLE_REPLY,
  CtDecodeError,
  type CtEntry,
  type CtTuple,
  IPS_SRC_NAT,
  NFGENMSG_LEN,
  NLA_TYPE_MASK,
  NLMSG_HDRLEN,
} from "./_ctnetlink.ts";

/** One netlink message header within a receive buffer. */
export interface NlMsg {
  type: number;
  flags: number;
  seq: number;
  /** Offset of the payload (after the 16-byte header). */
  payload: number;
  /** End of this message (exclusive). */
  end: number;
}

/**
 * Splits `len` bytes of a receive buffer into netlink messages. Throws CtDecodeError on a
 * length that is too short or runs past the data.
 */
export function splitMessages(view: DataView, len: number): NlMsg[] {
  const out: NlMsg[] = [];
  let off = 0;
  while (off + NLMSG_HDRLEN <= len) {
    const msgLen = view.getUint32(off, true);
    if (msgLen < NLMSG_HDRLEN || off + msgLen > len) {
      throw new CtDecodeError(
        `Cannot decode netlink message at offset ${off}: length ${msgLen} with ${
          len - off
        } bytes left`,
      );
    }
    out.push({
      type: view.getUint16(off + 4, true),
      flags: view.getUint16(off + 6, true),
      seq: view.getUint32(off + 8, true),
      payload: off + NLMSG_HDRLEN,
      end: off + msgLen,
    });
    off += (msgLen + 3) & ~3;
  }
  if (off < len) {
    throw new CtDecodeError(`Cannot decode netlink message: ${len - off} trailing bytes`);
  }
  return out;
}

/** The (positive) errno and the failed request's seq of an NLMSG_ERROR (errno 0 = ACK). */
export function decodeError(view: DataView, m: NlMsg): { errno: number; seq: number } {
  if (m.end - m.payload < 4 + NLMSG_HDRLEN) {
    throw new CtDecodeError(`Cannot decode NLMSG_ERROR: ${m.end - m.payload} bytes, need 20`);
  }
  return { errno: -view.getInt32(m.payload, true), seq: view.getUint32(m.payload + 12, true) };
}

/** Length of the attribute at `off` (header included), checked against `end`. */
function attrLen(view: DataView, off: number, end: number, what: string): number {
  const len = view.getUint16(off, true);
  if (len < 4 || off + len > end) {
    throw new CtDecodeError(
      `Cannot decode ${what}: attribute at offset ${off} has length ${len}, ${end - off} left`,
    );
  }
  return len;
}

function need(len: number, want: number, what: string): void {
  if (len < want) throw new CtDecodeError(`Cannot decode ${what}: ${len} bytes, need ${want}`);
}

/** A tuple, or undefined for one Holdfast does not handle (not IPv4 TCP/UDP). */
function readTuple(view: DataView, start: number, end: number): CtTuple | undefined {
  let src = -1, dst = -1, proto = 0, sport = 0, dport = 0;
  for (let off = start; off + 4 <= end;) {
    const len = attrLen(view, off, end, "CTA_TUPLE");
    const type = view.getUint16(off + 2, true) & NLA_TYPE_MASK;
    const e = off + len;
    if (type === CTA_TUPLE_IP || type === CTA_TUPLE_PROTO) {
      for (let o = off + 4; o + 4 <= e;) {
        const l = attrLen(view, o, e, type === CTA_TUPLE_IP ? "CTA_TUPLE_IP" : "CTA_TUPLE_PROTO");
        const t = view.getUint16(o + 2, true) & NLA_TYPE_MASK;
        if (type === CTA_TUPLE_IP) {
          if (t === CTA_IP_V4_SRC) (need(l - 4, 4, "CTA_IP_V4_SRC"), src = view.getUint32(o + 4));
          else if (t === CTA_IP_V4_DST) {
            need(l - 4, 4, "CTA_IP_V4_DST");
            dst = view.getUint32(o + 4);
          }
        } else if (t === CTA_PROTO_NUM) {
          (need(l - 4, 1, "CTA_PROTO_NUM"), proto = view.getUint8(o + 4));
        } else if (t === CTA_PROTO_SRC_PORT) {
          need(l - 4, 2, "CTA_PROTO_SRC_PORT");
          sport = view.getUint16(o + 4);
        } else if (t === CTA_PROTO_DST_PORT) {
          need(l - 4, 2, "CTA_PROTO_DST_PORT");
          dport = view.getUint16(o + 4);
        }
        o += (l + 3) & ~3;
      }
    }
    off += (len + 3) & ~3;
  }
  if (src < 0 || dst < 0 || (proto !== 6 && proto !== 17)) return undefined;
  return { src, dst, proto, sport, dport };
}

/** TCP state inside CTA_PROTOINFO, if any. */
function readTcpState(view: DataView, start: number, end: number): number | undefined {
  let state: number | undefined;
  for (let off = start; off + 4 <= end;) {
    const len = attrLen(view, off, end, "CTA_PROTOINFO");
    if ((view.getUint16(off + 2, true) & NLA_TYPE_MASK) === CTA_PROTOINFO_TCP) {
      const e = off + len;
      for (let o = off + 4; o + 4 <= e;) {
        const l = attrLen(view, o, e, "CTA_PROTOINFO_TCP");
        if ((view.getUint16(o + 2, true) & NLA_TYPE_MASK) === CTA_PROTOINFO_TCP_STATE) {
          need(l - 4, 1, "CTA_PROTOINFO_TCP_STATE");
          state = view.getUint8(o + 4);
        }
        o += (l + 3) & ~3;
      }
    }
    off += (len + 3) & ~3;
  }
  return state;
}

/**
 * Decodes the conntrack entry of a NEW/DELETE message (payload after the netlink header).
 * Returns undefined for entries Holdfast does not track (not IPv4 TCP/UDP); throws
 * CtDecodeError when the message is malformed or lacks a tuple.
 */
export function decodeEntry(view: DataView, m: NlMsg): CtEntry | undefined {
  need(m.end - m.payload, NFGENMSG_LEN, "nfgenmsg");
  if (view.getUint8(m.payload) !== AF_INET) return undefined;
  let orig: CtTuple | undefined, reply: CtTuple | undefined, origSeen = false, replySeen = false;
  let status = 0, timeoutS = 0, tcpState: number | undefined;
  let mark: number | undefined, id: number | undefined;
  const end = m.end;
  for (let off = m.payload + NFGENMSG_LEN; off + 4 <= end;) {
    const len = attrLen(view, off, end, "conntrack entry");
    const type = view.getUint16(off + 2, true) & NLA_TYPE_MASK;
    const p = off + 4, l = len - 4;
    switch (type) {
      case CTA_TUPLE_ORIG:
        origSeen = true;
        orig = readTuple(view, p, p + l);
        break;
      case CTA_TUPLE_REPLY:
        replySeen = true;
        reply = readTuple(view, p, p + l);
        break;
      case CTA_STATUS:
        need(l, 4, "CTA_STATUS");
        status = view.getUint32(p);
        break;
      case CTA_TIMEOUT:
        need(l, 4, "CTA_TIMEOUT");
        timeoutS = view.getUint32(p);
        break;
      case CTA_MARK:
        need(l, 4, "CTA_MARK");
        mark = view.getUint32(p);
        break;
      case CTA_ID:
        need(l, 4, "CTA_ID");
        id = view.getUint32(p);
        break;
      case CTA_PROTOINFO:
        tcpState = readTcpState(view, p, p + l);
        break;
    }
    off += (len + 3) & ~3;
  }
  if (!origSeen || !replySeen) {
    throw new CtDecodeError(
      `Cannot decode conntrack entry: ${origSeen ? "CTA_TUPLE_REPLY" : "CTA_TUPLE_ORIG"} missing`,
    );
  }
  if (!orig || !reply) return undefined;
  const entry: CtEntry = { orig, reply, status, timeoutS };
  if (tcpState !== undefined && orig.proto === 6) entry.tcpState = tcpState;
  if (status & IPS_SRC_NAT) entry.natSrc = { addr: reply.dst, port: reply.dport };
  if (mark !== undefined) entry.mark = mark;
  if (id !== undefined) entry.id = id;
  return entry;
}
