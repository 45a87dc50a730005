/**
 * The compact string forms of flow keys used as Redis fields and process-local identities
 * (docs/contracts.md, node/lb/flows/schema.ts), for both families, and the form of an address flows
 * carry ({@link flowAddress}).
 *
 * @module
 */

import { type AnyFlowKey, type FlowBackend, type FlowKey, isFlowKey6 } from "../../bpf/flow.ts";
import type { FlowKey6 } from "../../bpf/structs6.ts";
import { parseIpv4 } from "../../../lib/ipv4.ts";
import { formatIpv6, ipv6Bytes } from "../../../lib/ipv6.ts";
import { hexDigit } from "../../../lib/bytes.ts";

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

function hex32(n: number): string {
  return HEX[n >>> 24]! + HEX[(n >>> 16) & 255]! + HEX[(n >>> 8) & 255]! + HEX[n & 255]!;
}

function hex16(n: number): string {
  return HEX[(n >>> 8) & 255]! + HEX[n & 255]!;
}

/** IPv6 text → 32 hex digits (its 16 bytes in network order). */
export function ipv6Hex(address: string): string {
  let out = "";
  for (const b of ipv6Bytes(address)) out += HEX[b]!;
  return out;
}

/** 32 hex digits at `text[start]` → RFC 5952 text, or undefined if one is not a hex digit. */
export function ipv6FromHex(text: string, start = 0): string | undefined {
  const b = new Uint8Array(16);
  for (let i = 0; i < 16; i++) {
    const x = hexAt(text, start + 2 * i, 2);
    if (x < 0) return undefined;
    b[i] = x;
  }
  return formatIpv6(b);
}

/** Length of an IPv4 flow field. */
export const FIELD4_LENGTH = 18;
/** Length of an IPv6 flow field. */
export const FIELD6_LENGTH = 42;

/**
 * The Redis field of a flow within its LB IP: saddr, sport(4), dport(4), proto(2) in hex —
 * IPv4: 18 hex digits (saddr 8); IPv6: 42 hex digits (saddr 32, its 16 bytes). The LB IP (daddr)
 * is in the key name, so it is not repeated. Either form ends in the frontend's dport and proto.
 */
export function flowField(key: AnyFlowKey): string {
  if (isFlowKey6(key)) {
    return ipv6Hex(key.saddr) + hex16(key.sport) + hex16(key.dport) + HEX[key.proto & 255]!;
  }
  return hex32(key.saddr) + hex16(key.sport) + hex16(key.dport) + HEX[key.proto & 255]!;
}

/**
 * The number in `text[start, start + digits)` read as hex, or -1 if a character is not a hex
 * digit. Allocation-free (restoring a million flows parses four million of these).
 */
export function hexAt(text: string, start: number, digits: number): number {
  let n = 0;
  for (let i = start; i < start + digits; i++) {
    const d = hexDigit(text.charCodeAt(i));
    if (d < 0) return -1;
    n = n * 16 + d;
  }
  return n;
}

/**
 * Inverse of {@link flowField} for the LB IP `daddr` as {@link flowAddress} gives it: a u32 for
 * an IPv4 LB IP (an 18-digit field), RFC 5952 text for an IPv6 one (a 42-digit field).
 */
export function parseFlowField(field: string, daddr: number): FlowKey;
export function parseFlowField(field: string, daddr: number | string): AnyFlowKey;
export function parseFlowField(field: string, daddr: number | string): AnyFlowKey {
  if (typeof daddr === "string") return parseFlowField6(field, daddr);
  const saddr = hexAt(field, 0, 8);
  const sport = hexAt(field, 8, 4);
  const dport = hexAt(field, 12, 4);
  const proto = hexAt(field, 16, 2);
  if (field.length !== FIELD4_LENGTH || saddr < 0 || sport < 0 || dport < 0 || proto < 0) {
    throw new TypeError(`Cannot parse flow field "${field}": expected 18 hex digits`);
  }
  return { saddr, daddr, sport, dport, proto };
}

function parseFlowField6(field: string, daddr: string): FlowKey6 {
  const saddr = field.length === FIELD6_LENGTH ? ipv6FromHex(field, 0) : undefined;
  const sport = hexAt(field, 32, 4);
  const dport = hexAt(field, 36, 4);
  const proto = hexAt(field, 40, 2);
  if (saddr === undefined || sport < 0 || dport < 0 || proto < 0) {
    throw new TypeError(
      `Cannot parse flow field "${field}" of IPv6 LB IP "${daddr}": expected 42 hex digits`,
    );
  }
  return { saddr, daddr, sport, dport, proto };
}

/** The frontend port and protocol a flow field ends in (either family's form). */
export function fieldFrontend(field: string): { port: number; proto: number } {
  return { port: hexAt(field, field.length - 6, 4), proto: hexAt(field, field.length - 2, 2) };
}

/** A process-local identity of a flow key (LB IP included), for maps and sets. */
export function flowId(key: AnyFlowKey): string {
  if (isFlowKey6(key)) return `${key.daddr}/${flowField(key)}`;
  return hex32(key.daddr) + flowField(key);
}

/**
 * An address as flows carry it — an LB IP as a key's `daddr`, a backend as a value's: a
 * host-order u32 for IPv4 (dotted text), RFC 5952 text for IPv6 (any valid IPv6 text). Throws a
 * `TypeError` for anything else.
 */
export function flowAddress(text: string): number | string {
  if (!text.includes(":")) return parseIpv4(text);
  return formatIpv6(ipv6Bytes(text));
}

/** A backend's Redis form: 8 hex digits (IPv4) or 32 (IPv6), network order. */
export function backendHex(backend: FlowBackend): string {
  return typeof backend === "number" ? hex32(backend >>> 0) : ipv6Hex(backend);
}
