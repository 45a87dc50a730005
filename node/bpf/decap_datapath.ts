/**
 * The backend side of the datapath: bpf/build/decap_tc.o's decap on tc ingress and MSS clamp on tc
 * egress, in the backend's (pod's) namespace, with the LB IPs it accepts.
 *
 * @module
 */

import { attachTc, type TcAttachment } from "./attach.ts";
import type { BpfMap } from "./map.ts";
import { BpfObject, type BpfProgram } from "./object.ts";
import { type DecapConfig, encodeDecapConfig, u32 } from "./structs.ts";
import { DECAP_REASONS, type DecapReason } from "./consts.ts";
import { countersByName, DEFAULT_OBJECT_DIR, ensureBpffs } from "./datapath.ts";
import { ipv4Bytes, isIpv4 } from "../../lib/ipv4.ts";
import { isIpv6 } from "../../lib/ipv6.ts";
import { encodeVip6Key } from "./structs6.ts";

/** Options for {@linkcode DecapDatapath.open}. */
export interface DecapOptions {
  readonly objectDir?: string;
  /** bpffs directory for this pod's maps; default none (maps live while attached). */
  readonly pinDir?: string | null;
}

/** The backend side: decap on tc ingress, MSS clamp on tc egress, in the pod's namespace. */
export class DecapDatapath implements Disposable {
  readonly object: BpfObject;
  readonly decap: BpfProgram;
  readonly mssClamp: BpfProgram;
  readonly maps: {
    readonly config: BpfMap;
    readonly localVips: BpfMap;
    readonly localVips6: BpfMap;
    readonly stats: BpfMap;
  };

  private constructor(object: BpfObject) {
    this.object = object;
    this.decap = object.program("hf_decap");
    this.mssClamp = object.program("hf_mss_clamp");
    this.maps = {
      config: object.map("hf_decap_cfg"),
      localVips: object.map("hf_local_vips"),
      localVips6: object.map("hf_local_vips6"),
      stats: object.map("hf_decap_stat"),
    };
  }

  /** Loads bpf/build/decap_tc.o. */
  static async open(options: DecapOptions = {}): Promise<DecapDatapath> {
    const pinDir = options.pinDir ?? null;
    if (pinDir !== null) await ensureBpffs(pinDir);
    const object = BpfObject.open(`${options.objectDir ?? DEFAULT_OBJECT_DIR}/decap_tc.o`, {
      pinDir: pinDir ?? undefined,
    });
    return new DecapDatapath(object);
  }

  /** Sets the encap port and MSS clamp (default 6080 and 1432). */
  configure(cfg: DecapConfig = {}): void {
    this.maps.config.update(u32(0), encodeDecapConfig(cfg));
  }

  /**
   * Declares an LB IP present on this namespace's lo: IPv4 in `hf_local_vips`, IPv6 in
   * `hf_local_vips6` (decap takes either inner family from either outer one).
   *
   * @throws {TypeError} naming `address` when it is neither IPv4 nor IPv6 text.
   */
  addLocalVip(address: string): void {
    const [map, key] = this.#vipKey(address);
    map.update(key, u32(1));
  }

  /** Removes an LB IP of either family; true if it was there. */
  removeLocalVip(address: string): boolean {
    const [map, key] = this.#vipKey(address);
    return map.delete(key);
  }

  #vipKey(address: string): [BpfMap, Uint8Array] {
    if (isIpv4(address)) return [this.maps.localVips, ipv4Bytes(address)];
    if (isIpv6(address)) return [this.maps.localVips6, encodeVip6Key(address)];
    throw new TypeError(`Cannot use LB IP "${address}": neither an IPv4 nor an IPv6 address`);
  }

  /** Attaches decap to ingress and the MSS clamp to egress of `ifname`. */
  attach(ifname: string, options: { netns?: string } = {}): [TcAttachment, TcAttachment] {
    return [
      attachTc(this.decap, ifname, { ...options, direction: "ingress" }),
      attachTc(this.mssClamp, ifname, { ...options, direction: "egress", createQdisc: false }),
    ];
  }

  /** Decap/MSS counters summed over CPUs. */
  stats(): Record<DecapReason, bigint> {
    return countersByName(this.maps.stats, DECAP_REASONS);
  }

  /** Closes handles; attached programs keep running. */
  [Symbol.dispose](): void {
    this.object[Symbol.dispose]();
  }
}
