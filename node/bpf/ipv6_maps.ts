/**
 * The IPv6 maps of a loaded LB or decap object (bpf/maps6.h, docs/contracts.md "IPv6") behind a
 * typed surface: the node's IPv6 source address, IPv6 frontends and backends, the IPv6 flow map
 * and its new-flow events (also in the flow agent's forms: `flowTable`, `subscribeAgent`); on the
 * backend side, IPv6 LB IPs. What the control plane and the flow
 * agent build the IPv6 side on; the byte layouts are structs6.ts's.
 *
 * @example
 * ```ts ignore
 * import { Datapath, Ipv6Maps } from "./mod.ts";
 * using dp = await Datapath.open();
 * const v6 = new Ipv6Maps(dp.object);
 * v6.configure("2001:db8:1::2");
 * v6.updateBackend(3, "2001:db8:2::3", 80);
 * v6.updateService({ address: "2001:db8:100::1", port: 80, protocol: "TCP" },
 *   { serviceId: 7, backendCount: 1, flags: 0, maglevSize: 251 });
 * ```
 *
 * @module
 */

import type { BpfObject } from "./object.ts";
import { type RingBufferOptions, RingBufferReader } from "./ringbuf.ts";
import { encodeServiceValue, type ServiceValue, u32 } from "./structs.ts";
import {
  decodeFlowEvent6,
  decodeFlowKey6,
  decodeFlowValue6,
  encodeBackendValue6,
  encodeFlowKey6,
  encodeFlowValue6,
  encodeLbConfig6,
  encodeServiceKey6,
  encodeVip6Key,
  type FlowEvent6,
  type FlowKey6,
  type FlowValue6,
  readFlowEvent6,
  SIZES6,
} from "./structs6.ts";
import { PROTO } from "./consts.ts";
import type { AnyFlowEvent } from "./flow.ts";
import { BpfFlowTable6 } from "./flow_table.ts";

/** An IPv6 frontend as packets address it. */
export interface Frontend6 {
  readonly address: string;
  readonly port: number;
  readonly protocol: "TCP" | "UDP";
}

function serviceKey(f: Frontend6): Uint8Array {
  return encodeServiceKey6(f.address, f.port, f.protocol === "TCP" ? PROTO.TCP : PROTO.UDP);
}

/** The IPv6 maps of an LB object (`lb_xdp.o`, as `Datapath.object`). */
export class Ipv6Maps {
  readonly #o: BpfObject;

  constructor(object: BpfObject) {
    this.#o = object;
  }

  /** Sets this node's IPv6 address, the outer source to IPv6 backends ("::" = unset). */
  configure(srcAddr: string): void {
    this.#o.map("hf_config6").update(u32(0), encodeLbConfig6(srcAddr));
  }

  /** Adds or replaces an IPv6 frontend; the value is the same as an IPv4 frontend's. */
  updateService(frontend: Frontend6, value: ServiceValue): void {
    this.#o.map("hf_services6").update(serviceKey(frontend), encodeServiceValue(value));
  }

  /** Removes an IPv6 frontend; true if it existed. */
  deleteService(frontend: Frontend6): boolean {
    return this.#o.map("hf_services6").delete(serviceKey(frontend));
  }

  /** Sets backend `id` (the ID space of hf_backends) to an IPv6 address. */
  updateBackend(id: number, address: string, port: number): void {
    if (/^[:0]*$/.test(address)) {
      throw new RangeError(
        `Cannot store IPv6 backend ${id} with address "${address}": "::" means none`,
      );
    }
    this.#o.map("hf_backends6").update(u32(id), encodeBackendValue6(address, port));
  }

  /** Clears backend `id`'s IPv6 address (an array entry: all zero is "none"). */
  deleteBackend(id: number): void {
    this.#o.map("hf_backends6").update(u32(id), new Uint8Array(SIZES6.backend_value6));
  }

  /** The IPv6 flow map entry for `key`, or undefined. */
  getFlow(key: FlowKey6): FlowValue6 | undefined {
    const v = this.#o.map("hf_flows6").lookup(encodeFlowKey6(key));
    return v === null ? undefined : decodeFlowValue6(v);
  }

  /** Inserts or replaces an IPv6 flow (e.g. learned from a peer: flags FLOW_F_PEER). */
  putFlow(key: FlowKey6, value: FlowValue6): void {
    this.#o.map("hf_flows6").update(encodeFlowKey6(key), encodeFlowValue6(value));
  }

  /** Removes an IPv6 flow; true if it existed. */
  deleteFlow(key: FlowKey6): boolean {
    return this.#o.map("hf_flows6").delete(encodeFlowKey6(key));
  }

  /** Every IPv6 flow, in no particular order. */
  *flows(): Iterable<{ key: FlowKey6; value: FlowValue6 }> {
    for (const [k, v] of this.#o.map("hf_flows6").entries()) {
      yield { key: decodeFlowKey6(k), value: decodeFlowValue6(v) };
    }
  }

  /**
   * The IPv6 flow map as a flow table of the flow agent (an IPv4 backend as a u32); pair it with
   * the IPv4 one in a `DualFlowTable`.
   */
  flowTable(): BpfFlowTable6 {
    return new BpfFlowTable6(this.#o.map("hf_flows6"));
  }

  /**
   * Subscribes to IPv6 new-flow events (hf_events6) as the flow agent takes them (`AnyFlowEvent`:
   * an IPv4 backend as a u32); the reader runs until closed.
   */
  subscribeAgent(
    onEvent: (event: AnyFlowEvent) => void,
    options: RingBufferOptions = {},
  ): RingBufferReader {
    return this.#read((rec) => onEvent(readFlowEvent6(rec)), options);
  }

  /** Subscribes to IPv6 new-flow events (hf_events6); the reader runs until closed. */
  subscribe(
    onEvent: (event: FlowEvent6) => void,
    options: RingBufferOptions = {},
  ): RingBufferReader {
    return this.#read((rec) => onEvent(decodeFlowEvent6(rec)), options);
  }

  #read(onRecord: (rec: Uint8Array) => void, options: RingBufferOptions): RingBufferReader {
    const reader = new RingBufferReader(this.#o.map("hf_events6"), onRecord, options);
    reader.start();
    return reader;
  }
}

/** Declares an IPv6 LB IP present on a backend namespace's lo (decap object, hf_local_vips6). */
export function addLocalVip6(decapObject: BpfObject, address: string): void {
  decapObject.map("hf_local_vips6").update(encodeVip6Key(address), u32(1));
}

/** Removes an IPv6 LB IP from a decap object; true if it was there. */
export function removeLocalVip6(decapObject: BpfObject, address: string): boolean {
  return decapObject.map("hf_local_vips6").delete(encodeVip6Key(address));
}
