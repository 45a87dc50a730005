/**
 * IPv6 frame builders beside lab/packets.ts: IPv6 headers, TCP/UDP over IPv6 with checksums over
 * the IPv6 pseudo-header, ICMPv6 errors, and the frames hf_lb must produce for an IPv6 client
 * (encapsulated over either backend family, Packet Too Big). Built field by field here,
 * independently of the BPF code they check (tests/bpf/ipv6*_test.ts, bench/datapath.ts).
 *
 * @module
 */
import { ipv6Bytes } from "../lib/ipv6.ts";
import { isIpv4 } from "../lib/ipv4.ts";
import { concatBytes } from "../lib/bytes.ts";
import { eth, inetChecksum, ipv4, tcp, type TcpFields, udp } from "./packets.ts";

/** EtherType of IPv6. */
export const ETH_P_IPV6 = 0x86dd;

/** Fields of an IPv6 header. */
export interface Ipv6Fields {
  readonly src: string;
  readonly dst: string;
  /** Next header (6 TCP, 17 UDP, 58 ICMPv6, 44 fragment, ...). */
  readonly nextHeader: number;
  /** Payload length (bytes after the 40-byte header). */
  readonly payloadLen: number;
  /** Hop limit (default 64). */
  readonly hopLimit?: number;
  /** Traffic class (default 0). */
  readonly tc?: number;
  /** Flow label, 20 bits (default 0). */
  readonly flowLabel?: number;
  /** Version nibble (default 6; other values make malformed packets). */
  readonly version?: number;
}

/** IPv6 header (40 bytes). */
export function ipv6(f: Ipv6Fields): Uint8Array {
  const b = new Uint8Array(40);
  const v = new DataView(b.buffer);
  const tc = f.tc ?? 0;
  v.setUint32(0, (((f.version ?? 6) << 28) | (tc << 20) | ((f.flowLabel ?? 0) & 0xfffff)) >>> 0);
  v.setUint16(4, f.payloadLen);
  b[6] = f.nextHeader;
  b[7] = f.hopLimit ?? 64;
  b.set(ipv6Bytes(f.src), 8);
  b.set(ipv6Bytes(f.dst), 24);
  return b;
}

/** Partial sum of the IPv6 pseudo-header (RFC 8200 8.1). */
export function pseudoSum6(src: string, dst: string, nextHeader: number, len: number): number {
  return pseudoSumBytes(ipv6Bytes(src), ipv6Bytes(dst), nextHeader, len);
}

function pseudoSumBytes(src: Uint8Array, dst: Uint8Array, nh: number, len: number): number {
  let sum = nh + (len >>> 16) + (len & 0xffff);
  for (const a of [src, dst]) for (let i = 0; i < 16; i += 2) sum += (a[i]! << 8) | a[i + 1]!;
  return sum;
}

/** Rewrites the checksum at `at` of an L4 segment for the IPv6 pseudo-header. */
function recheck(seg: Uint8Array, at: number, src: string, dst: string, nh: number): Uint8Array {
  seg[at] = 0;
  seg[at + 1] = 0;
  const c = inetChecksum(seg, pseudoSum6(src, dst, nh, seg.length));
  new DataView(seg.buffer, seg.byteOffset).setUint16(at, nh === 17 ? c || 0xffff : c);
  return seg;
}

/** TCP segment over IPv6 with a correct checksum. */
export function tcp6(src: string, dst: string, f: TcpFields): Uint8Array {
  return recheck(tcp("0.0.0.0", "0.0.0.0", f), 16, src, dst, 6);
}

/** UDP datagram over IPv6 with a correct checksum (`zeroCsum`: checksum field 0). */
export function udp6(
  src: string,
  dst: string,
  sport: number,
  dport: number,
  payload: Uint8Array,
  o: { lenOverride?: number; zeroCsum?: boolean } = {},
): Uint8Array {
  const d = recheck(
    udp("0.0.0.0", "0.0.0.0", sport, dport, payload, o.lenOverride),
    6,
    src,
    dst,
    17,
  );
  if (o.zeroCsum) d.fill(0, 6, 8);
  return d;
}

/** Ethernet + IPv6 + TCP frame. */
export function tcpFrame6(
  src: string,
  dst: string,
  f: TcpFields,
  ip: Partial<Ipv6Fields> = {},
): Uint8Array {
  const seg = tcp6(src, dst, f);
  return concatBytes(
    eth(ETH_P_IPV6),
    ipv6({ src, dst, nextHeader: 6, payloadLen: seg.length, ...ip }),
    seg,
  );
}

