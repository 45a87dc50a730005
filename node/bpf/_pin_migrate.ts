/**
 * Pinned maps across a program upgrade (docs/operators.md "Upgrade"). Before a new object loads,
 * each map to pin is compared with the map pinned at its path: the same layout (map type, key
 * size, value size, max entries, flags) is **reused** — libbpf's pinning hands the new programs
 * the very map the old ones use, so nothing is copied and nothing changes under traffic; no pin
 * is **created**; a different layout is **migrated**:
 *
 * 1. before load, the old pin is renamed aside (`<name>-migrating`); the old programs keep using
 *    the old map (the kernel holds it by their reference);
 * 2. the object loads and pins a new map of the new layout at the map's path;
 *    {@linkcode PinPlan.fill} copies every entry of the old map into it (a value's common prefix;
 *    fields the new layout adds start zeroed; an array's indices past the new size are dropped);
 * 3. the caller swaps the programs on their links (attach.ts, atomic);
 * 4. {@linkcode PendingMigrations.finish} copies what the old programs added between the fill and
 *    the swap (hash maps: keys the new map lacks, `BPF_NOEXIST`, so the new programs' own writes
 *    win) and unlinks the old pin — the old map is freed once no program holds it.
 *
 * A pin found aside from an interrupted migration is a source again (its entries are carried
 * into whatever map the path holds, missing keys only). A map-in-map's entries are its inner
 * maps, put into the new outer map as they are (user space reads an inner map's ID, writes its
 * fd). A ring buffer is made anew (its unread records are the old reader's); a changed key size
 * or map type is refused with the layouts in the error. Every decision is one log line.
 *
 * @module
 */

import { log } from "../../lib/log.ts";
import { bpf, renamePath, unlinkPath } from "./_ffi.ts";
import { BpfError, ERRNO } from "./errors.ts";
import { BpfMap, UPDATE } from "./map.ts";

/** What decides whether a pinned map can be reused as it is. */
export interface MapLayout {
  readonly type: number;
  readonly keySize: number;
  readonly valueSize: number;
  readonly maxEntries: number;
  readonly flags: number;
}

/** One pinned map's fate at load. */
export interface PinDecision {
  readonly map: string;
  readonly action: "reused" | "created" | "migrated";
  /** For "migrated": what changed, e.g. `max_entries 100 → 200`. */
  readonly changed?: readonly string[];
}

/** Suffix of an old pin while its map is migrated. */
export const MIGRATING_SUFFIX = "-migrating"; // bpffs refuses names with a dot

const TYPE = { ARRAY: 2, PERCPU_ARRAY: 6, ARRAY_OF_MAPS: 12, HASH_OF_MAPS: 13, RINGBUF: 27 };
/** Hash, array, per-CPU hash and array, LRU and LRU per-CPU hash, array and hash of maps. */
const COPYABLE = new Set([1, 2, 5, 6, 9, 10, 12, 13]);
const ARRAYS = new Set([TYPE.ARRAY, TYPE.PERCPU_ARRAY, TYPE.ARRAY_OF_MAPS]);
const OF_MAPS = new Set([TYPE.ARRAY_OF_MAPS, TYPE.HASH_OF_MAPS]);

const FIELDS = [
  ["type", "map type"],
  ["keySize", "key size"],
  ["valueSize", "value size"],
  ["maxEntries", "max_entries"],
  ["flags", "flags"],
] as const;

/** The fields in which two layouts differ, as `name old → new` (empty: the same layout). */
export function layoutChanges(old: MapLayout, next: MapLayout): string[] {
  return FIELDS.filter(([f]) => old[f] !== next[f]).map(([f, label]) =>
    `${label} ${old[f]} → ${next[f]}`
  );
}

function pinnedLayout(path: string): MapLayout | null {
  try {
    using m = BpfMap.fromPinned(path);
    return m;
  } catch (e) {
    if (e instanceof BpfError && e.errno === ERRNO.ENOENT) return null;
    throw e;
  }
}

