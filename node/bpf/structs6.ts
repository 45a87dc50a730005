/**
 * Byte layouts of bpf/structs6.h (the IPv6 structs, docs/contracts.md "IPv6") in TypeScript:
 * encoders and decoders, pure functions. Addresses are text (`lib/ipv6.ts`; an IPv4 backend of an
 * IPv6 flow is dotted IPv4); ports and addresses network order in the bytes, flags, IDs and times
 * host order (little-endian), as in structs.ts and flow.ts for IPv4.
 *
 * @module
 */

import { formatIpv6, ipv6Bytes, writeIpv6 } from "../../lib/ipv6.ts";
import { formatIpv4, ipv4Bytes, isIpv4 } from "../../lib/ipv4.ts";

/** Sizes of the IPv6 structs (tests/bpf/ipv6_structs_test.ts checks them against the maps). */
export const SIZES6 = {
  flow_key6: 40,
  flow_value6: 32,
  flow_event6: 72,
  service_key6: 20,
  backend_value6: 20,
  lb_config6: 16,
  vip6_key: 16,
} as const;

/** Outer IPv6 (40) + UDP (8) bytes added by encapsulation to an IPv6 backend
 * (`HF_ENCAP6_OVERHEAD` of bpf/consts6.h; to an IPv4 backend it is `HF_ENCAP_OVERHEAD`, 28). */
export const HF_ENCAP6_OVERHEAD = 48;
/** IPv6 SYNs from a local LB IP are clamped to mss_max minus this (`HF_MSS6_DELTA`). */
export const HF_MSS6_DELTA = 40;

/** `flow_value6.backend_family` values (`HF_AF_INET`, `HF_AF_INET6`). */
export const AF = { INET: 4, INET6: 6 } as const;

/** An IPv6 flow map key (`struct flow_key6`); sport 0 in client-ip mode. */
export interface FlowKey6 {
  readonly saddr: string;
  readonly daddr: string;
  readonly sport: number;
  readonly dport: number;
  readonly proto: number;
}

/** An IPv6 flow map value (`struct flow_value6`): the backend may be either family. */
export interface FlowValue6 {
  /** Backend address: IPv6 text, or dotted IPv4 for an IPv4 backend. */
  readonly backend: string;
  readonly flags: number;
  /** Datapath clock (CLOCK_MONOTONIC ns) of the last packet. */
  readonly lastSeenNs: number;
}

/** A new-flow event of the hf_events6 ring buffer (`struct flow_event6`). */
export interface FlowEvent6 {
  readonly key: FlowKey6;
  readonly backend: string;
  readonly serviceId: number;
  readonly tsNs: number;
}

/** `struct flow_key6` → 40 bytes. */
export function encodeFlowKey6(k: FlowKey6): Uint8Array {
  const b = new Uint8Array(SIZES6.flow_key6);
  writeFlowKey6(b, 0, k);
  return b;
}

/** Writes `struct flow_key6` (40 bytes) into `b` at `offset` (padding zeroed). */
export function writeFlowKey6(b: Uint8Array, offset: number, k: FlowKey6): void {
  if (b.length < offset + SIZES6.flow_key6) {
    throw new RangeError(
      `Cannot write flow_key6: ${b.length - offset} bytes at ${offset}, need 40`,
    );
  }
  writeIpv6(k.saddr, b, offset);
  // The LB IP repeats from flow to flow: parsed once while it does.
  if (k.daddr !== lastDaddr) {
    lastDaddrBytes = ipv6Bytes(k.daddr); // throws before the memo changes
    lastDaddr = k.daddr;
  }
  for (let i = 0; i < 16; i++) b[offset + 16 + i] = lastDaddrBytes[i]!;
  b[offset + 32] = (k.sport >>> 8) & 0xff;
  b[offset + 33] = k.sport & 0xff;
  b[offset + 34] = (k.dport >>> 8) & 0xff;
  b[offset + 35] = k.dport & 0xff;
  b[offset + 36] = k.proto & 0xff;
  b.fill(0, offset + 37, offset + 40);
}

let lastDaddr = "::";
let lastDaddrBytes: Uint8Array = new Uint8Array(16);

/** 40 bytes (at `offset`) → `struct flow_key6`. */
export function decodeFlowKey6(b: Uint8Array, offset = 0): FlowKey6 {
  const v = new DataView(b.buffer, b.byteOffset + offset, SIZES6.flow_key6);
  return {
    saddr: formatIpv6(b, offset),
    daddr: formatIpv6(b, offset + 16),
    sport: v.getUint16(32),
    dport: v.getUint16(34),
    proto: v.getUint8(36),
  };
}

/**
 * Writes a backend address as (16 bytes, family) at `offset`/`offset + 16`; an IPv4 backend as
 * dotted text or a host-order u32.
 */
function writeBackend(b: Uint8Array, offset: number, address: string | number): void {
  b.fill(0, offset, offset + 20);
  if (typeof address === "number") {
    new DataView(b.buffer, b.byteOffset + offset, 4).setUint32(0, address >>> 0);
    b[offset + 16] = AF.INET;
  } else if (isIpv4(address)) {
    b.set(ipv4Bytes(address), offset);
    b[offset + 16] = AF.INET;
  } else {
    b.set(ipv6Bytes(address), offset);
    b[offset + 16] = AF.INET6;
  }
}

