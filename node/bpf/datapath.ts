/**
 * The LB node's datapath as the agent drives it: load bpf/build/lb_xdp.o with its maps pinned in
 * bpffs (reused after a restart, so no flow or table is lost), attach XDP, configure, install and
 * read flows, subscribe to new-flow events, read counters. And the backend side
 * ({@linkcode DecapDatapath}): decap on tc ingress, MSS clamp on tc egress.
 *
 * @module
 */

import {
  attachTc,
  attachXdp,
  type TcAttachment,
  type XdpAttachment,
  type XdpMode,
} from "./attach.ts";
import { BpfMap, UPDATE } from "./map.ts";
import { BpfError, ERRNO } from "./errors.ts";
import { BpfObject, type BpfProgram } from "./object.ts";
import { RingBufferReader } from "./ringbuf.ts";
import {
  DECAP_REASONS,
  type DecapConfig,
  type DecapReason,
  decodeFlowEvent,
  decodeFlowKey,
  decodeFlowValue,
  encodeDecapConfig,
  encodeFlowKey,
  encodeFlowValue,
  encodeLbConfig,
  type FlowEvent,
  type FlowKey,
  type FlowValue,
  type LbConfig,
  type LbStats,
  readU32,
  type Reason,
  REASONS,
  sumLbStats,
  sumU64,
  u32,
} from "./structs.ts";
import { BpfLBMaps } from "./lbmaps_bpf.ts";
import { isBpffs, mkdirP, monotonicNs, rmdirPath, unlinkPath } from "./_ffi.ts";
import { ipv4Bytes } from "../../lib/ipv4.ts";

/** Default bpffs directory for the LB node's pinned maps. */
export const DEFAULT_PIN_DIR = "/sys/fs/bpf/holdfast";

/** Where the build puts objects: bpf/build next to this repository's bpf/ sources. */
export const DEFAULT_OBJECT_DIR = new URL("../../bpf/build/", import.meta.url).pathname;

/** Maps of the LB object that hold state worth keeping across restarts (pinned). */
const LB_PINNED_MAPS = [
  "hf_services",
  "hf_backends",
  "hf_maglev",
  "hf_flows",
  "hf_config",
  "hf_fe_stats",
  "hf_be_stats",
  "hf_reasons",
  "hf_events",
] as const;

/** Options for {@linkcode Datapath.open}. */
export interface DatapathOptions {
  /** Directory holding lb_xdp.o (default bpf/build). */
  readonly objectDir?: string;
  /** bpffs directory for pinned maps (default /sys/fs/bpf/holdfast); `null` = no pinning. */
  readonly pinDir?: string | null;
  /** Flow table size (default 262,144; ignored when reusing a pinned table). */
  readonly maxFlows?: number;
}

/**
 * Makes sure `dir` exists on a bpffs mount. Under /sys/fs/bpf, bpffs is mounted there first if
 * missing (as in a fresh `ip netns exec`, which remounts /sys). Any other directory must already
 * be on a bpffs mount (e.g. a per-node mount made by the caller in the root mount namespace, so
 * pins outlive a process started with `ip netns exec`).
 */
export async function ensureBpffs(dir: string): Promise<void> {
  if ((dir === "/sys/fs/bpf" || dir.startsWith("/sys/fs/bpf/")) && !isBpffs("/sys/fs/bpf")) {
    const r = await new Deno.Command("mount", {
      args: ["-t", "bpf", "bpf", "/sys/fs/bpf"],
      stderr: "piped",
    }).output();
    if (!r.success) {
      throw new Error(
        `Cannot mount bpffs at /sys/fs/bpf: ${new TextDecoder().decode(r.stderr).trim()}`,
      );
    }
  }
  mkdirP(dir);
  if (!isBpffs(dir)) {
    throw new Error(
      `Cannot pin maps in "${dir}": it is not on a bpffs mount (mount -t bpf bpf DIR first)`,
    );
  }
}

/**
 * The LB datapath. Dispose closes this process's handles; pinned maps and attached programs stay,
 * so traffic continues while the agent restarts and the next {@linkcode Datapath.open} picks the
 * same maps up.
 *
 * @example
 * ```ts ignore
 * using dp = await Datapath.open({ pinDir: "/sys/fs/bpf/holdfast" });
 * dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 0 });
 * dp.attach("eth0", { netns: "hf-1-lb1" });
 * await using sub = dp.subscribe((ev) => console.log(ev.key, ev.backendAddr));
 * ```
 */