const bpfLog = (msg: string, fields: Record<string, unknown>) =>
  log.info(msg, { component: "bpf", ...fields });

/**
 * The decisions for `names` in `pinDir` against the new object's layouts (`layoutOf`), made
 * before load; a changed map's pin is renamed aside here. Throws, changing nothing, when a
 * changed map's entries cannot be carried over.
 */
export function planPins(
  pinDir: string,
  names: readonly string[],
  layoutOf: (name: string) => MapLayout,
): PinPlan {
  const decisions: PinDecision[] = [];
  const moves: Array<[string, string]> = [];
  for (const name of names) {
    const path = `${pinDir}/${name}`;
    const next = layoutOf(name);
    const pinned = pinnedLayout(path);
    const aside = pinnedLayout(path + MIGRATING_SUFFIX);
    const changed = pinned === null ? [] : layoutChanges(pinned, next);
    if (aside !== null) {
      if (changed.length > 0 || !carriable(aside, next)) {
        throw refusal(pinDir, name, ["left by an interrupted migration", ...changed]);
      }
      decisions.push({ map: name, action: "migrated", changed: ["resumed"] });
    } else if (pinned === null) {
      decisions.push({ map: name, action: "created" });
    } else if (changed.length === 0) {
      decisions.push({ map: name, action: "reused" });
    } else {
      if (!carriable(pinned, next)) throw refusal(pinDir, name, changed);
      decisions.push({ map: name, action: "migrated", changed });
      moves.push([path, path + MIGRATING_SUFFIX]);
    }
  }
  for (const [from, to] of moves) renamePath(from, to);
  return new PinPlan(pinDir, decisions, moves);
}

/** Whether entries of a map of layout `old` can be carried into one of layout `next`. */
function carriable(old: MapLayout, next: MapLayout): boolean {
  if (old.type === TYPE.RINGBUF) return next.type === TYPE.RINGBUF; // made anew, nothing copied
  return COPYABLE.has(old.type) && old.type === next.type && old.keySize === next.keySize;
}

function refusal(pinDir: string, name: string, changed: readonly string[]): BpfError {
  return new BpfError(
    `Cannot migrate map "${name}" pinned in "${pinDir}" (${changed.join(", ")}): its entries ` +
      `cannot be copied to the new layout; remove the pins (flows restore from Redis)`,
    ERRNO.EINVAL,
  );
}

/** The decisions of one load, and the migrations still to fill and finish. */
export class PinPlan {
  constructor(
    readonly pinDir: string,
    readonly decisions: readonly PinDecision[],
    readonly moves: ReadonlyArray<readonly [string, string]> = [],
  ) {}

  /** The load failed: the pins renamed aside go back (an older agent finds them as they were). */
  rollback(): void {
    for (const [path, aside] of this.moves) {
      unlinkPath(path); // a new map libbpf may have pinned before the load failed
      renamePath(aside, path);
    }
  }

  /**
   * After load: fills each migrated map from its old pin (`mapOf` gives the new object's map)
   * and logs every decision. Returns what {@linkcode PendingMigrations.finish} completes after
   * the programs are swapped.
   */
  fill(mapOf: (name: string) => BpfMap): PendingMigrations {
    const pending: Migration[] = [];
    for (const d of this.decisions) {
      if (d.action !== "migrated") {
        bpfLog(`${d.action} map ${d.map}`, { map: d.map, pin_dir: this.pinDir });
        continue;
      }
      const old = BpfMap.fromPinned(`${this.pinDir}/${d.map}${MIGRATING_SUFFIX}`);
      const into = mapOf(d.map);
      const resumed = d.changed?.[0] === "resumed";
      const started = performance.now();
      // Resumed: entries the interrupted fill already carried count as carried.
      const n = copyEntries(old, into, resumed ? UPDATE.NOEXIST : UPDATE.ANY, resumed);
      bpfLog(`migrating map ${d.map}: ${n.copied} entries copied before the program swap`, {
        map: d.map,
        pin_dir: this.pinDir,
        changed: d.changed,
      });
      pending.push({ name: d.map, old, into, ...n, ms: performance.now() - started });
    }
    return new PendingMigrations(this.pinDir, pending, this.decisions);
  }
}

