/**
 * Byte layouts of bpf/structs.h (and the reason enums of bpf/consts.h) in TypeScript: encoders
 * and decoders for map keys/values and ring events. Pure functions, unit-tested without a kernel.
 *
 * @module
 */

import { ipv4Bytes, ipv4Text } from "../../lib/ipv4.ts";

/** IP protocol numbers. */
export const PROTO = { ICMP: 1, TCP: 6, UDP: 17 } as const;

/** A flow as the flow map keys it (docs/contracts.md). */
export interface FlowKey {
  readonly saddr: string;
  readonly daddr: string;
  readonly sport: number;
  readonly dport: number;
  readonly proto: number;
}

/** A flow map value. */
export interface FlowValue {
  readonly backendAddr: string;
  /** Bit 0 ({@linkcode FLOW_F_PEER}): learned from a peer. */
  readonly flags: number;
  /** CLOCK_MONOTONIC ns of the last packet at tick resolution (coarse clock, read per jiffy). */
  readonly lastSeenNs: bigint;
}

/** flow_value.flags bit: installed by the agent from a peer/Redis. */
export const FLOW_F_PEER = 1;

/** A new-flow ring-buffer event. */
export interface FlowEvent {
  readonly key: FlowKey;
  readonly backendAddr: string;
  readonly serviceId: number;
  readonly tsNs: bigint;
}

/** Sizes of the shared structs, checked against BTF by tests. */
export const SIZES = {
  flow_key: 16,
  flow_value: 16,
  flow_event: 32,
  service_key: 8,
  service_value: 16,
  backend_value: 8,
  lb_config: 16,
  decap_config: 8,
  lb_stats: 32,
} as const;

/** struct flow_key → 16 bytes. */
export function encodeFlowKey(k: FlowKey): Uint8Array {
  const b = new Uint8Array(16);
  const v = new DataView(b.buffer);
  b.set(ipv4Bytes(k.saddr), 0);
  b.set(ipv4Bytes(k.daddr), 4);
  v.setUint16(8, k.sport);
  v.setUint16(10, k.dport);
  b[12] = k.proto;
  return b;
}

/** 16 bytes → struct flow_key. */
export function decodeFlowKey(b: Uint8Array, offset = 0): FlowKey {
  const v = new DataView(b.buffer, b.byteOffset + offset, 16);
  return {
    saddr: ipv4Text(b, offset),
    daddr: ipv4Text(b, offset + 4),
    sport: v.getUint16(8),
    dport: v.getUint16(10),
    proto: v.getUint8(12),
  };
}

/** struct flow_value → 16 bytes (host-endian u32/u64 fields). */
export function encodeFlowValue(f: FlowValue): Uint8Array {
  const b = new Uint8Array(16);
  const v = new DataView(b.buffer);
  b.set(ipv4Bytes(f.backendAddr), 0);
  v.setUint32(4, f.flags, true);
  v.setBigUint64(8, f.lastSeenNs, true);
  return b;
}

/** 16 bytes → struct flow_value. */
export function decodeFlowValue(b: Uint8Array, offset = 0): FlowValue {
  const v = new DataView(b.buffer, b.byteOffset + offset, 16);
  return {
    backendAddr: ipv4Text(b, offset),
    flags: v.getUint32(4, true),
    lastSeenNs: v.getBigUint64(8, true),
  };
}

/** 32 bytes → struct flow_event. */
export function decodeFlowEvent(b: Uint8Array): FlowEvent {
  if (b.length < SIZES.flow_event) {
    throw new RangeError(`Cannot decode flow event: ${b.length} bytes, need 32`);
  }
  const v = new DataView(b.buffer, b.byteOffset, 32);
  return {
    key: decodeFlowKey(b, 0),
    backendAddr: ipv4Text(b, 16),
    serviceId: v.getUint32(20, true),
    tsNs: v.getBigUint64(24, true),
  };
}

/** struct service_key: vip, port, proto. */
export function encodeServiceKey(address: string, port: number, proto: number): Uint8Array {
  const b = new Uint8Array(8);
  b.set(ipv4Bytes(address), 0);
  new DataView(b.buffer).setUint16(4, port);
  b[6] = proto;
  return b;
}

/** 8 bytes → service key parts. */
export function decodeServiceKey(b: Uint8Array): { address: string; port: number; proto: number } {
  return {
    address: ipv4Text(b),
    port: new DataView(b.buffer, b.byteOffset).getUint16(4),
    proto: b[6] ?? 0,
  };
}

/** service_value.flags bit: key flows by client address. */
export const SVC_F_CLIENT_IP = 1;

/** struct service_value fields. */
export interface ServiceValue {
  readonly serviceId: number;
  readonly backendCount: number;
  readonly flags: number;
  readonly maglevSize: number;
}

/** struct service_value → 16 bytes. */
export function encodeServiceValue(s: ServiceValue): Uint8Array {
  const b = new Uint8Array(16);
  const v = new DataView(b.buffer);
  v.setUint32(0, s.serviceId, true);
  v.setUint32(4, s.backendCount, true);
  v.setUint32(8, s.flags, true);
  v.setUint32(12, s.maglevSize, true);
  return b;
}