export class Datapath implements Disposable {
  readonly object: BpfObject;
  readonly program: BpfProgram;
  readonly pinDir: string | null;
  /** The maps by role. */
  readonly maps: {
    readonly services: BpfMap;
    readonly backends: BpfMap;
    readonly maglev: BpfMap;
    readonly flows: BpfMap;
    readonly config: BpfMap;
    readonly frontendStats: BpfMap;
    readonly backendStats: BpfMap;
    readonly reasons: BpfMap;
    readonly events: BpfMap;
  };

  private constructor(object: BpfObject, pinDir: string | null) {
    this.object = object;
    this.pinDir = pinDir;
    this.program = object.program("hf_lb");
    this.maps = {
      services: object.map("hf_services"),
      backends: object.map("hf_backends"),
      maglev: object.map("hf_maglev"),
      flows: object.map("hf_flows"),
      config: object.map("hf_config"),
      frontendStats: object.map("hf_fe_stats"),
      backendStats: object.map("hf_be_stats"),
      reasons: object.map("hf_reasons"),
      events: object.map("hf_events"),
    };
  }

  /** Loads the LB object, reusing maps pinned in `pinDir` (creating and pinning missing ones). */
  static async open(options: DatapathOptions = {}): Promise<Datapath> {
    const pinDir = options.pinDir === undefined ? DEFAULT_PIN_DIR : options.pinDir;
    if (pinDir !== null) await ensureBpffs(pinDir);
    const path = `${options.objectDir ?? DEFAULT_OBJECT_DIR}/lb_xdp.o`;
    try {
      const object = BpfObject.open(path, {
        pinDir: pinDir ?? undefined,
        pinMaps: pinDir === null ? undefined : LB_PINNED_MAPS,
        maxEntries: options.maxFlows ? { hf_flows: options.maxFlows } : undefined,
      });
      return new Datapath(object, pinDir);
    } catch (e) {
      if (pinDir !== null && e instanceof BpfError && e.errno === ERRNO.EINVAL) {
        throw new BpfError(
          `Cannot load "${path}" with the maps pinned in "${pinDir}" (pinned by an incompatible version? ` +
            `Datapath.unpin("${pinDir}") resets them, losing flows)`,
          e.errno,
        );
      }
      throw e;
    }
  }

  /**
   * Deletes the pinned maps in `pinDir` (and the directory when empty): the datapath's state is
   * gone for good once no program uses the maps. For tests and decommissioning only.
   */
  static unpin(pinDir: string = DEFAULT_PIN_DIR): void {
    for (const name of LB_PINNED_MAPS) unlinkPath(`${pinDir}/${name}`);
    rmdirPath(pinDir);
  }

  /** Attaches (or atomically replaces) hf_lb on an interface, native mode by default. */
  attach(ifname: string, options: { netns?: string; mode?: XdpMode } = {}): XdpAttachment {
    return attachXdp(this.program, ifname, options);
  }

  /** Writes the node settings (outer source address, encap port, seed). */
  configure(cfg: LbConfig): void {
    this.maps.config.update(u32(0), encodeLbConfig(cfg));
  }

  /** The control plane's maps target over these maps. */
  lbMaps(): BpfLBMaps {
    return new BpfLBMaps(this.maps);
  }

  /** A flow's entry, or null. `lastSeenNs` is CLOCK_MONOTONIC ns of its last packet. */
  lookupFlow(key: FlowKey): FlowValue | null {
    const v = this.maps.flows.lookup(encodeFlowKey(key));
    return v === null ? null : decodeFlowValue(v);
  }

  /**
   * Installs flows (e.g. learned from peers via Redis) in one batch. By default they are marked
   * learned-from-peer and an existing entry is kept (`overwrite: false`), so a local flow's
   * backend never changes under it.
   */
  installFlows(
    flows: ReadonlyArray<{ key: FlowKey; backendAddr: string }>,
    options: { overwrite?: boolean; flags?: number } = {},
  ): number {
    const flags = options.flags ?? 1;
    let installed = 0;
    if (options.overwrite) {
      const keys = new Uint8Array(16 * flows.length);
      const values = new Uint8Array(16 * flows.length);
      flows.forEach((f, i) => {
        keys.set(encodeFlowKey(f.key), i * 16);
        values.set(
          encodeFlowValue({ backendAddr: f.backendAddr, flags, lastSeenNs: monotonicNs() }),
          i * 16,
        );
      });
      return this.maps.flows.updateBatch(keys, values);
    }
    for (const f of flows) {
      try {
        this.maps.flows.update(
          encodeFlowKey(f.key),
          encodeFlowValue({ backendAddr: f.backendAddr, flags, lastSeenNs: monotonicNs() }),
          UPDATE.NOEXIST,
        );
        installed++;
      } catch (e) {
        if ((e as { errno?: number }).errno !== 17 /* EEXIST */) throw e;
      }
    }
    return installed;
  }

