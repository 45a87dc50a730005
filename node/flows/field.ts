/**
 * The compact string forms of flow keys used as Redis fields and process-local identities
 * (docs/contracts.md, node/flows/schema.ts).
 *
 * @module
 */

import type { FlowKey } from "../bpf/flow.ts";

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
