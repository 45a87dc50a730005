/**
 * The LB node's datapath as the agent drives it: load bpf/build/lb_xdp.o with its maps pinned in
 * bpffs (reused after a restart, so no flow or table is lost) and sized at load, attach XDP,
 * configure, hand out the flow map ({@linkcode BpfFlowTable}) and the control plane's maps
 * ({@linkcode BpfLBMaps}), subscribe to new-flow events, read counters. The backend side is
 * `decap_datapath.ts`.
 *
 * @module
 */

import { attachXdp, logAttach, type XdpAttachment, type XdpMode } from "./attach.ts";
import { BpfMap } from "./map.ts";
import { BpfError, ERRNO } from "./errors.ts";
import { BpfObject, type BpfProgram } from "./object.ts";
import { type RingBufferOptions, RingBufferReader } from "./ringbuf.ts";
import {
  encodeLbConfig,
  type LbConfig,
  type LbStats,
  readU32,
  sumLbStats,
  sumU64,
  u32,
} from "./structs.ts";
import { HF_MAX, type Reason, REASONS } from "./consts.ts";
import { type FlowEvent, readFlowEvent } from "./flow.ts";
import { BpfFlowTable } from "./flow_table.ts";
import { BpfLBMaps } from "./lbmaps_bpf.ts";
import { MAGLEV_TABLES_DIR, MaglevTableStore } from "./_maglev_tables.ts";
import { isBpffs, mkdirP, rmdirPath, unlinkPath } from "./_ffi.ts";
import { MIGRATING_SUFFIX } from "./_pin_migrate.ts";

/** Default bpffs directory for the LB node's pinned maps. */
export const DEFAULT_PIN_DIR = "/sys/fs/bpf/holdfast";

/** Where the build puts objects: bpf/build next to this repository's bpf/ sources. */
export const DEFAULT_OBJECT_DIR = new URL("../../bpf/build/", import.meta.url).pathname;

/** Maps of the LB object that hold state worth keeping across restarts (pinned). */
export const LB_PINNED_MAPS = [
  "hf_services",
  "hf_backends",
  "hf_maglev",
  "hf_flows",
  "hf_config",
  "hf_fe_stats",
  "hf_be_stats",
  "hf_reasons",
  "hf_events",
  // IPv6 (bpf/maps6.h, docs/contracts.md "IPv6")
  "hf_services6",
  "hf_backends6",
  "hf_flows6",
  "hf_config6",
  "hf_events6",
] as const;

/** Options for {@linkcode Datapath.open}. */
export interface DatapathOptions {
  /** Directory holding lb_xdp.o (default bpf/build). */
  readonly objectDir?: string;
  /** bpffs directory for pinned maps (default /sys/fs/bpf/holdfast); `null` = no pinning. */
  readonly pinDir?: string | null;
  /**
   * Services the maps hold: hf_services, hf_maglev and hf_fe_stats are sized to it, service IDs
   * are 1..maxServices-1 (default `HF_MAX.SERVICES` of consts.ts, 4,096).
   */
  readonly maxServices?: number;
  /** Backend IDs are 1..maxBackends-1: hf_backends, hf_be_stats (default 65,536). */
  readonly maxBackends?: number;
  /** Flow table size, hf_flows (default 262,144). */
  readonly maxFlows?: number;
  /**
   * Bytes of each new-flow ring buffer, hf_events and hf_events6: a power of two, at least a page
   * (default `HF_RINGBUF_BYTES`, 8 MiB: ~209k IPv4 / ~104k IPv6 records, a full gathering wait
   * of the agent at 200k new flows/s). Pinned rings keep their size when this is not given.
   */
  readonly ringBytes?: number;
}

/** The maps each size option sizes, and its agent flag (for messages). */
const SIZED_MAPS = {
  maxServices: {
    flag: "--max-services",
    maps: ["hf_services", "hf_maglev", "hf_fe_stats", "hf_services6"],
  },
  maxBackends: { flag: "--max-backends", maps: ["hf_backends", "hf_be_stats", "hf_backends6"] },
  maxFlows: { flag: "--max-flows", maps: ["hf_flows", "hf_flows6"] },
} as const;