  /** Removes a flow; false when absent. */
  deleteFlow(key: FlowKey): boolean {
    return this.maps.flows.delete(encodeFlowKey(key));
  }

  /** All flows, read with a batch lookup. */
  flows(): Array<{ key: FlowKey; value: FlowValue }> {
    const { keys, values, count } = this.maps.flows.lookupBatch();
    const out: Array<{ key: FlowKey; value: FlowValue }> = [];
    for (let i = 0; i < count; i++) {
      out.push({ key: decodeFlowKey(keys, i * 16), value: decodeFlowValue(values, i * 16) });
    }
    return out;
  }

  /** Subscribes to new-flow events; the reader runs until closed. */
  subscribe(
    onEvent: (event: FlowEvent) => void,
    options: { pollMs?: number } = {},
  ): RingBufferReader {
    const reader = new RingBufferReader(
      this.maps.events,
      (rec) => onEvent(decodeFlowEvent(rec)),
      options,
    );
    reader.start();
    return reader;
  }

  /** Reason counters summed over CPUs. */
  reasons(): Record<Reason, bigint> {
    const out = {} as Record<Reason, bigint>;
    REASONS.forEach((name, i) => {
      const v = this.maps.reasons.lookup(u32(i));
      out[name] = v === null ? 0n : sumU64(v);
    });
    return out;
  }

  /** Per-frontend counters by service ID (slot 0: IDs beyond the array), summed over CPUs. */
  frontendStats(): Map<number, LbStats> {
    const out = new Map<number, LbStats>();
    const { keys, values, count } = this.maps.frontendStats.lookupBatch(1024);
    const per = this.maps.frontendStats.userValueSize;
    for (let i = 0; i < count; i++) {
      const s = sumLbStats(values.subarray(i * per, (i + 1) * per));
      if (s.packets || s.drops || s.newFlows) out.set(readU32(keys, i * 4), s);
    }
    return out;
  }

  /** New flows assigned per backend ID by this node, summed over CPUs. */
  backendNewFlows(): Map<number, bigint> {
    const out = new Map<number, bigint>();
    const { keys, values, count } = this.maps.backendStats.lookupBatch(8192);
    const per = this.maps.backendStats.userValueSize;
    for (let i = 0; i < count; i++) {
      const n = sumU64(values.subarray(i * per, (i + 1) * per));
      if (n) out.set(readU32(keys, i * 4), n);
    }
    return out;
  }

  /** Closes this process's handles; pinned maps and attachments remain. */
  [Symbol.dispose](): void {
    this.object[Symbol.dispose]();
  }
}

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
  readonly maps: { readonly config: BpfMap; readonly localVips: BpfMap; readonly stats: BpfMap };

  private constructor(object: BpfObject) {
    this.object = object;
    this.decap = object.program("hf_decap");
    this.mssClamp = object.program("hf_mss_clamp");
    this.maps = {
      config: object.map("hf_decap_cfg"),
      localVips: object.map("hf_local_vips"),
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

  /** Declares an LB IP present on this namespace's lo. */
  addLocalVip(address: string): void {
    this.maps.localVips.update(ipv4Bytes(address), u32(1));
  }

  /** Removes an LB IP. */
  removeLocalVip(address: string): boolean {
    return this.maps.localVips.delete(ipv4Bytes(address));
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
    const out = {} as Record<DecapReason, bigint>;
    DECAP_REASONS.forEach((name, i) => {
      const v = this.maps.stats.lookup(u32(i));
      out[name] = v === null ? 0n : sumU64(v);
    });
    return out;
  }

  /** Closes handles; attached programs keep running. */
  [Symbol.dispose](): void {
    this.object[Symbol.dispose]();
  }
}
