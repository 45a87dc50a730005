/**
 * Byte layouts of bpf/structs.h in TypeScript for services, backends, node settings and
 * counters: encoders and decoders, pure functions unit-tested without a kernel. The flow structs
 * (key, value, new-flow event) are in flow.ts; the numbers of bpf/consts.h in consts.ts.
 *
 * @module
 */

import { ipv4Bytes, ipv4Text } from "../../lib/ipv4.ts";
import { HF_ENCAP_PORT_DEFAULT } from "./consts.ts";

/**
 * Version of the pinned BPF maps: key and value layouts (here, flow.ts, structs6.ts,
 * node_structs.ts; bpf/structs.h, structs6.h), map types, flags and default sizes (bpf/maps.h,
 * maps6.h, node_maps.h) of the maps `datapath.ts` and `node_datapath.ts` pin (docs/contracts.md
 * "Format versions"). v1 is the first. Pins of another layout are migrated when the object is
 * loaded over them (`_pin_migrate.ts`: a new map filled from the old one); a changed key size or
 * map type stops the agent with an error naming the map. Pins from before v1 whose only
 * difference is `hf_maglev`'s template flags or smaller rings are taken (`_maglev_tables.ts`,
 * `datapath.ts`).
 */
export const BPF_MAPS_VERSION = 1;

/** Sizes of the shared structs other than the flow structs (those are in flow.ts). */
export const SIZES = {
  service_key: 8,
  service_value: 16,
  backend_value: 8,
  lb_config: 16,
  decap_config: 8,
  lb_stats: 32,
} as const;

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
  /** New-flow events (flows shared through Redis) per second per CPU; default 0 = the datapath's
   * `HF_EVENT_BUDGET_DEFAULT`. Flows over it are forwarded but not shared (yet). */
  readonly eventBudget?: number;
}

/** struct lb_config → 16 bytes. */
export function encodeLbConfig(cfg: LbConfig): Uint8Array {
  const b = new Uint8Array(16);
  const v = new DataView(b.buffer);
  b.set(ipv4Bytes(cfg.srcAddr), 0);
  v.setUint16(4, cfg.encapPort ?? HF_ENCAP_PORT_DEFAULT, true);
  v.setUint32(8, (cfg.seed ?? 0) >>> 0, true);
  v.setUint32(12, (cfg.eventBudget ?? 0) >>> 0, true);
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
  v.setUint16(0, cfg.encapPort ?? HF_ENCAP_PORT_DEFAULT, true);
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
