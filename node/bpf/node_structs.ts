/**
 * Byte layouts of bpf/node_maps.h (the node side, docs/backends.md) in TypeScript: the frontend a
 * local pod serves (`struct node_svc_key[6]` → `struct node_svc_value`) and the per-flow reverse
 * translations (`struct node_flow_key[6]` → `struct node_flow_value[6]`). Addresses are text of
 * either family (the family picks the struct); ports network order in the bytes, times host order.
 *
 * @module
 */

import { formatIpv4, ipv4Bytes, isIpv4 } from "../../lib/ipv4.ts";
import { formatIpv6, ipv6Bytes } from "../../lib/ipv6.ts";

/** Sizes of the node structs (tests/bpf/node_fixtures_test.ts checks them against the maps). */
export const NODE_SIZES = {
  node_svc_key: 12,
  node_svc_key6: 36,
  node_svc_value: 4,
  node_flow_key: 16,
  node_flow_value: 16,
  node_flow_key6: 40,
  node_flow_value6: 32,
} as const;

/** A frontend served by a local pod: packets to `vip:port/proto` reach `pod:targetPort`. */
export interface PodFrontend {
  readonly pod: string;
  readonly vip: string;
  readonly port: number;
  readonly proto: number;
  readonly targetPort: number;
}

/** A recorded flow: the pod's replies `pod:podPort → client:clientPort` leave from `vip:port`. */
export interface NodeFlow {
  readonly pod: string;
  readonly client: string;
  readonly podPort: number;
  readonly clientPort: number;
  readonly proto: number;
  readonly vip: string;
  readonly port: number;
  readonly lastSeenNs: bigint;
}

/** True when the pod's address is IPv4 (its entries live in the IPv4 maps). */
export function isFamily4(pod: string): boolean {
  return isIpv4(pod);
}

function addrBytes(text: string, v4: boolean): Uint8Array {
  return v4 ? ipv4Bytes(text) : ipv6Bytes(text);
}

function addrText(b: Uint8Array, offset: number, v4: boolean): string {
  return v4
    ? formatIpv4(new DataView(b.buffer, b.byteOffset).getUint32(offset))
    : formatIpv6(b, offset);
}

/** struct node_svc_key or node_svc_key6 (by the pod's family; the LB IP must be the same). */
export function encodeNodeSvcKey(f: Omit<PodFrontend, "targetPort">): Uint8Array {
  const v4 = isIpv4(f.pod);
  if (v4 !== isIpv4(f.vip)) {
    throw new Error(`Cannot map LB IP ${f.vip} to pod ${f.pod}: the families differ`);
  }
  const n = v4 ? 4 : 16;
  const b = new Uint8Array(v4 ? NODE_SIZES.node_svc_key : NODE_SIZES.node_svc_key6);
  b.set(addrBytes(f.pod, v4), 0);
  b.set(addrBytes(f.vip, v4), n);
  new DataView(b.buffer).setUint16(2 * n, f.port);
  b[2 * n + 2] = f.proto;
  return b;
}

/** Decodes a node_svc_key[6] and its value. */
export function decodeNodeSvc(key: Uint8Array, value: Uint8Array): PodFrontend {
  const v4 = key.length === NODE_SIZES.node_svc_key;
  const n = v4 ? 4 : 16;
  const dv = new DataView(key.buffer, key.byteOffset, key.length);
  return {
    pod: addrText(key, 0, v4),
    vip: addrText(key, n, v4),
    port: dv.getUint16(2 * n),
    proto: key[2 * n + 2]!,
    targetPort: new DataView(value.buffer, value.byteOffset).getUint16(0),
  };
}

/** struct node_svc_value. */
export function encodeNodeSvcValue(targetPort: number): Uint8Array {
  const b = new Uint8Array(NODE_SIZES.node_svc_value);
  new DataView(b.buffer).setUint16(0, targetPort);
  return b;
}

/** Decodes a node_flow_key[6] and its value. */
export function decodeNodeFlow(key: Uint8Array, value: Uint8Array): NodeFlow {
  const v4 = key.length === NODE_SIZES.node_flow_key;
  const n = v4 ? 4 : 16;
  const k = new DataView(key.buffer, key.byteOffset, key.length);
  const v = new DataView(value.buffer, value.byteOffset, value.length);
  return {
    pod: addrText(key, 0, v4),
    client: addrText(key, n, v4),
    podPort: k.getUint16(2 * n),
    clientPort: k.getUint16(2 * n + 2),
    proto: key[2 * n + 4]!,
    vip: addrText(value, 0, v4),
    port: v.getUint16(n),
    lastSeenNs: v.getBigUint64(v4 ? 8 : 24, true),
  };
}

/** The pod address of a node_flow_key[6] or node_svc_key[6] (both start with it). */
export function podOfKey(key: Uint8Array, v4: boolean): string {
  return addrText(key, 0, v4);
}
