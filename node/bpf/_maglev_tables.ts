/**
 * The Maglev tables behind hf_maglev: inner u32 arrays of a map-in-map, one per service ID. Each
 * is pinned in bpffs at `DIR/<service ID>` (DIR = `hf_maglev_tables` beside the other pins), so
 * a restarted agent reopens it by path (BPF_OBJ_GET: file access only) instead of by the ID the
 * outer map holds (BPF_MAP_GET_FD_BY_ID: CAP_SYS_ADMIN). Service IDs are below hf_maglev's
 * max_entries (`--max-services`), so that bounds the pins; deleting a table unpins it.
 *
 * A pin counts only while its map's ID is the one hf_maglev holds (a crash between the two
 * writes leaves a stale pin, replaced on the next write). A table without a valid pin (pinned by
 * a version that did not pin tables, or that crash) is opened by ID when the kernel permits it
 * (CAP_SYS_ADMIN) and pinned on the spot; when it does not, the table is reported unreadable
 * and left out of the dump, so the reconciler writes it again (a table is rebuilt from the
 * backends' addresses: the same slots, whatever IDs the backends get). Without a pin directory
 * (`pinDir: null`) this process keeps the tables' descriptors instead.
 *
 * Tables are written one at a time (`write`) or staged and committed together (`stage`,
 * `commit`): an update of a map of maps from user space waits for an RCU grace period
 * (`synchronize_rcu`, ~11 ms here), once per BPF_MAP_UPDATE_BATCH as for a single update.
 *
 * A new table is memory-mapped (BPF_F_MMAPABLE) and filled by a copy (`map_mmap.ts`), not by an
 * update syscall of all its slots. The kernel takes an inner map only if its flags equal those of
 * hf_maglev's template (bpf_map_meta_equal), and a hf_maglev pinned by a version before mmapable
 * tables has a template without the flag: before its first table, a store tries the flag once on
 * slot 0 (no service has ID 0; put in and taken out: two RCU waits, ~24 ms once a process) and,
 * refused, creates its tables without it and fills them by BPF_MAP_UPDATE_BATCH as that version
 * did (logged). Tables are read back the way they were made. Once hf_maglev is pinned anew
 * (`Datapath.unpin`), tables are mmapable.
 *
 * @module
 */

import { log } from "../../lib/log.ts";
import { mkdirP, rmdirPath, unlinkPath } from "./_ffi.ts";
import { BpfError, ERRNO } from "./errors.ts";
import { BPF_F_INNER_MAP, BPF_F_MMAPABLE, BpfMap, MAP_TYPE } from "./map.ts";
import { readU32Values, writeU32Values } from "./map_mmap.ts";
import { readU32, u32 } from "./structs.ts";

/** The directory of the Maglev table pins inside a datapath's pin directory. */
export const MAGLEV_TABLES_DIR = "hf_maglev_tables";

const tablesLog = log.with({ component: "bpf", map: "hf_maglev" });

/** What {@linkcode MaglevTableStore.readAll} found. */
export interface MaglevTablesRead {
  /** Service ID → its table, ascending by ID. */
  readonly tables: Array<readonly [number, Uint32Array]>;
  /** Service IDs whose table hf_maglev holds but this process may not open. */
  readonly unreadable: number[];
}

/** Writes, reads and deletes the inner tables of hf_maglev, pinned under `dir` unless null. */
export class MaglevTableStore implements Disposable {
  readonly #outer: BpfMap;
  readonly #dir: string | null;
  /** Unpinned mode only: the tables this process wrote, by service ID. */
  readonly #handles = new Map<number, BpfMap>();
  /** Tables built and not swapped in yet (`stage`), by service ID. */
  readonly #staged = new Map<number, BpfMap>();
  /** Flags of the tables this store creates, once known (`#tableFlags`). */
  #flags: number | undefined;
  /** Empty tables created ahead (off this thread) for the next `stage`s, and their size. */
  #spares: BpfMap[] = [];
  #sparesM = 0;
  /** Creations of spares under way; between a commit and the next stage, spares are not kept. */
  #creating = 0;
  #staging = false;