/** Ethernet + IPv6 + UDP frame. */
export function udpFrame6(
  src: string,
  dst: string,
  sport: number,
  dport: number,
  payload: Uint8Array,
  ip: Partial<Ipv6Fields> = {},
): Uint8Array {
  const d = udp6(src, dst, sport, dport, payload);
  return concatBytes(
    eth(ETH_P_IPV6),
    ipv6({ src, dst, nextHeader: 17, payloadLen: d.length, ...ip }),
    d,
  );
}

/** Length and traffic class (TOS) of the IPv4 or IPv6 packet at the start of `inner`. */
function innerInfo(inner: Uint8Array): { len: number; tc: number } {
  const v = new DataView(inner.buffer, inner.byteOffset);
  if (inner[0]! >> 4 === 6) return { len: 40 + v.getUint16(4), tc: (v.getUint16(0) >> 4) & 0xff };
  return { len: v.getUint16(2), tc: inner[1]! };
}

/**
 * The frame hf_lb must produce for `input` (an Ethernet frame of IPv4 or IPv6): MACs swapped,
 * then outer IPv4 (DF, TTL 64, id 0) + UDP when `backend` is IPv4, or outer IPv6 (traffic class
 * copied, flow label = hash & 0xfffff, hop limit 64) + UDP when it is IPv6; UDP checksum 0.
 */
export function encapsulatedAny(
  input: Uint8Array,
  o: {
    outerSrc: string;
    backend: string;
    sport: number;
    dport: number;
    /** The flow hash (outer IPv6 flow label). */
    hash: number;
  },
): Uint8Array {
  const inner = input.subarray(14);
  const { len, tc } = innerInfo(inner);
  const u = new Uint8Array(8);
  const v = new DataView(u.buffer);
  v.setUint16(0, o.sport);
  v.setUint16(2, o.dport);
  v.setUint16(4, 8 + len);
  const four = isIpv4(o.backend);
  const outer = four
    ? ipv4({
      src: o.outerSrc,
      dst: o.backend,
      proto: 17,
      payloadLen: 8 + len,
      id: 0,
      fragOff: 0x4000,
      ttl: 64,
      tos: tc,
    })
    : ipv6({
      src: o.outerSrc,
      dst: o.backend,
      nextHeader: 17,
      payloadLen: 8 + len,
      tc,
      flowLabel: o.hash & 0xfffff,
    });
  const e = eth(
    four ? 0x0800 : ETH_P_IPV6,
    Array.from(input.subarray(6, 12)),
    Array.from(input.subarray(0, 6)),
  );
  return concatBytes(e, outer, u, inner);
}

/** Fields of an ICMPv6 error message (RFC 4443). */
export interface Icmp6ErrorFields {
  /** 1 destination unreachable, 2 packet too big, 3 time exceeded, 4 parameter problem. */
  readonly type: number;
  readonly code: number;
  /** The 32-bit field after the checksum: the MTU of packet too big (default 0). */
  readonly mtu?: number;
  /** The packet the error is about (from its IPv6 header on). */
  readonly quote: Uint8Array;
  /** Bytes of `quote` to include (default 48: header + 8). */
  readonly quoteLen?: number;
}

/** ICMPv6 message (header + quote) with its checksum for src → dst. */
export function icmp6Message(src: string, dst: string, f: Icmp6ErrorFields): Uint8Array {
  const msg = new Uint8Array(8 + Math.min(f.quoteLen ?? 48, f.quote.length));
  const v = new DataView(msg.buffer);
  msg[0] = f.type;
  msg[1] = f.code;
  v.setUint32(4, f.mtu ?? 0);
  msg.set(f.quote.subarray(0, msg.length - 8), 8);
  v.setUint16(2, inetChecksum(msg, pseudoSum6(src, dst, 58, msg.length)));
  return msg;
}

/** Ethernet + IPv6 + ICMPv6 error frame from `src` (e.g. a router) to `dst`. */
export function icmp6ErrorFrame(
  src: string,
  dst: string,
  f: Icmp6ErrorFields,
  ip: Partial<Ipv6Fields> = {},
): Uint8Array {
  const msg = icmp6Message(src, dst, f);
  return concatBytes(
    eth(ETH_P_IPV6),
    ipv6({ src, dst, nextHeader: 58, payloadLen: msg.length, ...ip }),
    msg,
  );
}

/**
 * True when the checksum of the L4 message of an Ethernet + IPv6 (40, no extension headers) frame
 * verifies over the IPv6 pseudo-header: ICMPv6, TCP or UDP (its next header).
 */
export function l4ChecksumOk6(frame: Uint8Array): boolean {
  const len = new DataView(frame.buffer, frame.byteOffset).getUint16(18);
  const sum = pseudoSumBytes(frame.subarray(22, 38), frame.subarray(38, 54), frame[20]!, len);
  return inetChecksum(frame.subarray(54, 54 + len), sum) === 0;
}