interface Migration {
  readonly name: string;
  readonly old: BpfMap;
  readonly into: BpfMap;
  readonly copied: number;
  readonly dropped: number;
  readonly ms: number;
}

/** Migrations filled, waiting for the program swap. */
export class PendingMigrations {
  #pending: Migration[];
  /** Entries carried per migrated map, once {@linkcode finish} ran. */
  readonly carried = new Map<string, number>();

  constructor(
    readonly pinDir: string,
    pending: Migration[],
    readonly decisions: readonly PinDecision[],
  ) {
    this.#pending = pending;
  }

  /** Maps still waiting for {@linkcode finish}. */
  get waiting(): string[] {
    return this.#pending.map((m) => m.name);
  }

  /**
   * After the swap: carries over what the old programs added since the fill, unlinks each old
   * pin and logs `migrated map X (N entries)`. Returns the entries carried per map (also on a
   * later call, which has nothing left to do).
   */
  finish(): Map<string, number> {
    const out = this.carried;
    for (const m of this.#pending) {
      const started = performance.now();
      const late = ARRAYS.has(m.old.type) || m.old.type === TYPE.RINGBUF
        ? { copied: 0, dropped: 0 }
        : copyEntries(m.old, m.into, UPDATE.NOEXIST);
      unlinkPath(`${this.pinDir}/${m.name}${MIGRATING_SUFFIX}`);
      const entries = m.copied + late.copied;
      const changed = this.decisions.find((d) => d.map === m.name)?.changed ?? [];
      bpfLog(`migrated map ${m.name} (${entries} entries)`, {
        map: m.name,
        pin_dir: this.pinDir,
        entries,
        late_entries: late.copied,
        dropped: m.dropped + late.dropped,
        changed,
        fill_ms: Math.round(m.ms * 10) / 10,
        catch_up_ms: Math.round((performance.now() - started) * 10) / 10,
      });
      out.set(m.name, entries);
      m.old[Symbol.dispose]();
    }
    this.#pending = [];
    return out;
  }
}

/**
 * Copies every entry of `from` into `into` (values converted per CPU slot: the common prefix,
 * the rest zeroed). With `UPDATE.NOEXIST`, keys already in `into` are left alone (counted as
 * copied with `countPresent`). Entries that
 * do not fit (an array index past the new size, a full hash) are counted as dropped.
 */
export function copyEntries(
  from: BpfMap,
  into: BpfMap,
  flags: bigint,
  countPresent = false,
): { copied: number; dropped: number } {
  if (from.type === TYPE.RINGBUF) return { copied: 0, dropped: 0 };
  const { keys, values, count } = from.lookupBatch(4096);
  const ks = from.keySize, vs = from.userValueSize, nvs = into.userValueSize;
  const slots = vs / slotSize(from);
  let copied = 0, dropped = 0;
  const count1 = (r: string) => r === "ok" ? copied++ : r === "full" ? dropped++ : 0;
  if (flags === UPDATE.NOEXIST) {
    // A catch-up: the keys `into` holds, read in one pass; only the others are written.
    const present = keySet(into);
    for (let i = 0; i < count; i++) {
      const key = keys.subarray(i * ks, (i + 1) * ks);
      if (present.has(keyText(key))) {
        if (countPresent) copied++;
        continue;
      }
      const v = values.subarray(i * vs, (i + 1) * vs);
      count1(
        OF_MAPS.has(from.type)
          ? putInnerMap(into, key, v, flags)
          : rawUpdate(into, key, convert(v, slots, from, into), flags),
      );
    }
    return { copied, dropped };
  }
  for (let start = 0; start < count; start += CHUNK) {
    const n = Math.min(CHUNK, count - start);
    const ck = keys.subarray(start * ks, (start + n) * ks);
    if (!OF_MAPS.has(from.type)) {
      const cv = new Uint8Array(n * nvs);
      for (let i = 0; i < n; i++) {
        const v = values.subarray((start + i) * vs, (start + i + 1) * vs);
        cv.set(convert(v, slots, from, into), i * nvs);
      }
      // One batch call for the chunk; a failure (a full map, an index past an array's end)
      // redoes the chunk one entry at a time, each outcome counted.
      if (tryBatch(into, ck, cv)) {
        copied += n;
        continue;
      }
      for (let i = 0; i < n; i++) {
        const key = ck.subarray(i * ks, (i + 1) * ks);
        count1(rawUpdate(into, key, cv.subarray(i * nvs, (i + 1) * nvs), flags));
      }
      continue;
    }
    for (let i = 0; i < n; i++) {
      const v = values.subarray((start + i) * vs, (start + i + 1) * vs);
      count1(putInnerMap(into, ck.subarray(i * ks, (i + 1) * ks), v, flags));
    }
  }
  return { copied, dropped };
}