  /**
   * `dir` is created if missing; pins there whose service ID has no entry in `outer` (left by a
   * crash between the two writes) are removed.
   */
  constructor(outer: BpfMap, dir: string | null) {
    this.#outer = outer;
    this.#dir = dir;
    if (dir === null) return;
    mkdirP(dir);
    const live = new Set(this.serviceIds());
    let removed = 0;
    for (let sid = 1; sid < outer.maxEntries; sid++) {
      if (!live.has(sid) && unlinkPath(this.#path(sid))) removed++;
    }
    if (removed > 0) tablesLog.info("stale Maglev table pins removed", { dir, removed });
  }

  #path(serviceId: number): string {
    return `${this.#dir}/${serviceId}`;
  }

  /** The spec of a table of `m` slots, with the flags hf_maglev takes. */
  #spec(name: string, m: number) {
    return { name, keySize: 4, valueSize: 4, maxEntries: m, flags: this.#tableFlags() };
  }

  /** A new table for `serviceId` holding `table` (a spare when one of its size is ready). */
  #filled(serviceId: number, table: Uint32Array, spare = false): BpfMap {
    const inner = (spare && this.#sparesM === table.length ? this.#spares.pop() : undefined) ??
      BpfMap.create(MAP_TYPE.ARRAY, this.#spec(`hf_mg_${serviceId}`, table.length));
    try {
      writeU32Values(inner, table);
      return inner;
    } catch (e) {
      inner[Symbol.dispose]();
      throw e;
    }
  }

  /**
   * BPF_F_INNER_MAP, plus BPF_F_MMAPABLE unless hf_maglev refuses a table with it (a template
   * pinned by an older version): tried once with a 1-slot table at index 0, removed at once.
   */
  #tableFlags(): number {
    if (this.#flags !== undefined) return this.#flags;
    const mmapable = BPF_F_INNER_MAP | BPF_F_MMAPABLE;
    using probe = BpfMap.create(MAP_TYPE.ARRAY, {
      name: "hf_mg_probe",
      keySize: 4,
      valueSize: 4,
      maxEntries: 1,
      flags: mmapable,
    });
    try {
      this.#outer.update(u32(0), u32(probe.fd));
    } catch (e) {
      if (!(e instanceof BpfError && e.errno === ERRNO.EINVAL)) throw e;
      tablesLog.info(
        "hf_maglev takes no memory-mapped tables (its template was pinned by an older version): " +
          "tables are written by map update",
        { dir: this.#dir, err: e },
      );
      return this.#flags = BPF_F_INNER_MAP;
    }
    this.#outer.delete(u32(0));
    return this.#flags = mmapable;
  }

  /** Creates the table whole, swaps it in for `serviceId` in one update, then pins it. */
  write(serviceId: number, table: Uint32Array): void {
    const inner = this.#filled(serviceId, table);
    try {
      this.#outer.update(u32(serviceId), u32(inner.fd));
      this.#adopt(serviceId, inner);
    } finally {
      if (this.#handles.get(serviceId) !== inner) inner[Symbol.dispose]();
    }
  }

  /**
   * Creates `serviceId`'s new table whole and keeps it until {@linkcode commit} swaps it in (the
   * installed one serves meanwhile); staging an ID again replaces its staged table.
   */
  stage(serviceId: number, table: Uint32Array): void {
    this.#staging = true;
    const inner = this.#filled(serviceId, table, true);
    this.#staged.get(serviceId)?.[Symbol.dispose]();
    this.#staged.set(serviceId, inner);
    this.#createSpares(table.length);
  }

  /**
   * Keeps {@linkcode SPARES} empty tables of `m` slots coming for the stages that follow (a
   * rebuild stages many): the kernel's share of creating one (~0.1 ms at M = 16,381) runs on
   * another thread meanwhile. Spares left when the batch commits are closed.
   */
  #createSpares(m: number): void {
    if (m !== this.#sparesM) this.#dropSpares();
    this.#sparesM = m;
    while (this.#spares.length + this.#creating < SPARES) {
      this.#creating++;
      BpfMap.createAsync(MAP_TYPE.ARRAY, this.#spec("hf_mg_table", m)).then(
        (map) => {
          this.#creating--;
          if (this.#staging && this.#sparesM === m) this.#spares.push(map);
          else map[Symbol.dispose]();
        },
        (e) => {
          this.#creating--;
          this.#staging = false; // the next stage creates its table itself, and reports why
          tablesLog.debug("Maglev table created ahead failed", { err: e });
        },
      );
    }
  }

  #dropSpares(): void {
    for (const m of this.#spares) m[Symbol.dispose]();
    this.#spares = [];
  }

  /**
   * Swaps every staged table into hf_maglev — each one whole, {@linkcode COMMIT_CHUNK} per
   * BPF_MAP_UPDATE_BATCH (a map of maps waits one RCU grace period per update from user space,
   * batch or single) — then pins them. A chunk the kernel refuses is retried one entry at a time,
   * so only the entries that fail on their own are reported: service ID → error (their previous
   * table stays). Nothing stays staged.
   */
  commit(): Map<number, Error> {
    const staged = [...this.#staged];
    this.#staged.clear();
    this.#staging = false;
    this.#dropSpares();
    const failed = new Map<number, Error>();
    try {
      for (let at = 0; at < staged.length; at += COMMIT_CHUNK) {
        const chunk = staged.slice(at, at + COMMIT_CHUNK);
        const keys = new Uint32Array(chunk.length), fds = new Uint32Array(chunk.length);
        chunk.forEach(([sid, inner], i) => (keys[i] = sid, fds[i] = inner.fd));
        try {
          this.#outer.updateBatch(new Uint8Array(keys.buffer), new Uint8Array(fds.buffer));
        } catch (batchError) {
          tablesLog.warn("Maglev table batch refused: installing its tables one by one", {
            tables: chunk.length,
            err: batchError,
          });
          for (const [sid, inner] of chunk) {
            try {
              this.#outer.update(u32(sid), u32(inner.fd));
            } catch (e) {
              failed.set(sid, e as Error);
            }
          }
        }
        for (const [sid, inner] of chunk) {
          if (failed.has(sid)) continue;
          try {
            this.#adopt(sid, inner);
          } catch (e) {
            failed.set(sid, e as Error); // installed but not pinned: reported, written again
          }
        }
      }
    } finally {
      for (const [sid, inner] of staged) {
        if (this.#handles.get(sid) !== inner) inner[Symbol.dispose]();
      }
    }
    return failed;
  }

  /** After `inner` went into hf_maglev for `serviceId`: pins it (or holds it without a dir). */
  #adopt(serviceId: number, inner: BpfMap): void {
    if (this.#dir === null) {
      this.#handles.get(serviceId)?.[Symbol.dispose]();
      this.#handles.set(serviceId, inner);
      return;
    }
    unlinkPath(this.#path(serviceId));
    inner.pin(this.#path(serviceId));
  }

  /** Removes `serviceId`'s table from hf_maglev (and a staged one), then its pin. Idempotent. */
  delete(serviceId: number): void {
    this.#staged.get(serviceId)?.[Symbol.dispose]();
    this.#staged.delete(serviceId);
    this.#outer.delete(u32(serviceId));
    if (this.#dir !== null) unlinkPath(this.#path(serviceId));
    this.#handles.get(serviceId)?.[Symbol.dispose]();
    this.#handles.delete(serviceId);
  }

  /**
   * The service IDs hf_maglev holds a table for, ascending (nothing else is read): one batch
   * read (empty slots are skipped by the kernel), not a lookup per slot (~5 ms for 4,096).
   */
  serviceIds(): number[] {
    const { keys, count } = this.#outer.lookupBatch(Math.min(this.#outer.maxEntries, 8192));
    const ids = new Array<number>(count);
    for (let i = 0; i < count; i++) ids[i] = readU32(keys, i * 4); // an array: keys in order
    return ids;
  }

  /** Every table hf_maglev holds, read through its pin (see the module doc for the fallbacks). */
  readAll(): MaglevTablesRead {
    const tables: Array<readonly [number, Uint32Array]> = [];
    const unreadable: number[] = [];
    let repinned = 0;
    // One batch read of hf_maglev (empty slots are skipped by the kernel), not get_next_key and
    // a lookup for each of its slots: ~9 ms for 4,096, in every full pass's verify.
    const outer = this.#outer.lookupBatch(Math.min(this.#outer.maxEntries, 8192));
    for (let i = 0; i < outer.count; i++) {
      const serviceId = readU32(outer.keys, i * 4);
      // a map-in-map lookup from user space returns the inner map's ID
      const opened = this.#open(serviceId, readU32(outer.values, i * 4));
      if (opened === null) {
        unreadable.push(serviceId);
        continue;
      }
      if (opened.repinned) repinned++;
      try {
        tables.push([serviceId, readU32Values(opened.map)]); // mapped if it was made mmapable
      } finally {
        if (opened.owned) opened.map[Symbol.dispose]();
      }
    }
    if (repinned > 0) {
      tablesLog.info("Maglev tables pinned (found without a pin: opened by ID)", {
        dir: this.#dir,
        tables: repinned,
      });
    }
    if (unreadable.length > 0) {
      tablesLog.warn(
        "Maglev tables unreadable: not pinned and opening a map by ID needs CAP_SYS_ADMIN; " +
          "reported missing, so the reconciler writes them again",
        { dir: this.#dir, tables: unreadable.length, serviceIds: unreadable.slice(0, 20) },
      );
    }
    tables.sort((a, b) => a[0] - b[0]);
    return { tables, unreadable };
  }

  /**
   * A handle on the table of `serviceId` whose kernel ID is `mapId` (`owned`: the caller disposes
   * it); `repinned` when it had to be opened by ID. Null when only opening by ID would reach it
   * and the kernel refuses that (EPERM).
   */
  #open(
    serviceId: number,
    mapId: number,
  ): { map: BpfMap; owned: boolean; repinned: boolean } | null {
    const held = this.#handles.get(serviceId);
    if (held !== undefined && held.info().id === mapId) {
      return { map: held, owned: false, repinned: false };
    }
    if (this.#dir !== null) {
      const pinned = openPinned(this.#path(serviceId));
      if (pinned !== null) {
        if (pinned.info().id === mapId) return { map: pinned, owned: true, repinned: false };
        pinned[Symbol.dispose](); // stale: the write after it did not get to pin its table
      }
    }
    let byId: BpfMap;
    try {
      byId = BpfMap.fromId(mapId);
    } catch (e) {
      if (e instanceof BpfError && e.errno === ERRNO.EPERM) return null;
      throw e;
    }
    if (this.#dir === null) return { map: byId, owned: true, repinned: false };
    try {
      unlinkPath(this.#path(serviceId));
      byId.pin(this.#path(serviceId));
    } catch (e) {
      byId[Symbol.dispose]();
      throw e;
    }
    return { map: byId, owned: true, repinned: true };
  }

  /** Closes the descriptors held in unpinned mode (the tables stay while hf_maglev holds them). */
  [Symbol.dispose](): void {
    this.#staging = false;
    this.#dropSpares();
    for (const h of this.#staged.values()) h[Symbol.dispose]();
    this.#staged.clear();
    for (const h of this.#handles.values()) h[Symbol.dispose]();
    this.#handles.clear();
  }

  /** Removes the table pins under `dir` (service IDs below `capacity`) and the directory. */
  static unpin(dir: string, capacity: number): void {
    for (let sid = 1; sid < capacity; sid++) unlinkPath(`${dir}/${sid}`);
    rmdirPath(dir);
  }
}

/** Empty tables created ahead while a batch stages (`MaglevTableStore.stage`). */
export const SPARES = 4;

/** Staged tables swapped into hf_maglev per BPF_MAP_UPDATE_BATCH. */
export const COMMIT_CHUNK = 1024;

/** The map pinned at `path`, or null when nothing is pinned there. */
function openPinned(path: string): BpfMap | null {
  try {
    return BpfMap.fromPinned(path);
  } catch (e) {
    if (e instanceof BpfError && e.errno === ERRNO.ENOENT) return null;
    throw e;
  }
}
