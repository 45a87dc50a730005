/**
 * A BPF map handle over its file descriptor: lookup/update/delete, iteration, batch operations,
 * pinning. Works the same for maps of a loaded object, pinned maps and maps created here (e.g.
 * Maglev inner tables).
 *
 * @module
 */

import { concatBytes } from "../../lib/bytes.ts";
import { bpf, c, cstr } from "./_ffi.ts";
import { BpfError, check, ERRNO } from "./errors.ts";

/** Map types Holdfast uses (enum bpf_map_type). */
export const MAP_TYPE = {
  HASH: 1,
  ARRAY: 2,
  PERCPU_HASH: 5,
  PERCPU_ARRAY: 6,
  LRU_HASH: 9,
  ARRAY_OF_MAPS: 12,
  HASH_OF_MAPS: 13,
  RINGBUF: 27,
} as const;

/** Update flags (BPF_ANY / BPF_NOEXIST / BPF_EXIST). */
export const UPDATE = { ANY: 0n, NOEXIST: 1n, EXIST: 2n } as const;

/** Map flag BPF_F_INNER_MAP: inner maps of a map-in-map may differ in max_entries. */
export const BPF_F_INNER_MAP = 0x1000;

/** Map flag BPF_F_MMAPABLE: an array whose values user space may mmap (`map_mmap.ts`). */
export const BPF_F_MMAPABLE = 0x400;

/** What the kernel says about a map (struct bpf_map_info). */
export interface MapInfo {
  readonly type: number;
  readonly id: number;
  readonly keySize: number;
  readonly valueSize: number;
  readonly maxEntries: number;
  readonly flags: number;
  readonly name: string;
}

let possibleCpus: number | undefined;

/** Number of possible CPUs: the multiplier of per-CPU map values. */
export function numPossibleCpus(): number {
  if (possibleCpus === undefined) {
    possibleCpus = check(bpf().libbpf_num_possible_cpus(), "Cannot count possible CPUs");
  }
  return possibleCpus;
}

function isPerCpu(type: number): boolean {
  return type === MAP_TYPE.PERCPU_HASH || type === MAP_TYPE.PERCPU_ARRAY;
}

/** Reads struct bpf_map_info for any BPF map fd. */
export function mapInfoByFd(fd: number): MapInfo {
  const info = new Uint8Array(88);
  const len = new Uint32Array([info.length]);
  check(
    bpf().bpf_obj_get_info_by_fd(fd, info, new Uint8Array(len.buffer)),
    `Cannot read info of map fd ${fd}`,
  );
  const v = new DataView(info.buffer);
  const nameBytes = info.subarray(24, 40);
  const end = nameBytes.indexOf(0);
  return {
    type: v.getUint32(0, true),
    id: v.getUint32(4, true),
    keySize: v.getUint32(8, true),
    valueSize: v.getUint32(12, true),
    maxEntries: v.getUint32(16, true),
    flags: v.getUint32(20, true),
    name: new TextDecoder().decode(nameBytes.subarray(0, end < 0 ? 16 : end)),
  };
}

/** What {@linkcode BpfMap.create} makes. */
export interface CreateMapSpec {
  /** Kernel object name (first 15 characters are kept). */
  readonly name: string;
  readonly keySize: number;
  readonly valueSize: number;
  readonly maxEntries: number;
  /** Map flags, e.g. {@linkcode BPF_F_INNER_MAP}. */
  readonly flags?: number;
  /** For map-in-map outer maps: fd of an inner map template. */
  readonly innerMapFd?: number;
}

/**
 * A BPF map. Keys and values are raw bytes in the layout of bpf/structs.h; per-CPU maps take and
 * return `valueSize` rounded up to 8, times {@linkcode numPossibleCpus}.
 */
export class BpfMap implements Disposable {
  readonly #ownsFd: boolean;
  #fd: number;
  readonly name: string;
  readonly type: number;
  readonly keySize: number;
  readonly valueSize: number;
  readonly maxEntries: number;
  /** Map flags as created, e.g. {@linkcode BPF_F_MMAPABLE}. */
  readonly flags: number;

  /** Wraps an fd. When `ownsFd`, dispose closes it; maps of an object are closed with it. */
  constructor(fd: number, options: { ownsFd: boolean; name?: string }) {
    const info = mapInfoByFd(fd);
    this.#fd = fd;
    this.#ownsFd = options.ownsFd;
    this.name = options.name ?? info.name;
    this.type = info.type;
    this.keySize = info.keySize;
    this.valueSize = info.valueSize;
    this.maxEntries = info.maxEntries;
    this.flags = info.flags;
  }

