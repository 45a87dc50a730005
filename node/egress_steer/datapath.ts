/**
 * bpf/build/egress_steer_tc.o from Deno: the node side (`hf_steer_encap` on steered client pods'
 * host-side veths, tc ingress) and the NAT pod side (`hf_steer_decap` on its pod-network
 * interface, tc ingress). Maps are not pinned: a restarted agent loads a fresh object, fills it
 * from Redis and replaces the programs on the same tc filters (cls_bpf swaps in one step), so the
 * old maps serve until then.
 *
 * Map layouts (bpf/egress_steer_tc.c): `hf_steer_src` client IPv4 (network order) → slot (u32);
 * `hf_steer_owner[slot]` = owner IPv4 (network order) + epoch (u32, low bits); `hf_steer_dst`
 * LPM key {prefixlen u32 = 32 + len, slot (big-endian u32), destination (network order)} → u8;
 * `hf_steer_self[0]` the NAT pod's address; `hf_steer_sources` LPM {prefixlen u32, address}
 * → u8, the NAT pod's sources; `hf_steer_stat` per-CPU counters.
 *
 * @module
 */

import { attachTc, type TcAttachment, type TcFilter } from "../bpf/attach.ts";
import { BpfObject, type BpfProgram } from "../bpf/object.ts";
import type { BpfMap } from "../bpf/map.ts";
import { countersByName, DEFAULT_OBJECT_DIR } from "../bpf/datapath.ts";
import { u32 } from "../bpf/structs.ts";
import { ipv4Bytes, parseIpv4Cidr } from "../../lib/ipv4.ts";

/** UDP destination port of steered packets (HF_STEER_PORT). */
export const STEER_PORT = 6081;
/** Slots (floating addresses steered on one node), HF_STEER_SLOTS. */
export const STEER_SLOTS = 4096;
/** hf_steer_stat reasons, in enum order. */
export const STEER_REASONS = [
  "encap",
  "no_owner",
  "adjust_failed",
  "decap",
  "bad_inner",
  "fragment",
  "not_source",
  "mss_clamped",
] as const;
/** The tc filter of both programs (handle, priority). */
export const STEER_FILTER: TcFilter = { handle: 0x4853, priority: 0x4853 };

/** The loaded object: programs, maps and typed writes. */
export class SteerDatapath implements Disposable {
  readonly encap: BpfProgram;
  readonly clamp: BpfProgram;
  readonly decap: BpfProgram;
  readonly maps: {
    readonly src: BpfMap;
    readonly owner: BpfMap;
    readonly dst: BpfMap;
    readonly self: BpfMap;
    readonly sources: BpfMap;
    readonly stat: BpfMap;
  };

  private constructor(readonly object: BpfObject) {
    this.encap = object.program("hf_steer_encap");
    this.clamp = object.program("hf_steer_clamp");
    this.decap = object.program("hf_steer_decap");
    this.maps = {
      src: object.map("hf_steer_src"),
      owner: object.map("hf_steer_owner"),
      dst: object.map("hf_steer_dst"),
      self: object.map("hf_steer_self"),
      sources: object.map("hf_steer_sources"),
      stat: object.map("hf_steer_stat"),
    };
  }

  /**
   * Loads the object (from `objectDir`, default bpf/build/). `decapOnly` (a NAT pod) sizes the
   * encap side's maps to one entry.
   */
  static open(objectDir = DEFAULT_OBJECT_DIR, decapOnly = false): SteerDatapath {
    const one = { hf_steer_src: 1, hf_steer_owner: 1, hf_steer_dst: 1 };
    const encapOnly = { hf_steer_sources: 1 };
    return new SteerDatapath(
      BpfObject.open(`${objectDir}/egress_steer_tc.o`, { maxEntries: decapOnly ? one : encapOnly }),
    );
  }

  /** Steers client `ip` (IPv4) through `slot`. */
  setClient(ip: string, slot: number): void {
    this.maps.src.update(ipv4Bytes(ip), u32(slot));
  }

  /** Stops steering client `ip`. */
  deleteClient(ip: string): void {
    this.maps.src.delete(ipv4Bytes(ip));
  }

  /** Points `slot` at owner `ip` (null: none, its clients' packets are dropped). */
  setOwner(slot: number, ip: string | null, epoch = 0): void {
    const v = new Uint8Array(8);
    if (ip !== null) v.set(ipv4Bytes(ip), 0);
    new DataView(v.buffer).setUint32(4, epoch >>> 0, true);
    this.maps.owner.update(u32(slot), v);
  }

  /** Adds (`on`) or removes destination prefix `cidr` of `slot`. */
  setDestination(slot: number, cidr: string, on: boolean): void {
    const c = parseIpv4Cidr(cidr);
    const k = new Uint8Array(12);
    const v = new DataView(k.buffer);
    v.setUint32(0, 32 + c.prefixLength, true);
    v.setUint32(4, slot, false);
    v.setUint32(8, c.first, false);
    if (on) this.maps.dst.update(k, new Uint8Array([1]));
    else this.maps.dst.delete(k);
  }

  /** Decap side: packets to `ip` (this NAT pod's address) and the steer port are decapsulated. */
  setSelf(ip: string): void {
    this.maps.self.update(u32(0), ipv4Bytes(ip));
  }

  /** Decap side: inner sources in `cidr` are decapsulated (others dropped). */
  addSource(cidr: string): void {
    const c = parseIpv4Cidr(cidr);
    const k = new Uint8Array(8);
    const v = new DataView(k.buffer);
    v.setUint32(0, c.prefixLength, true);
    v.setUint32(4, c.first, false);
    this.maps.sources.update(k, new Uint8Array([1]));
  }

  /** Attaches a program on tc `direction` of `ifname` (in `netns`), replacing an earlier one. */
  attach(
    prog: BpfProgram,
    ifname: string,
    netns?: string,
    direction: "ingress" | "egress" = "ingress",
  ): TcAttachment {
    return attachTc(prog, ifname, {
      direction,
      filter: STEER_FILTER,
      ...(netns ? { netns } : {}),
    });
  }

  /** The counters by reason. */
  stats(): Record<(typeof STEER_REASONS)[number], bigint> {
    return countersByName(this.maps.stat, STEER_REASONS);
  }

  [Symbol.dispose](): void {
    this.object[Symbol.dispose]();
  }
}