/** Reads a backend address written by {@link writeBackend} (or the datapath): IPv4 as a u32. */
function readBackendAny(b: Uint8Array, offset: number): number | string {
  const family = b[offset + 16];
  if (family === AF.INET) return new DataView(b.buffer, b.byteOffset + offset, 4).getUint32(0);
  if (family === AF.INET6) return formatIpv6(b, offset);
  throw new RangeError(`Cannot read IPv6 flow backend: family ${family} is neither 4 nor 6`);
}

/** A backend as text: dotted IPv4 (from a u32) or IPv6. */
function backendText(a: number | string): string {
  return typeof a === "number" ? formatIpv4(a) : a;
}

/** `struct flow_value6` → 32 bytes. */
export function encodeFlowValue6(value: FlowValue6): Uint8Array {
  const b = new Uint8Array(SIZES6.flow_value6);
  writeFlowValue6(b, 0, value);
  return b;
}

/**
 * A flow value as the flow agent holds it (node/bpf/flow.ts `AnyFlowValue`): an IPv4 backend as
 * a host-order u32, an IPv6 one as text.
 */
export interface FlowValue6Agent {
  readonly backend: number | string;
  readonly flags: number;
  readonly lastSeenNs: number;
}

/** Writes `struct flow_value6` (32 bytes) into `b` at `offset`; the backend text or u32. */
export function writeFlowValue6(b: Uint8Array, offset: number, value: FlowValue6Agent): void {
  const v = new DataView(b.buffer, b.byteOffset + offset, SIZES6.flow_value6);
  writeBackend(b, offset, value.backend);
  v.setUint32(20, value.flags, true);
  v.setBigUint64(24, BigInt(Math.max(0, Math.trunc(value.lastSeenNs))), true);
}

/** Reads `struct flow_value6` at `offset` with an IPv4 backend as a host-order u32. */
export function readFlowValue6(b: Uint8Array, offset = 0): FlowValue6Agent {
  const v = new DataView(b.buffer, b.byteOffset + offset, SIZES6.flow_value6);
  return {
    backend: readBackendAny(b, offset),
    flags: v.getUint32(20, true),
    lastSeenNs: Number(v.getBigUint64(24, true)),
  };
}

/** 32 bytes → `struct flow_value6`. */
export function decodeFlowValue6(b: Uint8Array, offset = 0): FlowValue6 {
  const value = readFlowValue6(b, offset);
  return { ...value, backend: backendText(value.backend) };
}

/** 72 bytes of an hf_events6 record → `struct flow_event6`. */
export function decodeFlowEvent6(b: Uint8Array): FlowEvent6 {
  const e = readFlowEvent6(b);
  return { ...e, backend: backendText(e.backend) };
}

/**
 * 72 bytes of an hf_events6 record → the event as the flow agent takes it (node/bpf/flow.ts
 * `AnyFlowEvent`): an IPv4 backend as a host-order u32.
 */
export function readFlowEvent6(
  b: Uint8Array,
): { key: FlowKey6; backend: number | string; serviceId: number; tsNs: number } {
  if (b.length < SIZES6.flow_event6) {
    throw new RangeError(
      `Cannot read IPv6 flow event: ${b.length} bytes, need ${SIZES6.flow_event6}`,
    );
  }
  const v = new DataView(b.buffer, b.byteOffset, SIZES6.flow_event6);
  return {
    key: decodeFlowKey6(b, 0),
    backend: readBackendAny(b, 40),
    serviceId: v.getUint32(60, true),
    tsNs: Number(v.getBigUint64(64, true)),
  };
}

/** `struct service_key6`: VIP, port, protocol → 20 bytes. */
export function encodeServiceKey6(address: string, port: number, proto: number): Uint8Array {
  const b = new Uint8Array(SIZES6.service_key6);
  b.set(ipv6Bytes(address), 0);
  new DataView(b.buffer).setUint16(16, port);
  b[18] = proto;
  return b;
}

/** `struct backend_value6` → 20 bytes (an all-zero address is "no IPv6 backend"). */
export function encodeBackendValue6(address: string, port: number): Uint8Array {
  const b = new Uint8Array(SIZES6.backend_value6);
  b.set(ipv6Bytes(address), 0);
  new DataView(b.buffer).setUint16(16, port);
  return b;
}

/** `struct lb_config6`: this LB node's IPv6 address (the outer source to IPv6 backends). */
export function encodeLbConfig6(srcAddr: string): Uint8Array {
  const b = new Uint8Array(SIZES6.lb_config6);
  b.set(ipv6Bytes(srcAddr), 0);
  return b;
}

/** `struct vip6_key` (hf_local_vips6 of the decap object): 16 address bytes. */
export function encodeVip6Key(address: string): Uint8Array {
  return ipv6Bytes(address);
}

/** `struct service_key6` → VIP (RFC 5952 text), port, protocol number. */
export function decodeServiceKey6(
  b: Uint8Array,
  offset = 0,
): { address: string; port: number; proto: number } {
  const v = new DataView(b.buffer, b.byteOffset + offset, SIZES6.service_key6);
  return { address: formatIpv6(b, offset), port: v.getUint16(16), proto: b[offset + 18]! };
}

/** `struct backend_value6` → address (RFC 5952 text; "::" = none) and port. */
export function decodeBackendValue6(b: Uint8Array, offset = 0): { address: string; port: number } {
  const v = new DataView(b.buffer, b.byteOffset + offset, SIZES6.backend_value6);
  return { address: formatIpv6(b, offset), port: v.getUint16(16) };
}
