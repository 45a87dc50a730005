/**
 * Frame builders: Ethernet, IPv4, TCP, UDP and encapsulated packets built field by field, with
 * checksums computed here, independently of the BPF code they are fed to (the BPF fixtures and
 * the datapath benches).
 *
 * @module
 */
import { ipv4Bytes } from "../lib/ipv4.ts";
import { concatBytes } from "../lib/bytes.ts";

/** Internet checksum (RFC 1071) of bytes, optionally starting from a partial sum. */
export function inetChecksum(bytes: Uint8Array, initial = 0): number {
  let sum = initial;
  for (let i = 0; i + 1 < bytes.length; i += 2) sum += (bytes[i]! << 8) | bytes[i + 1]!;
  if (bytes.length % 2) sum += bytes[bytes.length - 1]! << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return (~sum) & 0xffff;
}

/** MAC addresses used by fixtures. */
export const MAC = {
  router: [0x02, 0, 0, 0, 0, 0x01],
  lb: [0x02, 0, 0, 0, 0, 0x02],
} as const;

/** Ethernet header. */
export function eth(
  type: number,
  dst: readonly number[] = MAC.lb,
  src: readonly number[] = MAC.router,
): Uint8Array {
  const b = new Uint8Array(14);
  b.set(dst, 0);
  b.set(src, 6);
  new DataView(b.buffer).setUint16(12, type);
  return b;
}

/** Fields of an IPv4 header. */
export interface Ipv4Fields {
  /** Source address. */
  readonly src: string;
  /** Destination address. */
  readonly dst: string;
  /** IP protocol number. */
  readonly proto: number;
  /** Payload length; tot_len = header + payload unless totLen is given. */
  readonly payloadLen: number;
  /** Total length (default header + payload). */
  readonly totLen?: number;
  /** IP options (a multiple of 4 bytes). */
  readonly options?: Uint8Array;
  /** Raw frag_off field (flags + offset); default DF. */
  readonly fragOff?: number;
  /** Time to live (default 64). */
  readonly ttl?: number;
  /** Type of service (default 0). */
  readonly tos?: number;
  /** Identification (default 0x1234). */
  readonly id?: number;
  /** Version nibble (default 4; other values make malformed packets). */
  readonly version?: number;
}

/** IPv4 header with a correct checksum. */
export function ipv4(f: Ipv4Fields): Uint8Array {
  const optLen = f.options?.length ?? 0;
  const b = new Uint8Array(20 + optLen);
  const v = new DataView(b.buffer);
  b[0] = ((f.version ?? 4) << 4) | ((20 + optLen) / 4);
  b[1] = f.tos ?? 0;
  v.setUint16(2, f.totLen ?? 20 + optLen + f.payloadLen);
  v.setUint16(4, f.id ?? 0x1234);
  v.setUint16(6, f.fragOff ?? 0x4000);
  b[8] = f.ttl ?? 64;
  b[9] = f.proto;
  b.set(ipv4Bytes(f.src), 12);
  b.set(ipv4Bytes(f.dst), 16);
  if (f.options) b.set(f.options, 20);
  v.setUint16(10, inetChecksum(b));
  return b;
}

function pseudoSum(src: string, dst: string, proto: number, len: number): number {
  const p = new Uint8Array(12);
  p.set(ipv4Bytes(src), 0);
  p.set(ipv4Bytes(dst), 4);
  p[9] = proto;
  new DataView(p.buffer).setUint16(10, len);
  let sum = 0;
  for (let i = 0; i < 12; i += 2) sum += (p[i]! << 8) | p[i + 1]!;
  return sum;
}

/** TCP fields. */
export interface TcpFields {
  /** Source port. */
  readonly sport: number;
  /** Destination port. */
  readonly dport: number;
  /** Flag byte, e.g. 0x02 SYN, 0x12 SYN/ACK, 0x10 ACK. */
  readonly flags?: number;
  /** TCP options (a multiple of 4 bytes). */
  readonly options?: Uint8Array;
  /** Payload after the header. */
  readonly payload?: Uint8Array;
  /** Sequence number (default 1000). */
  readonly seq?: number;
}

/** TCP segment (header + options + payload) with a correct checksum for src/dst. */
export function tcp(src: string, dst: string, f: TcpFields): Uint8Array {
  const optLen = f.options?.length ?? 0;
  const payload = f.payload ?? new Uint8Array(0);
  const b = new Uint8Array(20 + optLen + payload.length);
  const v = new DataView(b.buffer);
  v.setUint16(0, f.sport);
  v.setUint16(2, f.dport);
  v.setUint32(4, f.seq ?? 1000);
  b[12] = ((20 + optLen) / 4) << 4;
  b[13] = f.flags ?? 0x02;
  v.setUint16(14, 64240);
  if (f.options) b.set(f.options, 20);
  b.set(payload, 20 + optLen);
  v.setUint16(16, inetChecksum(b, pseudoSum(src, dst, 6, b.length)));
  return b;
}