/** 16 bytes → struct service_value. */
export function decodeServiceValue(b: Uint8Array): ServiceValue {
  const v = new DataView(b.buffer, b.byteOffset, 16);
  return {
    serviceId: v.getUint32(0, true),
    backendCount: v.getUint32(4, true),
    flags: v.getUint32(8, true),
    maglevSize: v.getUint32(12, true),
  };
}

/** struct backend_value → 8 bytes. */
export function encodeBackendValue(address: string, port: number): Uint8Array {
  const b = new Uint8Array(8);
  b.set(ipv4Bytes(address), 0);
  new DataView(b.buffer).setUint16(4, port);
  return b;
}

/** 8 bytes → backend address and port. */
export function decodeBackendValue(b: Uint8Array): { address: string; port: number } {
  return { address: ipv4Text(b), port: new DataView(b.buffer, b.byteOffset).getUint16(4) };
}

/** u32 little-endian (host order on x86) as 4 bytes, for u32 map keys and values. */
export function u32(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n >>> 0, true);
  return b;
}

/** 4 bytes host order → number. */
export function readU32(b: Uint8Array, offset = 0): number {
  return new DataView(b.buffer, b.byteOffset + offset, 4).getUint32(0, true);
}

/** LB node settings (struct lb_config). */
export interface LbConfig {
  /** This LB node's address: the outer source. */
  readonly srcAddr: string;
  /** UDP destination port of encapsulated packets (default 6080). */
  readonly encapPort?: number;
  /** Flow hash seed; must be the same on every LB node. */
  readonly seed?: number;
}

/** struct lb_config → 16 bytes. */
export function encodeLbConfig(cfg: LbConfig): Uint8Array {
  const b = new Uint8Array(16);
  const v = new DataView(b.buffer);
  b.set(ipv4Bytes(cfg.srcAddr), 0);
  v.setUint16(4, cfg.encapPort ?? 6080, true);
  v.setUint32(8, (cfg.seed ?? 0) >>> 0, true);
  return b;
}

/** Backend side settings (struct decap_config). */
export interface DecapConfig {
  readonly encapPort?: number;
  /** MSS to clamp SYNs from local LB IPs to; 0 disables. Default 1500 − 40 − 28 = 1432. */
  readonly mssMax?: number;
}

/** struct decap_config → 8 bytes. */
export function encodeDecapConfig(cfg: DecapConfig): Uint8Array {
  const b = new Uint8Array(8);
  const v = new DataView(b.buffer);
  v.setUint16(0, cfg.encapPort ?? 6080, true);
  v.setUint16(2, cfg.mssMax ?? 1432, true);
  return b;
}

/** Per-CPU struct lb_stats summed over CPUs. */
export interface LbStats {
  readonly packets: bigint;
  readonly bytes: bigint;
  readonly newFlows: bigint;
  readonly drops: bigint;
}

/** Sums a per-CPU lb_stats value (32 bytes per CPU). */
export function sumLbStats(b: Uint8Array): LbStats {
  const v = new DataView(b.buffer, b.byteOffset, b.length);
  let packets = 0n, bytes = 0n, newFlows = 0n, drops = 0n;
  for (let off = 0; off + 32 <= b.length; off += 32) {
    packets += v.getBigUint64(off, true);
    bytes += v.getBigUint64(off + 8, true);
    newFlows += v.getBigUint64(off + 16, true);
    drops += v.getBigUint64(off + 24, true);
  }
  return { packets, bytes, newFlows, drops };
}

/** Sums a per-CPU u64 value. */
export function sumU64(b: Uint8Array): bigint {
  const v = new DataView(b.buffer, b.byteOffset, b.length);
  let s = 0n;
  for (let off = 0; off + 8 <= b.length; off += 8) s += v.getBigUint64(off, true);
  return s;
}

/** enum hf_reason names, by index (bpf/consts.h). */
export const REASONS = [
  "pass_not_ipv4",
  "pass_truncated",
  "pass_not_l4",
  "pass_not_frontend",
  "drop_ip_options",
  "drop_fragment",
  "drop_bad_length",
  "drop_no_backends",
  "drop_no_maglev",
  "drop_maglev_slot_zero",
  "drop_no_backend",
  "drop_no_config",
  "drop_encap",
  "drop_too_big",
  "tx_hit",
  "tx_new",
  "event_lost",
  "pass_icmp",
  "tx_icmp_too_big",
] as const;

/** A reason counter name. */
export type Reason = typeof REASONS[number];

/** enum hf_decap_reason names, by index. */
export const DECAP_REASONS = [
  "decap",
  "not_local",
  "bad_inner",
  "adjust_failed",
  "mss_clamped",
  "mss_ok",
] as const;

/** A decap reason counter name. */
export type DecapReason = typeof DECAP_REASONS[number];