/** A per-CPU u64 array's entries summed over CPUs, by name: entry i is `names[i]`. */
export function countersByName<N extends string>(
  map: BpfMap,
  names: readonly N[],
): Record<N, bigint> {
  const out = {} as Record<N, bigint>;
  names.forEach((name, i) => {
    const v = map.lookup(u32(i));
    out[name] = v === null ? 0n : sumU64(v);
  });
  return out;
}

/**
 * The entries of a per-CPU map keyed by a u32 ID, each summed over CPUs by `sum`, read `chunk`
 * at a time; entries `keep` rejects (idle IDs) are left out.
 */
function sumsById<T>(
  map: BpfMap,
  chunk: number,
  sum: (perCpu: Uint8Array) => T,
  keep: (value: T) => boolean,
): Map<number, T> {
  const out = new Map<number, T>();
  const { keys, values, count } = map.lookupBatch(chunk);
  const per = map.userValueSize;
  for (let i = 0; i < count; i++) {
    const value = sum(values.subarray(i * per, (i + 1) * per));
    if (keep(value)) out.set(readU32(keys, i * 4), value);
  }
  return out;
}

/** max_entries of the map pinned at `path`, or null when nothing is pinned there. */
function pinnedMaxEntries(path: string): number | null {
  try {
    using map = BpfMap.fromPinned(path);
    return map.maxEntries;
  } catch (e) {
    if (e instanceof BpfError && e.errno === ERRNO.ENOENT) return null;
    throw e;
  }
}

/**
 * max_entries to set before load. A size not given adopts the pinned map's, so a restart without
 * the flags keeps what is there; a size given that differs from a pinned map's makes the load
 * migrate that map (`_pin_migrate.ts`: a new map filled from the old before the program swap).
 */
export function loadSizes(
  options: Pick<DatapathOptions, "maxServices" | "maxBackends" | "maxFlows" | "ringBytes">,
  pinDir: string | null,
): Record<string, number> {
  const sizes: Record<string, number> = ringSizes(options.ringBytes, pinDir);
  for (const [option, { flag, maps }] of Object.entries(SIZED_MAPS)) {
    const want = options[option as keyof typeof SIZED_MAPS];
    const least = option === "maxFlows" ? 1 : 2;
    if (want !== undefined && (!Number.isInteger(want) || want < least || want > 2 ** 31)) {
      throw new RangeError(
        `Cannot size the datapath with ${option} ${want} (${flag}): must be an integer from ${least}`,
      );
    }
    for (const name of maps) {
      const size = sizeOrPinned(name, want, pinDir);
      if (size !== null) sizes[name] = size;
    }
  }
  return sizes;
}

/** max_entries of map `name`: `want`, else the map pinned in `pinDir`'s; null when neither. */
function sizeOrPinned(
  name: string,
  want: number | undefined,
  pinDir: string | null,
): number | null {
  return want ?? (pinDir === null ? null : pinnedMaxEntries(`${pinDir}/${name}`));
}