const CHUNK = 4096;

function keyText(key: Uint8Array): string {
  return String.fromCharCode.apply(null, key as unknown as number[]);
}

function keySet(m: BpfMap): Set<string> {
  const { keys, count } = m.lookupBatch(4096);
  const out = new Set<string>();
  for (let i = 0; i < count; i++) {
    out.add(keyText(keys.subarray(i * m.keySize, (i + 1) * m.keySize)));
  }
  return out;
}

function tryBatch(into: BpfMap, keys: Uint8Array, values: Uint8Array): boolean {
  try {
    return into.updateBatch(keys, values, UPDATE.ANY) === keys.length / into.keySize;
  } catch (e) {
    if (e instanceof BpfError) return false;
    throw e;
  }
}

/**
 * One update by the raw call: the outcome without an exception per existing key. Under NOEXIST
 * a lookup goes first: an LRU map takes a free node before it finds the key exists, and running
 * short of free nodes makes it evict — a catch-up pass over a nearly full map must not.
 */
function rawUpdate(m: BpfMap, key: Uint8Array, value: Uint8Array, flags: bigint) {
  if (flags === UPDATE.NOEXIST) {
    const scratch = new Uint8Array(m.userValueSize);
    if (bpf().bpf_map_lookup_elem(m.fd, key, scratch) === 0) return "exists";
  }
  const r = bpf().bpf_map_update_elem(m.fd, key, value, flags);
  if (r === 0) return "ok";
  if (r === -ERRNO.EEXIST) return "exists";
  if (r === -ERRNO.E2BIG || r === -ERRNO.ENOSPC) return "full";
  throw new BpfError(`Cannot copy an entry into map "${m.name}"`, -r);
}

/** Puts the inner map whose ID `value` holds into `into` at `key` (0: an empty slot, skipped). */
function putInnerMap(into: BpfMap, key: Uint8Array, value: Uint8Array, flags: bigint) {
  const id = new DataView(value.buffer, value.byteOffset, 4).getUint32(0, true);
  if (id === 0) return "empty";
  using inner = BpfMap.fromId(id);
  const fd = new Uint8Array(4);
  new DataView(fd.buffer).setUint32(0, inner.fd, true);
  return rawUpdate(into, key, fd, flags);
}

function slotSize(m: BpfMap): number {
  return m.userValueSize === m.valueSize ? m.valueSize : Math.ceil(m.valueSize / 8) * 8;
}

function convert(value: Uint8Array, slots: number, from: BpfMap, into: BpfMap): Uint8Array {
  if (from.valueSize === into.valueSize) return value;
  const a = slotSize(from), b = slotSize(into);
  const out = new Uint8Array(b * slots);
  const n = Math.min(from.valueSize, into.valueSize);
  for (let s = 0; s < slots; s++) out.set(value.subarray(s * a, s * a + n), s * b);
  return out;
}