/** UDP datagram with a correct checksum (or lenOverride for bad-length fixtures). */
export function udp(
  src: string,
  dst: string,
  sport: number,
  dport: number,
  payload: Uint8Array,
  lenOverride?: number,
): Uint8Array {
  const b = new Uint8Array(8 + payload.length);
  const v = new DataView(b.buffer);
  v.setUint16(0, sport);
  v.setUint16(2, dport);
  v.setUint16(4, lenOverride ?? b.length);
  b.set(payload, 8);
  v.setUint16(6, inetChecksum(b, pseudoSum(src, dst, 17, b.length)) || 0xffff);
  return b;
}

/** Concatenates parts (`concatBytes` of lib/bytes.ts, short for frame fixtures). */
export { concatBytes as cat };

/** Ethernet + IPv4 + TCP frame. */
export function tcpFrame(
  src: string,
  dst: string,
  f: TcpFields,
  ip: Partial<Ipv4Fields> = {},
): Uint8Array {
  const seg = tcp(src, dst, f);
  return concatBytes(eth(0x0800), ipv4({ src, dst, proto: 6, payloadLen: seg.length, ...ip }), seg);
}

/** Ethernet + IPv4 + UDP frame. */
export function udpFrame(
  src: string,
  dst: string,
  sport: number,
  dport: number,
  payload: Uint8Array,
  ip: Partial<Ipv4Fields> = {},
): Uint8Array {
  const d = udp(src, dst, sport, dport, payload);
  return concatBytes(eth(0x0800), ipv4({ src, dst, proto: 17, payloadLen: d.length, ...ip }), d);
}

/** The frame hf_lb must produce: MACs swapped, outer IPv4 (DF, TTL 64, id 0) + UDP (csum 0). */
export function encapsulated(
  input: Uint8Array,
  o: { outerSrc: string; backend: string; sport: number; dport: number },
): Uint8Array {
  const inner = input.subarray(14);
  const innerLen = new DataView(inner.buffer, inner.byteOffset).getUint16(2);
  const outerIp = ipv4({
    src: o.outerSrc,
    dst: o.backend,
    proto: 17,
    payloadLen: 8 + innerLen,
    id: 0,
    fragOff: 0x4000,
    ttl: 64,
    tos: inner[1] ?? 0,
  });
  const u = new Uint8Array(8);
  const v = new DataView(u.buffer);
  v.setUint16(0, o.sport);
  v.setUint16(2, o.dport);
  v.setUint16(4, 8 + innerLen);
  const e = eth(0x0800, Array.from(input.subarray(6, 12)), Array.from(input.subarray(0, 6)));
  return concatBytes(e, outerIp, u, inner);
}

/** Fields of an ICMP error message (RFC 792). */
export interface IcmpErrorFields {
  /** ICMP type, e.g. 3 destination unreachable, 11 time exceeded. */
  readonly type: number;
  /** ICMP code, e.g. 4 fragmentation needed. */
  readonly code: number;
  /** Next-hop MTU in the last two bytes of the header (frag-needed, RFC 1191); default 0. */
  readonly mtu?: number;
  /** The IPv4 packet the error is about; quoted up to `quoteLen` bytes. */
  readonly quote: Uint8Array;
  /** Bytes of `quote` to include (default: its IP header + 8, the RFC 792 minimum). */
  readonly quoteLen?: number;
}

/** Ethernet + IPv4 + ICMP error frame from `src` (e.g. a router) to `dst`, checksums correct. */
export function icmpErrorFrame(src: string, dst: string, f: IcmpErrorFields): Uint8Array {
  const quoteLen = f.quoteLen ?? ((f.quote[0]! & 0x0f) * 4 + 8);
  const msg = new Uint8Array(8 + Math.min(quoteLen, f.quote.length));
  const v = new DataView(msg.buffer);
  msg[0] = f.type;
  msg[1] = f.code;
  v.setUint16(6, f.mtu ?? 0);
  msg.set(f.quote.subarray(0, msg.length - 8), 8);
  v.setUint16(2, inetChecksum(msg));
  return concatBytes(
    eth(0x0800),
    ipv4({ src, dst, proto: 1, payloadLen: msg.length, fragOff: 0 }),
    msg,
  );
}

/** TCP options: MSS (kind 2) followed by SACK-permitted, timestamps and window scale. */
export function synOptions(mss: number): Uint8Array {
  return new Uint8Array([
    2,
    4,
    mss >> 8,
    mss & 0xff,
    4,
    2,
    8,
    10,
    0,
    0,
    0,
    1,
    0,
    0,
    0,
    0,
    1,
    3,
    3,
    7,
  ]);
}

/** Hex dump for assertion messages. */
export function hex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(" ");
}