  /** Opens a map pinned in bpffs. */
  static fromPinned(path: string): BpfMap {
    const fd = bpf().bpf_obj_get(cstr(path));
    if (fd < 0) throw new BpfError(`Cannot open pinned map "${path}"`, -fd);
    return new BpfMap(fd, { ownsFd: true });
  }

  /** Opens a map by kernel ID (e.g. an inner map found in a map-in-map). */
  static fromId(id: number): BpfMap {
    const fd = bpf().bpf_map_get_fd_by_id(id);
    if (fd < 0) throw new BpfError(`Cannot open map with id ${id}`, -fd);
    return new BpfMap(fd, { ownsFd: true });
  }

  /** Creates a new map (not tied to any object); `type` is a {@linkcode MAP_TYPE}. */
  static create(type: number, spec: CreateMapSpec): BpfMap {
    const fd = bpf().bpf_map_create(...createArgs(type, spec));
    return created(fd, type, spec);
  }

  /**
   * {@linkcode create} with the syscall on another thread (the kernel's part of creating a large
   * array, ~0.1 ms for 128 KB, overlaps this thread's work).
   */
  static async createAsync(type: number, spec: CreateMapSpec): Promise<BpfMap> {
    const args = createArgs(type, spec);
    try {
      return created(await bpf().bpf_map_create_nonblocking(...args), type, spec);
    } finally {
      args[1] = args[5] = EMPTY; // referenced until the call returned: it reads these buffers
    }
  }

  /** The map's file descriptor. */
  get fd(): number {
    if (this.#fd < 0) throw new Error(`Cannot use map "${this.name}": it is closed`);
    return this.#fd;
  }

  /** Bytes of one value as user space sees it (per-CPU: all CPUs). */
  get userValueSize(): number {
    return isPerCpu(this.type)
      ? Math.ceil(this.valueSize / 8) * 8 * numPossibleCpus()
      : this.valueSize;
  }

  /** Kernel info (ID, sizes, flags). */
  info(): MapInfo {
    return mapInfoByFd(this.fd);
  }

  #checkKey(key: Uint8Array): void {
    if (key.length !== this.keySize) {
      throw new RangeError(
        `Cannot use a ${key.length}-byte key on map "${this.name}": key size is ${this.keySize}`,
      );
    }
  }

  /** The value for key, or null when absent. */
  lookup(key: Uint8Array): Uint8Array | null {
    this.#checkKey(key);
    const value = new Uint8Array(this.userValueSize);
    const r = bpf().bpf_map_lookup_elem(this.fd, key, value);
    if (r === -ERRNO.ENOENT) return null;
    check(r, `Cannot look up key in map "${this.name}"`);
    return value;
  }

  /** Inserts or replaces (flags: {@linkcode UPDATE}). */
  update(key: Uint8Array, value: Uint8Array, flags: bigint = UPDATE.ANY): void {
    this.#checkKey(key);
    if (value.length !== this.userValueSize) {
      throw new RangeError(
        `Cannot store a ${value.length}-byte value in map "${this.name}": value size is ${this.userValueSize}`,
      );
    }
    check(
      bpf().bpf_map_update_elem(this.fd, key, value, flags),
      `Cannot update map "${this.name}"`,
    );
  }

  /** Deletes key; returns false when it was absent. */
  delete(key: Uint8Array): boolean {
    this.#checkKey(key);
    const r = bpf().bpf_map_delete_elem(this.fd, key);
    if (r === -ERRNO.ENOENT) return false;
    check(r, `Cannot delete from map "${this.name}"`);
    return true;
  }

  /** All keys, via get_next_key (a snapshot; concurrent changes may be missed or repeated). */
  keys(): Uint8Array[] {
    const out: Uint8Array[] = [];
    let prev: Uint8Array | null = null;
    for (let n = 0; n <= this.maxEntries; n++) {
      const next = new Uint8Array(this.keySize);
      const r = bpf().bpf_map_get_next_key(this.fd, prev, next);
      if (r === -ERRNO.ENOENT) break;
      check(r, `Cannot iterate map "${this.name}"`);
      out.push(next);
      prev = next;
    }
    return out;
  }

  /** All entries (keys() + lookup each). */
  entries(): Array<[Uint8Array, Uint8Array]> {
    const out: Array<[Uint8Array, Uint8Array]> = [];
    for (const k of this.keys()) {
      const v = this.lookup(k);
      if (v !== null) out.push([k, v]);
    }
    return out;
  }

