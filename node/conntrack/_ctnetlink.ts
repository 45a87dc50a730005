/**
 * ctnetlink message encoding and decoding (pure, no I/O): netlink headers, the nfgenmsg, and the
 * conntrack attributes Holdfast uses (IPv4 TCP/UDP tuples, status, timeout, TCP state, source NAT,
 * mark, id). Numbers from linux/netlink.h, linux/netfilter/nfnetlink.h and nfnetlink_conntrack.h.
 *
 * Netlink headers and attribute headers are host order (little-endian here); attribute payloads
 * of conntrack are network order. Every read is bounds-checked: a short or malformed message
 * becomes a {@linkcode CtDecodeError}, never an out-of-range read.
 *
 * @module
 */

/** One direction of a connection: IPv4 addresses as u32 in host order. */
export interface CtTuple {
  src: number;
  dst: number;
  proto: 6 | 17;
  sport: number;
  dport: number;
}

/** A conntrack entry as Holdfast reads and writes it. */
export interface CtEntry {
  orig: CtTuple;
  reply: CtTuple;
  /** IPS_* status bits. */
  status: number;
  /** Seconds left before the kernel expires the entry. */
  timeoutS: number;
  /** TCP_CONNTRACK_* (3 = ESTABLISHED); TCP only. */
  tcpState?: number;
  /** The translated source (SNAT): the reply tuple's destination when IPS_SRC_NAT is set. */
  natSrc?: { addr: number; port: number };
  mark?: number;
  id?: number;
}

/** A message that cannot be decoded: says what was expected where. */
export class CtDecodeError extends Error {
  override name = "CtDecodeError";
}

// linux/netlink.h
export const NLMSG_HDRLEN = 16;
export const NLMSG_NOOP = 1;
export const NLMSG_ERROR = 2;
export const NLMSG_DONE = 3;
export const NLMSG_OVERRUN = 4;
export const NLM_F_REQUEST = 0x1;
export const NLM_F_MULTI = 0x2;
export const NLM_F_ACK = 0x4;
export const NLM_F_DUMP = 0x300;
export const NLM_F_REPLACE = 0x100;
export const NLM_F_EXCL = 0x200;
export const NLM_F_CREATE = 0x400;
const NLA_F_NESTED = 0x8000;
export const NLA_TYPE_MASK = 0x3fff;

// linux/netfilter/nfnetlink.h, nfnetlink_conntrack.h
const NFNL_SUBSYS_CTNETLINK = 1;
export const IPCTNL_MSG_CT_NEW = (NFNL_SUBSYS_CTNETLINK << 8) | 0;
export const IPCTNL_MSG_CT_GET = (NFNL_SUBSYS_CTNETLINK << 8) | 1;
export const IPCTNL_MSG_CT_DELETE = (NFNL_SUBSYS_CTNETLINK << 8) | 2;
export const AF_INET = 2;
export const NFGENMSG_LEN = 4;

export const CTA_TUPLE_ORIG = 1;
export const CTA_TUPLE_REPLY = 2;
export const CTA_STATUS = 3;
export const CTA_PROTOINFO = 4;
const CTA_NAT_SRC = 6;
export const CTA_TIMEOUT = 7;
export const CTA_MARK = 8;
export const CTA_ID = 12;
const CTA_FILTER = 25;
const CTA_FILTER_REPLY_FLAGS = 2;
const CTA_FILTER_FLAG_IP_DST = 1 << 1;
export const CTA_TUPLE_IP = 1;
export const CTA_TUPLE_PROTO = 2;
export const CTA_IP_V4_SRC = 1;
export const CTA_IP_V4_DST = 2;
export const CTA_PROTO_NUM = 1;
export const CTA_PROTO_SRC_PORT = 2;
export const CTA_PROTO_DST_PORT = 3;
export const CTA_PROTOINFO_TCP = 1;
export const CTA_PROTOINFO_TCP_STATE = 1;
const CTA_NAT_V4_MINIP = 1;
const CTA_NAT_V4_MAXIP = 2;
const CTA_NAT_PROTO = 3;
const CTA_PROTONAT_PORT_MIN = 1;
const CTA_PROTONAT_PORT_MAX = 2;

