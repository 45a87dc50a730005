/**
 * Flows as the agent sees them: the key and value of the datapath's flow map and its new-flow
 * event (docs/contracts.md), as host-order numbers, with their byte layouts. The one TypeScript
 * home of these structs; the Redis field forms are in node/lb/flows/field.ts.
 *
 * Both families: the flow agent works on {@link AnyFlowKey} — an IPv4 {@link FlowKey} (u32
 * addresses, the hot path, unchanged) or an IPv6 {@link FlowKey6} (RFC 5952 text, structs6.ts).
 * The family is the type of the addresses ({@link isFlowKey6}), so an IPv4 key carries no tag and
 * keeps its shape. A backend ({@link FlowBackend}) is a u32 for IPv4 — whichever the frontend's
 * family — and text for IPv6.
 *
 * @module
 */

import { formatIpv4, parseIpv4 } from "../../lib/ipv4.ts";
import type { FlowKey6 } from "./structs6.ts";

export type { FlowKey6 } from "./structs6.ts";

/** Flow-key mode of a service (docs/contracts.md): the full 5-tuple, or the client address. */
export type KeyMode = "five-tuple" | "client-ip";

/** `flow_value.flags` bit 0: learned from a peer (installed by the agent). */
export const FLOW_F_PEER = 1;

/**
 * `flow_value.flags` bit 1: the datapath put this flow in the flow map while its ring buffer was
 * full, so no new-flow event was sent yet; a later packet of the flow sends it and clears the bit
 * (docs/contracts.md "When a flow is shared"). A local flow (not `FLOW_F_PEER`).
 */
export const FLOW_F_UNSHARED = 2;

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

/** A flow's backend: an IPv4 backend as a host-order u32, an IPv6 one as RFC 5952 text. */
export type FlowBackend = number | string;

/** A flow key of either family: IPv4 (u32 addresses) or IPv6 (text addresses). */
export type AnyFlowKey = FlowKey | FlowKey6;

/** A flow map value of either family's map (an IPv6 frontend's flow may have an IPv4 backend). */
export interface AnyFlowValue {
  readonly backend: FlowBackend;
  /** `FLOW_F_*` bits. */
  readonly flags: number;
  /** Datapath clock (CLOCK_MONOTONIC ns) of the last packet; 0 = never seen on this node. */
  readonly lastSeenNs: number;
}

/** One flow map entry of either family. */
export interface AnyFlowEntry {
  readonly key: AnyFlowKey;
  readonly value: AnyFlowValue;
}

/** A new-flow event of either family's ring buffer (hf_events, hf_events6). */
export interface AnyFlowEvent {
  readonly key: AnyFlowKey;
  readonly backend: FlowBackend;
  readonly serviceId: number;
  readonly tsNs: number;
}

/** True for an IPv6 flow key (its addresses are text). */
export function isFlowKey6(key: AnyFlowKey): key is FlowKey6 {
  return typeof key.saddr === "string";
}

/**
 * A flow's address — a backend, or an LB IP as a key's `daddr` — as text: dotted IPv4 or IPv6
 * text (the Redis key names' and the logs' form).
 */
export function formatFlowAddress(address: number | string): string {
  return typeof address === "number" ? formatIpv4(address) : address;
}

/** Size of `struct flow_key` and of `struct flow_value`. */
export const FLOW_KEY_SIZE = 16;
/** Size of `struct flow_value`. */
export const FLOW_VALUE_SIZE = 16;
/** Size of `struct flow_event`. */
export const FLOW_EVENT_SIZE = 32;

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

/**
 * A readable form for logs: `10.0.0.1:40000->10.0.100.1:80/6`, and for IPv6
 * `[2001:db8::5]:40000->[2001:db8:100::1]:80/6`.
 */
export function describeFlow(key: AnyFlowKey): string {
  if (isFlowKey6(key)) {
    return `[${key.saddr}]:${key.sport}->[${key.daddr}]:${key.dport}/${key.proto}`;
  }
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
