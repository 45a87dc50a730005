/**
 * The values of a u32 array map read and written whole. An array created with
 * {@linkcode BPF_F_MMAPABLE} is mapped into this process (`mmap` of its fd, shared with the kernel
 * and the programs that read it) and copied in or out: a 16,381-slot Maglev table is a memory
 * copy instead of an update syscall carrying 64 KB (~1.6 ms here). Other arrays go through
 * BPF_MAP_UPDATE_BATCH / BPF_MAP_LOOKUP_BATCH as before. Mapping needs no capability beyond the
 * map's fd (opened read-write, as `BpfMap` opens them; a writable mapping also needs the map not
 * frozen).
 *
 * In the mapping, value i sits at byte i × round_up(value size, 8): the kernel lays array values
 * out 8-byte aligned, so a u32 array is every other u32 of the mapping, not one packed run.
 *
 * @module
 */

import { c, errno } from "./_ffi.ts";
import { BpfError } from "./errors.ts";
import { BPF_F_MMAPABLE, BpfMap, MAP_TYPE } from "./map.ts";

const PROT_READ = 1, PROT_WRITE = 2, MAP_SHARED = 1;
/** `(void *) -1`, what a failed mmap returns. */
const MAP_FAILED = 0xffff_ffff_ffff_ffffn;

/** Whether `map` is an array user space may mmap. */
export function isMmapable(map: BpfMap): boolean {
  return map.type === MAP_TYPE.ARRAY && (map.flags & BPF_F_MMAPABLE) !== 0;
}

function checkU32Array(map: BpfMap, what: string): void {
  if (map.type !== MAP_TYPE.ARRAY || map.keySize !== 4 || map.valueSize !== 4) {
    throw new RangeError(
      `Cannot ${what} map "${map.name}" as u32 values: it is not an array of u32 (type ${map.type}, ` +
        `key ${map.keySize} bytes, value ${map.valueSize} bytes)`,
    );
  }
}

/**
 * Runs `use` over a mapping of `map`'s values as u32 words (value i at word i × `step`), unmapped
 * after it returns or throws: the view must not outlive `use` (it would point at unmapped memory).
 */
function withMapping<T>(
  map: BpfMap,
  write: boolean,
  use: (words: Uint32Array, step: number) => T,
): T {
  const stride = Math.ceil(map.valueSize / 8) * 8;
  const bytes = map.maxEntries * stride;
  const prot = write ? PROT_READ | PROT_WRITE : PROT_READ;
  const ptr = c().mmap(null, BigInt(bytes), prot, MAP_SHARED, map.fd, 0n);
  if (ptr === null || BigInt(Deno.UnsafePointer.value(ptr)) === MAP_FAILED) {
    throw new BpfError(
      `Cannot mmap map "${map.name}" (${bytes} bytes, ${write ? "read-write" : "read-only"})`,
      errno(),
    );
  }
  try {
    const words = new Uint32Array(Deno.UnsafePointerView.getArrayBuffer(ptr, bytes));
    return use(words, stride / 4);
  } finally {
    c().munmap(ptr, BigInt(bytes));
  }
}

/**
 * Writes `values` into the first `values.length` slots of the u32 array `map` (index i ← values[i]):
 * through a mapping when the map is mmapable, else one BPF_MAP_UPDATE_BATCH. Slots past the end
 * keep their values. Not atomic for programs reading the map meanwhile: fill a map before a
 * program can reach it (e.g. before it goes into a map-in-map).
 */
export function writeU32Values(map: BpfMap, values: Uint32Array): void {
  checkU32Array(map, "write");
  if (values.length > map.maxEntries) {
    throw new RangeError(
      `Cannot write ${values.length} values into map "${map.name}": it holds ${map.maxEntries}`,
    );
  }
  if (isMmapable(map)) {
    withMapping(map, true, (words, step) => {
      for (let i = 0; i < values.length; i++) words[i * step] = values[i]!;
    });
    return;
  }
  const keys = new Uint32Array(values.length);
  for (let i = 0; i < keys.length; i++) keys[i] = i;
  const copy = new Uint32Array(values); // little-endian u32 on x86, as the kernel reads
  map.updateBatch(new Uint8Array(keys.buffer), new Uint8Array(copy.buffer));
}

/**
 * Every slot of the u32 array `map`, in index order (a copy): through a read-only mapping when
 * the map is mmapable, else BPF_MAP_LOOKUP_BATCH.
 */
export function readU32Values(map: BpfMap): Uint32Array {
  checkU32Array(map, "read");
  if (isMmapable(map)) {
    return withMapping(map, false, (words, step) => {
      const out = new Uint32Array(map.maxEntries);
      for (let i = 0; i < out.length; i++) out[i] = words[i * step]!;
      return out;
    });
  }
  const { values, count } = map.lookupBatch(65536);
  return new Uint32Array(values.buffer.slice(values.byteOffset, values.byteOffset + count * 4));
}
