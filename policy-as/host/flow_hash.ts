/**
 * Flow hash in plain TypeScript: the reference the golden vectors are generated from and the
 * baseline the WASM module and the BPF program are checked against. Definition:
 * docs/contracts.md ("Flow hash"), Linux's `jhash_3words` / `jhash_1word`.
 *
 * @module
 */

const JHASH_INITVAL = 0xdeadbeef;

function rol32(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

function jhashFinal(a: number, b: number, c: number): number {
  c = (c ^ b) >>> 0;
  c = (c - rol32(b, 14)) >>> 0;
  a = (a ^ c) >>> 0;
  a = (a - rol32(c, 11)) >>> 0;
  b = (b ^ a) >>> 0;
  b = (b - rol32(a, 25)) >>> 0;
  c = (c ^ b) >>> 0;
  c = (c - rol32(b, 16)) >>> 0;
  a = (a ^ c) >>> 0;
  a = (a - rol32(c, 4)) >>> 0;
  b = (b ^ a) >>> 0;
  b = (b - rol32(a, 14)) >>> 0;
  c = (c ^ b) >>> 0;
  c = (c - rol32(b, 24)) >>> 0;
  return c;
}

/** Linux `jhash_3words(a, b, c, initval)`; every argument is taken as u32, result is u32. */
export function jhash3Words(a: number, b: number, c: number, initval: number): number {
  const iv = (initval + JHASH_INITVAL + (3 << 2)) >>> 0;
  return jhashFinal((a + iv) >>> 0, (b + iv) >>> 0, (c + iv) >>> 0);
}

/** Linux `jhash_1word(a, initval)`; u32 in, u32 out. */
export function jhash1Word(a: number, initval: number): number {
  const iv = (initval + JHASH_INITVAL + (1 << 2)) >>> 0;
  return jhashFinal((a + iv) >>> 0, iv, iv);
}

/** A flow's five-tuple in host order, as the flow hash takes it. */
export interface FlowTuple {
  /** Source IPv4 address as a host-order u32 (`10.0.0.1` is `0x0a000001`). */
  readonly saddr: number;
  /** Destination IPv4 address as a host-order u32. */
  readonly daddr: number;
  readonly sport: number;
  readonly dport: number;
  /** IP protocol number (6 TCP, 17 UDP). */
  readonly proto: number;
}

/**
 * Five-tuple flow hash: `jhash_3words(saddr, daddr, (sport << 16) | dport, seed ^ proto)`.
 *
 * @example
 * ```ts
 * import { flowHashFiveTuple } from "./flow_hash.ts";
 * import { parseIpv4 } from "../../lib/ipv4.ts";
 * const h = flowHashFiveTuple({
 *   saddr: parseIpv4("10.0.0.1"), daddr: parseIpv4("10.0.100.1"),
 *   sport: 40000, dport: 80, proto: 6,
 * }, 0);
 * if ((h >>> 0) !== h) throw new Error("flow hash must be a u32");
 * ```
 */
export function flowHashFiveTuple(t: FlowTuple, seed: number): number {
  const ports = (((t.sport & 0xffff) << 16) | (t.dport & 0xffff)) >>> 0;
  return jhash3Words(t.saddr >>> 0, t.daddr >>> 0, ports, (seed ^ t.proto) >>> 0);
}

/** Client-IP flow hash (pins a client, not a flow): `jhash_1word(saddr, seed)`. */
export function flowHashClientIp(saddr: number, seed: number): number {
  return jhash1Word(saddr >>> 0, seed >>> 0);
}

/** Outer UDP source port for encapsulation: `0xc000 | (flowHash & 0x3fff)`. */
export function encapSourcePort(flowHash: number): number {
  return 0xc000 | (flowHash & 0x3fff);
}
