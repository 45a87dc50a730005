/**
 * Flows as the agent sees them: the key and value of the datapath's flow map and its new-flow
 * event (docs/contracts.md), as host-order numbers, with their byte layouts and the compact
 * string forms used as Redis fields.
 *
 * @module
 */

/** Flow-key mode of a service (docs/contracts.md): the full 5-tuple, or the client address. */
export type KeyMode = "five-tuple" | "client-ip";

/** `flow_value.flags` bit 0: learned from a peer (installed by the agent). */
export const FLOW_F_PEER = 1;

/** A flow map key; addresses are host-order u32 (`10.0.0.1` is `0x0a000001`). */
export interface FlowKey {
  readonly saddr: number;
  readonly daddr: number;
  /** 0 in client-ip mode. */
  readonly sport: number;
  readonly dport: number;
  readonly proto: number;
}

/** A flow map value. */
export interface FlowValue {
  /** Backend address, host-order u32. */
  readonly backend: number;
  /** `FLOW_F_*` bits. */
  readonly flags: number;
  /** Datapath clock (CLOCK_MONOTONIC ns) of the last packet; 0 = never seen on this node. */
  readonly lastSeenNs: number;
}

/** One flow map entry. */
export interface FlowEntry {
  readonly key: FlowKey;
  readonly value: FlowValue;
}

/** A new-flow event from the datapath's ring buffer (`struct flow_event`). */
export interface FlowEvent {
  readonly key: FlowKey;
  readonly backend: number;
  readonly serviceId: number;
  readonly tsNs: number;
}

/** Size of `struct flow_key` and of `struct flow_value`. */
export const FLOW_KEY_SIZE = 16;
/** Size of `struct flow_value`. */
export const FLOW_VALUE_SIZE = 16;
/** Size of `struct flow_event`. */
export const FLOW_EVENT_SIZE = 32;

/** Parses dotted IPv4 into a host-order u32. */
export function parseIpv4(text: string): number {
  const parts = text.split(".");
  if (parts.length !== 4) throw new TypeError(`Cannot parse IPv4 address "${text}"`);
  let n = 0;
  for (const p of parts) {
    const b = Number(p);
    if (!/^\d{1,3}$/.test(p) || b > 255) throw new TypeError(`Cannot parse IPv4 address "${text}"`);
    n = n * 256 + b;
  }
  return n;
}

/** Formats a host-order u32 as dotted IPv4. */
export function formatIpv4(n: number): string {
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

/** Builds a flow key in `mode`: client-ip mode zeroes the source port. */
export function makeFlowKey(
  tuple: {
    saddr: string | number;
    daddr: string | number;
    sport: number;
    dport: number;
    proto: number;
  },
  mode: KeyMode = "five-tuple",
): FlowKey {
  const addr = (a: string | number) => typeof a === "string" ? parseIpv4(a) : a >>> 0;
  return {
    saddr: addr(tuple.saddr),
    daddr: addr(tuple.daddr),
    sport: mode === "client-ip" ? 0 : tuple.sport,
    dport: tuple.dport,
    proto: tuple.proto,
  };
}

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

function hex32(n: number): string {
  return HEX[n >>> 24]! + HEX[(n >>> 16) & 255]! + HEX[(n >>> 8) & 255]! + HEX[n & 255]!;
}

function hex16(n: number): string {
  return HEX[(n >>> 8) & 255]! + HEX[n & 255]!;
}

/**
 * The Redis field of a flow within its LB IP: 18 hex digits, saddr(8) sport(4) dport(4)
 * proto(2). The LB IP (daddr) is in the key name, so it is not repeated.
 */
export function flowField(key: FlowKey): string {
  return hex32(key.saddr) + hex16(key.sport) + hex16(key.dport) + HEX[key.proto & 255]!;
}

const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX_VALUE[48 + i] = i;
for (let i = 0; i < 6; i++) HEX_VALUE[97 + i] = HEX_VALUE[65 + i] = 10 + i;

/**
 * The number in `text[start, start + digits)` read as hex, or -1 if a character is not a hex
 * digit. Allocation-free (restoring a million flows parses four million of these).
 */
export function hexAt(text: string, start: number, digits: number): number {
  let n = 0;
  for (let i = start; i < start + digits; i++) {
    const d = HEX_VALUE[text.charCodeAt(i)] ?? -1;
    if (d < 0) return -1;
    n = n * 16 + d;
  }
  return n;
}

/** Inverse of {@link flowField} for the LB IP `daddr`. */
export function parseFlowField(field: string, daddr: number): FlowKey {
  const saddr = hexAt(field, 0, 8);
  const sport = hexAt(field, 8, 4);
  const dport = hexAt(field, 12, 4);
  const proto = hexAt(field, 16, 2);
  if (field.length !== 18 || saddr < 0 || sport < 0 || dport < 0 || proto < 0) {
    throw new TypeError(`Cannot parse flow field "${field}": expected 18 hex digits`);
  }
  return { saddr, daddr, sport, dport, proto };
}

/** A process-local identity of a flow key (LB IP included), for maps and sets. */
export function flowId(key: FlowKey): string {
  return hex32(key.daddr) + flowField(key);
}

/** A readable form for logs: `10.0.0.1:40000->10.0.100.1:80/6`. */
export function describeFlow(key: FlowKey): string {
  return `${formatIpv4(key.saddr)}:${key.sport}->${
    formatIpv4(key.daddr)
  }:${key.dport}/${key.proto}`;
}

/** Writes `struct flow_key` (network byte order) into `view` at `offset`. */
export function writeFlowKey(view: DataView, offset: number, key: FlowKey): void {
  view.setUint32(offset, key.saddr);
  view.setUint32(offset + 4, key.daddr);
  view.setUint16(offset + 8, key.sport);
  view.setUint16(offset + 10, key.dport);
  view.setUint8(offset + 12, key.proto);
  view.setUint8(offset + 13, 0);
  view.setUint16(offset + 14, 0);
}

/** Reads `struct flow_key` from `view` at `offset`. */
export function readFlowKey(view: DataView, offset: number): FlowKey {
  return {
    saddr: view.getUint32(offset),
    daddr: view.getUint32(offset + 4),
    sport: view.getUint16(offset + 8),
    dport: view.getUint16(offset + 10),
    proto: view.getUint8(offset + 12),
  };
}

/** Writes `struct flow_value` into `view` at `offset` (flags and time in host byte order). */
export function writeFlowValue(view: DataView, offset: number, value: FlowValue): void {
  view.setUint32(offset, value.backend);
  view.setUint32(offset + 4, value.flags, true);
  view.setBigUint64(offset + 8, BigInt(Math.max(0, Math.trunc(value.lastSeenNs))), true);
}

/** Reads `struct flow_value` from `view` at `offset`. */
export function readFlowValue(view: DataView, offset: number): FlowValue {
  return {
    backend: view.getUint32(offset),
    flags: view.getUint32(offset + 4, true),
    lastSeenNs: Number(view.getBigUint64(offset + 8, true)),
  };
}

/** Reads `struct flow_event` (32 bytes) from `view` at `offset`. */
export function readFlowEvent(view: DataView, offset = 0): FlowEvent {
  if (view.byteLength - offset < FLOW_EVENT_SIZE) {
    throw new RangeError(
      `Cannot read flow event: ${view.byteLength - offset} bytes, need ${FLOW_EVENT_SIZE}`,
    );
  }
  return {
    key: readFlowKey(view, offset),
    backend: view.getUint32(offset + 16),
    serviceId: view.getUint32(offset + 20, true),
    tsNs: Number(view.getBigUint64(offset + 24, true)),
  };
}