  /**
   * All entries with BPF_MAP_LOOKUP_BATCH, `chunk` at a time (hash, LRU and array maps), or
   * the first `limit` or more (the chunk that reaches it is the last read; an array's are keys
   * 0..limit-1 when `chunk` ≥ `limit`). Returns keys and values concatenated plus the count.
   */
  lookupBatch(
    chunk = 4096,
    limit = Infinity,
  ): { keys: Uint8Array; values: Uint8Array; count: number } {
    const ks = this.keySize, vs = this.userValueSize;
    const keyParts: Uint8Array[] = [];
    const valueParts: Uint8Array[] = [];
    let total = 0;
    const inBatch = new Uint8Array(Math.max(8, ks));
    const outBatch = new Uint8Array(Math.max(8, ks));
    const opts = batchOpts();
    let first = true;
    for (let guard = 0; guard <= this.maxEntries / chunk + 2; guard++) {
      const keys = new Uint8Array(ks * chunk);
      const values = new Uint8Array(vs * chunk);
      const count = new Uint32Array([chunk]);
      const r = bpf().bpf_map_lookup_batch(
        this.fd,
        first ? null : inBatch,
        outBatch,
        keys,
        values,
        new Uint8Array(count.buffer),
        opts,
      );
      const n = count[0] ?? 0;
      if (r < 0 && r !== -ERRNO.ENOENT) check(r, `Cannot batch-read map "${this.name}"`);
      keyParts.push(keys.subarray(0, n * ks));
      valueParts.push(values.subarray(0, n * vs));
      total += n;
      if (r === -ERRNO.ENOENT || total >= limit) break;
      inBatch.set(outBatch);
      first = false;
    }
    return { keys: concatBytes(...keyParts), values: concatBytes(...valueParts), count: total };
  }

  /** Writes `count` entries from concatenated keys/values with BPF_MAP_UPDATE_BATCH. */
  updateBatch(keys: Uint8Array, values: Uint8Array, flags: bigint = UPDATE.ANY): number {
    const count = keys.length / this.keySize;
    if (!Number.isInteger(count) || values.length !== count * this.userValueSize) {
      throw new RangeError(
        `Cannot batch-update map "${this.name}": ${keys.length} key bytes and ${values.length} value bytes do not form whole entries`,
      );
    }
    if (count === 0) return 0;
    const n = new Uint32Array([count]);
    check(
      bpf().bpf_map_update_batch(this.fd, keys, values, new Uint8Array(n.buffer), batchOpts(flags)),
      `Cannot batch-update map "${this.name}" (${count} entries, ${n[0]} done)`,
    );
    return n[0] ?? 0;
  }

  /** Deletes concatenated keys with BPF_MAP_DELETE_BATCH; every key must exist. */
  deleteBatch(keys: Uint8Array): number {
    const count = keys.length / this.keySize;
    if (count === 0) return 0;
    const n = new Uint32Array([count]);
    check(
      bpf().bpf_map_delete_batch(this.fd, keys, new Uint8Array(n.buffer), batchOpts()),
      `Cannot batch-delete from map "${this.name}" (${count} keys, ${n[0]} done)`,
    );
    return n[0] ?? 0;
  }

  /** Pins the map at a bpffs path. */
  pin(path: string): void {
    check(bpf().bpf_obj_pin(this.fd, cstr(path)), `Cannot pin map "${this.name}" at "${path}"`);
  }

  /** Closes the fd if this handle owns it. */
  [Symbol.dispose](): void {
    if (this.#ownsFd && this.#fd >= 0) c().close(this.#fd);
    this.#fd = -1;
  }
}

function batchOpts(elemFlags = 0n): Uint8Array {
  const opts = new Uint8Array(24);
  const v = new DataView(opts.buffer);
  v.setBigUint64(0, 24n, true);
  v.setBigUint64(8, elemFlags, true);
  return opts;
}

const EMPTY = new Uint8Array(0);

/** `bpf_map_create`'s arguments for `spec`. */
function createArgs(
  type: number,
  spec: CreateMapSpec,
): [number, Uint8Array, number, number, number, Uint8Array] {
  const opts = new Uint8Array(48); // struct bpf_map_create_opts
  const v = new DataView(opts.buffer);
  v.setBigUint64(0, 48n, true);
  v.setUint32(24, spec.innerMapFd ?? 0, true);
  v.setUint32(28, spec.flags ?? 0, true);
  return [type, cstr(spec.name.slice(0, 15)), spec.keySize, spec.valueSize, spec.maxEntries, opts];
}

/** The map `bpf_map_create` returned `fd` for. @throws {BpfError} when it failed. */
function created(fd: number, type: number, spec: CreateMapSpec): BpfMap {
  if (fd < 0) {
    throw new BpfError(
      `Cannot create map "${spec.name}" (type ${type}, ${spec.maxEntries} entries)`,
      -fd,
    );
  }
  return new BpfMap(fd, { ownsFd: true, name: spec.name });
}