/** max_entries of the new-flow rings: `want` (checked) or, if not given, the pinned rings'. */
function ringSizes(want: number | undefined, pinDir: string | null): Record<string, number> {
  if (want !== undefined && (!Number.isInteger(want) || want < 4096 || (want & (want - 1)) !== 0)) {
    throw new RangeError(
      `Cannot size the new-flow rings with ringBytes ${want}: must be a power of two of at least 4096`,
    );
  }
  const sizes: Record<string, number> = {};
  for (const name of ["hf_events", "hf_events6"]) {
    const size = sizeOrPinned(name, want, pinDir);
    if (size !== null) sizes[name] = size;
  }
  return sizes;
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
 * await using sub = dp.subscribe((ev) => console.log(describeFlow(ev.key), ev.backend));
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

  #lbMaps: BpfLBMaps | undefined;

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

  /**
   * Loads the LB object, reusing maps pinned in `pinDir` (creating and pinning missing ones),
   * sized by `maxServices`/`maxBackends`/`maxFlows` (see {@linkcode loadSizes} for pinned maps).
   */
  static async open(options: DatapathOptions = {}): Promise<Datapath> {
    const pinDir = options.pinDir === undefined ? DEFAULT_PIN_DIR : options.pinDir;
    if (pinDir !== null) await ensureBpffs(pinDir);
    const path = `${options.objectDir ?? DEFAULT_OBJECT_DIR}/lb_xdp.o`;
    const maxEntries = loadSizes(options, pinDir);
    try {
      const object = BpfObject.open(path, {
        pinDir: pinDir ?? undefined,
        pinMaps: pinDir === null ? undefined : LB_PINNED_MAPS,
        maxEntries,
        migrate: true,
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
    const services = pinnedMaxEntries(`${pinDir}/hf_maglev`) ?? HF_MAX.SERVICES;
    MaglevTableStore.unpin(`${pinDir}/${MAGLEV_TABLES_DIR}`, services);
    for (const name of LB_PINNED_MAPS) {
      unlinkPath(`${pinDir}/${name}`);
      unlinkPath(`${pinDir}/${name}${MIGRATING_SUFFIX}`); // a migration that never finished
    }
    rmdirPath(pinDir);
  }

  /**
   * Attaches hf_lb on an interface, native mode by default, or replaces the program there
   * atomically (attach.ts), then finishes the maps migrated at load ({@linkcode finishMigrations}).
   */
  attach(
    ifname: string,
    options: { netns?: string; mode?: XdpMode } = {},
  ): XdpAttachment {
    const started = performance.now();
    const a = attachXdp(this.program, ifname, options);
    logAttach(a, "xdp", performance.now() - started);
    this.finishMigrations();
    return a;
  }

  /**
   * Completes the migrations of maps whose pinned layout changed (`_pin_migrate.ts`): call once
   * the old programs are replaced (attach does). Returns the entries carried per map.
   */
  finishMigrations(): Map<string, number> {
    return this.object.migrations?.finish() ?? new Map();
  }

  /** Writes the node settings (outer source address, encap port, seed). */
  configure(cfg: LbConfig): void {
    this.maps.config.update(u32(0), encodeLbConfig(cfg));
  }

  /** The control plane's maps target over these maps (one per datapath; tables pinned in it). */
  lbMaps(): BpfLBMaps {
    const tablesDir = this.pinDir === null ? null : `${this.pinDir}/${MAGLEV_TABLES_DIR}`;
    const v6 = {
      services6: this.object.map("hf_services6"),
      backends6: this.object.map("hf_backends6"),
    };
    return this.#lbMaps ??= new BpfLBMaps({ ...this.maps, ...v6 }, tablesDir);
  }

  /** The flow map as the flow-sync agent's {@linkcode FlowTable}. */
  flowTable(): BpfFlowTable {
    return new BpfFlowTable(this.maps.flows);
  }

  /** Subscribes to new-flow events; the reader runs until closed. */
  subscribe(
    onEvent: (event: FlowEvent) => void,
    options: RingBufferOptions = {},
  ): RingBufferReader {
    const reader = new RingBufferReader(
      this.maps.events,
      (rec) => onEvent(readFlowEvent(new DataView(rec.buffer, rec.byteOffset, rec.byteLength))),
      options,
    );
    reader.start();
    return reader;
  }

  /** Reason counters summed over CPUs. */
  reasons(): Record<Reason, bigint> {
    return countersByName(this.maps.reasons, REASONS);
  }

  /** Per-frontend counters by service ID (slot 0: IDs beyond the array), summed over CPUs. */
  frontendStats(): Map<number, LbStats> {
    const busy = (s: LbStats) => s.packets + s.drops + s.newFlows > 0n;
    return sumsById(this.maps.frontendStats, 1024, sumLbStats, busy);
  }

  /** New flows assigned per backend ID by this node, summed over CPUs. */
  backendNewFlows(): Map<number, bigint> {
    return sumsById(this.maps.backendStats, 8192, sumU64, (n) => n > 0n);
  }

  /** Closes this process's handles; pinned maps and attachments remain. */
  [Symbol.dispose](): void {
    this.#lbMaps?.[Symbol.dispose]();
    this.object[Symbol.dispose]();
  }
}
