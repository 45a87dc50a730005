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

/** Linux `__jhash_mix(a, b, c)` on u32s; returns the mixed [a, b, c]. */
function jhashMix(a: number, b: number, c: number): [number, number, number] {
  a = ((a - c) ^ rol32(c, 4)) >>> 0;
  c = (c + b) >>> 0;
  b = ((b - a) ^ rol32(a, 6)) >>> 0;
  a = (a + c) >>> 0;
  c = ((c - b) ^ rol32(b, 8)) >>> 0;
  b = (b + a) >>> 0;
  a = ((a - c) ^ rol32(c, 16)) >>> 0;
  c = (c + b) >>> 0;
  b = ((b - a) ^ rol32(a, 19)) >>> 0;
  a = (a + c) >>> 0;
  c = ((c - b) ^ rol32(b, 4)) >>> 0;
  b = (b + a) >>> 0;
  return [a, b, c];
}

/** Linux `jhash2(k, k.length, initval)` over u32 words; u32 out. */
export function jhash2(k: readonly number[], initval: number): number {
  let a = (JHASH_INITVAL + (k.length << 2) + initval) >>> 0;
  let b = a, c = a;
  let i = 0;
  for (; k.length - i > 3; i += 3) {
    [a, b, c] = jhashMix((a + k[i]!) >>> 0, (b + k[i + 1]!) >>> 0, (c + k[i + 2]!) >>> 0);
  }
  const rest = k.length - i;
  if (rest === 0) return c;
  if (rest === 3) c = (c + k[i + 2]!) >>> 0;
  if (rest >= 2) b = (b + k[i + 1]!) >>> 0;
  a = (a + k[i]!) >>> 0;
  return jhashFinal(a, b, c);
}

/** An IPv6 flow's five-tuple: addresses as four host-order u32 words (`lib/ipv6.ts` ipv6Words). */
export interface FlowTuple6 {
  readonly saddr: readonly [number, number, number, number];
  readonly daddr: readonly [number, number, number, number];
  readonly sport: number;
  readonly dport: number;
  readonly proto: number;
}

/**
 * IPv6 five-tuple flow hash: `jhash2([saddr…4, daddr…4, (sport << 16) | dport, proto], seed)`.
 *
 * @example
 * ```ts
 * import { flowHash6FiveTuple } from "./flow_hash.ts";
 * import { ipv6Words } from "../../lib/ipv6.ts";
 * const h = flowHash6FiveTuple({
 *   saddr: ipv6Words("2001:db8::1"), daddr: ipv6Words("2001:db8:100::1"),
 *   sport: 40000, dport: 80, proto: 6,
 * }, 0);
 * if ((h >>> 0) !== h) throw new Error("flow hash must be a u32");
 * ```
 */
export function flowHash6FiveTuple(t: FlowTuple6, seed: number): number {
  const ports = (((t.sport & 0xffff) << 16) | (t.dport & 0xffff)) >>> 0;
  return jhash2([...t.saddr, ...t.daddr, ports, t.proto >>> 0], seed >>> 0);
}

/** IPv6 client-IP flow hash: `jhash2(saddr's 4 words, seed)`. */
export function flowHash6ClientIp(saddr: readonly number[], seed: number): number {
  return jhash2(saddr, seed >>> 0);
}