// linux/netfilter/nf_conntrack_common.h
export const IPS_EXPECTED = 1 << 0;
export const IPS_SEEN_REPLY = 1 << 1;
export const IPS_ASSURED = 1 << 2;
export const IPS_CONFIRMED = 1 << 3;
export const IPS_SRC_NAT = 1 << 4;
export const IPS_SRC_NAT_DONE = 1 << 7;
/** TCP_CONNTRACK_ESTABLISHED. */
export const TCP_ESTABLISHED = 3;

/** Largest ctnetlink NEW message {@linkcode encodeNew} writes (bytes). */
export const MAX_NEW_LEN = 256;

/** How {@linkcode encodeNew} writes an entry. */
export type NewForm = "create" | "update";

/** The plain inverse of a tuple (what the reply of an untranslated connection looks like). */
export function inverse(t: CtTuple): CtTuple {
  return { src: t.dst, dst: t.src, proto: t.proto, sport: t.dport, dport: t.sport };
}

/** `proto src:sport > dst:dport` for error messages and logs. */
export function tupleText(t: CtTuple): string {
  const ip = (n: number) => `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
  return `${t.proto === 6 ? "tcp" : "udp"} ${ip(t.src)}:${t.sport} > ${ip(t.dst)}:${t.dport}`;
}

/** Writes attributes into a buffer; nested attributes patch their length on close. */
class Writer {
  constructor(readonly view: DataView, public off: number) {}

  open(type: number): number {
    const start = this.off;
    this.view.setUint16(start + 2, type | NLA_F_NESTED, true);
    this.off += 4;
    return start;
  }

  close(start: number): void {
    this.view.setUint16(start, this.off - start, true);
  }

  u8(type: number, v: number): void {
    const o = this.off;
    this.view.setUint32(o, (type << 16) | 5, true);
    this.view.setUint32(o + 4, v & 0xff, true);
    this.off += 8;
  }

  be16(type: number, v: number): void {
    const o = this.off;
    this.view.setUint32(o, (type << 16) | 6, true);
    this.view.setUint32(o + 4, 0, true);
    this.view.setUint16(o + 4, v, false);
    this.off += 8;
  }

  /** A host-order u32 (netlink's own attributes, e.g. CTA_FILTER flags). */
  u32(type: number, v: number): void {
    const o = this.off;
    this.view.setUint32(o, (type << 16) | 8, true);
    this.view.setUint32(o + 4, v >>> 0, true);
    this.off += 8;
  }

  be32(type: number, v: number): void {
    const o = this.off;
    this.view.setUint32(o, (type << 16) | 8, true);
    this.view.setUint32(o + 4, v >>> 0, false);
    this.off += 8;
  }
}

function header(view: DataView, off: number, type: number, flags: number, seq: number): void {
  view.setUint16(off + 4, type, true);
  view.setUint16(off + 6, flags, true);
  view.setUint32(off + 8, seq >>> 0, true);
  view.setUint32(off + 12, 0, true); // nlmsg_pid: 0 = the kernel
  view.setUint32(off + 16, AF_INET, true); // nfgenmsg: family, version 0, res_id 0
}

function writeTuple(w: Writer, type: number, t: CtTuple): void {
  const tuple = w.open(type);
  const ip = w.open(CTA_TUPLE_IP);
  w.be32(CTA_IP_V4_SRC, t.src);
  w.be32(CTA_IP_V4_DST, t.dst);
  w.close(ip);
  const proto = w.open(CTA_TUPLE_PROTO);
  w.u8(CTA_PROTO_NUM, t.proto);
  w.be16(CTA_PROTO_SRC_PORT, t.sport);
  w.be16(CTA_PROTO_DST_PORT, t.dport);
  w.close(proto);
  w.close(tuple);
}

/**
 * Bytes of the compact fixed-size form of an entry (big-endian), what inject batches and the
 * conntrack sync stream carry: src u32 | dst u32 | sport u16 | dport u16 | proto u8 |
 * tcpState u8 (255 none) | flags u8 (1 natSrc, 2 mark) | 0 u8 | status u32 | timeoutS u32 |
 * natAddr u32 | natPort u16 | 0 u16 | mark u32. The reply tuple is not carried: injection sends
 * the plain inverse of orig.
 */
export const RECORD_LEN = 36;

/** Writes `e` as a record at `off`. */
export function writeRecord(view: DataView, off: number, e: CtEntry): void {
  view.setUint32(off, e.orig.src);
  view.setUint32(off + 4, e.orig.dst);
  view.setUint16(off + 8, e.orig.sport);
  view.setUint16(off + 10, e.orig.dport);
  view.setUint8(off + 12, e.orig.proto);
  view.setUint8(off + 13, e.tcpState ?? 255);
  view.setUint8(off + 14, (e.natSrc ? 1 : 0) | (e.mark !== undefined ? 2 : 0));
  view.setUint8(off + 15, 0);
  view.setUint32(off + 16, e.status >>> 0);
  view.setUint32(off + 20, Math.max(0, Math.min(0xffffffff, Math.round(e.timeoutS))));
  view.setUint32(off + 24, e.natSrc ? e.natSrc.addr >>> 0 : 0);
  view.setUint32(off + 28, e.natSrc ? e.natSrc.port << 16 : 0);
  view.setUint32(off + 32, e.mark !== undefined ? e.mark >>> 0 : 0);
}

/** Throws CtDecodeError unless each of `count` records at `off` is TCP or UDP. */
export function checkRecords(view: DataView, off: number, count: number): void {
  if (off + count * RECORD_LEN > view.byteLength) {
    throw new CtDecodeError(`Cannot read ${count} records: they run past the data`);
  }
  for (let i = 0; i < count; i++) {
    const proto = view.getUint8(off + i * RECORD_LEN + 12);
    if (proto !== 6 && proto !== 17) {
      throw new CtDecodeError(`Cannot read record ${i}: protocol ${proto}, expected 6 or 17`);
    }
  }
}

/** The entry of the record at `off` (reply = plain inverse of orig). */
export function readRecord(view: DataView, off: number): CtEntry {
  checkRecords(view, off, 1);
  const orig: CtTuple = {
    src: view.getUint32(off),
    dst: view.getUint32(off + 4),
    sport: view.getUint16(off + 8),
    dport: view.getUint16(off + 10),
    proto: view.getUint8(off + 12) as 6 | 17,
  };
  const e: CtEntry = {
    orig,
    reply: inverse(orig),
    status: view.getUint32(off + 16),
    timeoutS: view.getUint32(off + 20),
  };
  const tcpState = view.getUint8(off + 13), flags = view.getUint8(off + 14);
  if (tcpState !== 255 && orig.proto === 6) e.tcpState = tcpState;
  if (flags & 1) e.natSrc = { addr: view.getUint32(off + 24), port: view.getUint16(off + 28) };
  if (flags & 2) e.mark = view.getUint32(off + 32);
  return e;
}

function writeRecordTuple(w: Writer, type: number, rec: DataView, r: number, reply: boolean): void {
  const tuple = w.open(type);
  const ip = w.open(CTA_TUPLE_IP);
  w.be32(CTA_IP_V4_SRC, rec.getUint32(reply ? r + 4 : r));
  w.be32(CTA_IP_V4_DST, rec.getUint32(reply ? r : r + 4));
  w.close(ip);
  const proto = w.open(CTA_TUPLE_PROTO);
  w.u8(CTA_PROTO_NUM, rec.getUint8(r + 12));
  w.be16(CTA_PROTO_SRC_PORT, rec.getUint16(reply ? r + 10 : r + 8));
  w.be16(CTA_PROTO_DST_PORT, rec.getUint16(reply ? r + 8 : r + 10));
  w.close(proto);
  w.close(tuple);
}

const scratch = new DataView(new ArrayBuffer(RECORD_LEN));

/**
 * Writes an IPCTNL_MSG_CT_NEW for `entry` at `off` (room for {@linkcode MAX_NEW_LEN} bytes
 * needed) and returns the offset after it; see {@linkcode encodeNewRecord}.
 */
export function encodeNew(
  view: DataView,
  off: number,
  entry: CtEntry,
  seq: number,
  form: NewForm,
): number {
  writeRecord(scratch, 0, entry);
  return encodeNewRecord(view, off, scratch, 0, seq, form);
}

/**
 * Writes an IPCTNL_MSG_CT_NEW for the record at `rec[r]` at `off` (room for
 * {@linkcode MAX_NEW_LEN} bytes needed) and returns the offset after it. "create" is the form
 * FINDINGS.md measured for NAT failover: reply = plain inverse of orig, CTA_NAT_SRC min = max =
 * natSrc, status with CONFIRMED (never EXPECTED), TCP state, timeout; flags NLM_F_CREATE so an
 * absent entry is created. "update" leaves out NAT and status, which the kernel refuses to change
 * on an existing entry (EOPNOTSUPP / EBUSY), and keeps timeout, TCP state and mark.
 */
export function encodeNewRecord(
  view: DataView,
  off: number,
  rec: DataView,
  r: number,
  seq: number,
  form: NewForm,
): number {
  const flags = NLM_F_REQUEST | (form === "create" ? NLM_F_CREATE : 0);
  header(view, off, IPCTNL_MSG_CT_NEW, flags, seq);
  const w = new Writer(view, off + NLMSG_HDRLEN + NFGENMSG_LEN);
  writeRecordTuple(w, CTA_TUPLE_ORIG, rec, r, false);
  const recFlags = rec.getUint8(r + 14);
  if (form === "create") {
    writeRecordTuple(w, CTA_TUPLE_REPLY, rec, r, true);
    const keep = rec.getUint32(r + 16) & (IPS_SEEN_REPLY | IPS_ASSURED);
    w.be32(CTA_STATUS, keep | IPS_CONFIRMED);
  }
  w.be32(CTA_TIMEOUT, Math.max(1, Math.min(0x7fffffff, rec.getUint32(r + 20))));
  const tcpState = rec.getUint8(r + 13);
  if (rec.getUint8(r + 12) === 6 && tcpState !== 255) {
    const info = w.open(CTA_PROTOINFO);
    const tcp = w.open(CTA_PROTOINFO_TCP);
    w.u8(CTA_PROTOINFO_TCP_STATE, tcpState);
    w.close(tcp);
    w.close(info);
  }
  if (form === "create" && recFlags & 1) {
    const addr = rec.getUint32(r + 24), port = rec.getUint16(r + 28);
    const nat = w.open(CTA_NAT_SRC);
    w.be32(CTA_NAT_V4_MINIP, addr);
    w.be32(CTA_NAT_V4_MAXIP, addr);
    const proto = w.open(CTA_NAT_PROTO);
    w.be16(CTA_PROTONAT_PORT_MIN, port);
    w.be16(CTA_PROTONAT_PORT_MAX, port);
    w.close(proto);
    w.close(nat);
  }
  if (recFlags & 2) w.be32(CTA_MARK, rec.getUint32(r + 32));
  view.setUint32(off, w.off - off, true);
  return w.off;
}

/** Writes an IPCTNL_MSG_CT_DELETE of the entry with original tuple `orig`; returns the end. */
export function encodeDelete(view: DataView, off: number, orig: CtTuple, seq: number): number {
  header(view, off, IPCTNL_MSG_CT_DELETE, NLM_F_REQUEST, seq);
  const w = new Writer(view, off + NLMSG_HDRLEN + NFGENMSG_LEN);
  writeTuple(w, CTA_TUPLE_ORIG, orig);
  view.setUint32(off, w.off - off, true);
  return w.off;
}

/** Writes an IPv4 conntrack dump request (optionally filtered in the kernel); returns the end. */
export function encodeDumpRequest(
  view: DataView,
  off: number,
  seq: number,
  replyDst?: number,
): number {
  header(view, off, IPCTNL_MSG_CT_GET, NLM_F_REQUEST | NLM_F_DUMP, seq);
  const w = new Writer(view, off + NLMSG_HDRLEN + NFGENMSG_LEN);
  if (replyDst !== undefined) {
    // Kernel-side filter (CTA_FILTER, Linux ≥ 5.9): only entries whose reply tuple goes to
    // replyDst — for SNAT entries, those translated to that address.
    const tuple = w.open(CTA_TUPLE_REPLY);
    const ip = w.open(CTA_TUPLE_IP);
    w.be32(CTA_IP_V4_DST, replyDst);
    w.close(ip);
    w.close(tuple);
    const filter = w.open(CTA_FILTER);
    w.u32(CTA_FILTER_REPLY_FLAGS, CTA_FILTER_FLAG_IP_DST);
    w.close(filter);
  }
  view.setUint32(off, w.off - off, true);
  return w.off;
}
