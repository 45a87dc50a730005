/**
 * The node's flow map behind a narrow interface ({@link FlowTable}), and the real ones:
 * {@link BpfFlowTable} over the datapath's `hf_flows` (an LRU hash of `struct flow_key` →
 * `struct flow_value`, docs/contracts.md), {@link BpfFlowTable6} over `hf_flows6`
 * (`struct flow_key6` → `struct flow_value6`, "IPv6"), and {@link DualFlowTable}, both as one
 * table of either family's keys — what the flow agent is given. The in-memory stand-in is
 * `MemoryFlowTable` in node/lb/flows/table.ts. Needs FFI (libbpf) and, for a real map, root.
 *
 * @example
 * ```ts ignore
 * import { Datapath } from "./mod.ts";
 * using dp = await Datapath.open();
 * const table = dp.flowTable();
 * table.put(key, { backend: 0x0a020002, flags: FLOW_F_PEER, lastSeenNs: table.nowNs() });
 * ```
 *
 * @module
 */

import { monotonicNs } from "./_ffi.ts";
import {
  type AnyFlowKey,
  type AnyFlowValue,
  FLOW_KEY_SIZE,
  FLOW_VALUE_SIZE,
  type FlowKey,
  type FlowKey6,
  type FlowValue,
  isFlowKey6,
  readFlowKey,
  readFlowValue,
  writeFlowKey,
  writeFlowValue,
} from "./flow.ts";
import type { BpfMap } from "./map.ts";
import {
  decodeFlowKey6,
  readFlowValue6,
  SIZES6,
  writeFlowKey6,
  writeFlowValue6,
} from "./structs6.ts";

/**
 * A node's flow map: flow key → backend, flags, last seen. By default of either family (what the
 * flow agent works on); `FlowTable<FlowKey, FlowValue>` is one IPv4 map.
 */
export interface FlowTable<
  K extends AnyFlowKey = AnyFlowKey,
  V extends AnyFlowValue = AnyFlowValue,
> {
  /** The entry for `key`, or undefined. */
  get(key: K): V | undefined;
  /** Inserts or replaces the entry for `key`. */
  put(key: K, value: V): void;
  /** Inserts or replaces many entries at once (the datapath's batch update). */
  putBatch(entries: readonly { readonly key: K; readonly value: V }[]): void;
  /** Removes the entry for `key`; true if it existed. */
  delete(key: K): boolean;
  /** Every entry, in no particular order. Safe against concurrent deletes. */
  entries(): Iterable<{ readonly key: K; readonly value: V }>;
  /** The clock of `lastSeenNs` (CLOCK_MONOTONIC ns for the BPF map). */
  nowNs(): number;
}

/** The datapath's IPv4 flow map (`hf_flows`, or `hf_flows_syn`) as a {@link FlowTable}. */
export class BpfFlowTable implements FlowTable<FlowKey, FlowValue> {
  readonly #map: BpfMap;
  readonly #key = new Uint8Array(FLOW_KEY_SIZE);
  readonly #keyView = new DataView(this.#key.buffer);
  readonly #value = new Uint8Array(FLOW_VALUE_SIZE);
  readonly #valueView = new DataView(this.#value.buffer);

  /** `map` is the datapath's `hf_flows` (`Datapath.maps.flows`). */
  constructor(map: BpfMap) {
    this.#map = map;
  }

  get(key: FlowKey): FlowValue | undefined {
    writeFlowKey(this.#keyView, 0, key);
    const v = this.#map.lookup(this.#key);
    return v === null ? undefined : readFlowValue(new DataView(v.buffer, v.byteOffset), 0);
  }

  put(key: FlowKey, value: FlowValue): void {
    writeFlowKey(this.#keyView, 0, key);
    writeFlowValue(this.#valueView, 0, value);
    this.#map.update(this.#key, this.#value);
  }

  /** One `BPF_MAP_UPDATE_BATCH` per 65,536 entries. */
  putBatch(entries: readonly { readonly key: FlowKey; readonly value: FlowValue }[]): void {
    updateInChunks(this.#map, entries, FLOW_KEY_SIZE, FLOW_VALUE_SIZE, (keys, values, at) => {
      const kv = new DataView(keys.buffer);
      const vv = new DataView(values.buffer);
      at((e, i) => {
        writeFlowKey(kv, i * FLOW_KEY_SIZE, e.key);
        writeFlowValue(vv, i * FLOW_VALUE_SIZE, e.value);
      });
    });
  }

  delete(key: FlowKey): boolean {
    writeFlowKey(this.#keyView, 0, key);
    return this.#map.delete(this.#key);
  }

  /** A batch-lookup snapshot of the map. */
  *entries(): Iterable<{ key: FlowKey; value: FlowValue }> {
    const { keys, values, count } = this.#map.lookupBatch();
    const kv = new DataView(keys.buffer, keys.byteOffset);
    const vv = new DataView(values.buffer, values.byteOffset);
    for (let i = 0; i < count; i++) {
      yield {
        key: readFlowKey(kv, i * FLOW_KEY_SIZE),
        value: readFlowValue(vv, i * FLOW_VALUE_SIZE),
      };
    }
  }

  /** CLOCK_MONOTONIC in ns, the clock of `bpf_ktime_get_ns()`. */
  nowNs(): number {
    return Number(monotonicNs());
  }
}

/**
 * The datapath's IPv6 flow map (`hf_flows6`, or `hf_flows_syn6`) as a {@link FlowTable}: keys
 * with text addresses, backends of either family (IPv4 as a u32, as in {@link AnyFlowValue}).
 */
export class BpfFlowTable6 implements FlowTable<FlowKey6, AnyFlowValue> {
  readonly #map: BpfMap;
  readonly #key = new Uint8Array(SIZES6.flow_key6);
  readonly #value = new Uint8Array(SIZES6.flow_value6);

  /** `map` is the datapath's `hf_flows6` (`Datapath.object.map("hf_flows6")`). */
  constructor(map: BpfMap) {
    this.#map = map;
  }

  get(key: FlowKey6): AnyFlowValue | undefined {
    writeFlowKey6(this.#key, 0, key);
    const v = this.#map.lookup(this.#key);
    return v === null ? undefined : readFlowValue6(v);
  }

  put(key: FlowKey6, value: AnyFlowValue): void {
    writeFlowKey6(this.#key, 0, key);
    writeFlowValue6(this.#value, 0, value);
    this.#map.update(this.#key, this.#value);
  }

  /** One `BPF_MAP_UPDATE_BATCH` per 65,536 entries. */
  putBatch(entries: readonly { readonly key: FlowKey6; readonly value: AnyFlowValue }[]): void {
    const ks = SIZES6.flow_key6, vs = SIZES6.flow_value6;
    updateInChunks(this.#map, entries, ks, vs, (keys, values, at) => {
      at((e, i) => {
        writeFlowKey6(keys, i * ks, e.key);
        writeFlowValue6(values, i * vs, e.value);
      });
    });
  }

  delete(key: FlowKey6): boolean {
    writeFlowKey6(this.#key, 0, key);
    return this.#map.delete(this.#key);
  }

  /** A batch-lookup snapshot of the map. */
  *entries(): Iterable<{ key: FlowKey6; value: AnyFlowValue }> {
    const { keys, values, count } = this.#map.lookupBatch();
    for (let i = 0; i < count; i++) {
      yield {
        key: decodeFlowKey6(keys, i * SIZES6.flow_key6),
        value: readFlowValue6(values, i * SIZES6.flow_value6),
      };
    }
  }

  /** CLOCK_MONOTONIC in ns, the clock of `bpf_ktime_get_ns()`. */
  nowNs(): number {
    return Number(monotonicNs());
  }
}

/**
 * Writes `entries` with one `BPF_MAP_UPDATE_BATCH` per 65,536: for each chunk, `fill` gets its
 * key and value buffers and `at`, which calls back with each of the chunk's entries and its index
 * in the chunk, to encode them.
 */
function updateInChunks<E>(
  map: BpfMap,
  entries: readonly E[],
  keySize: number,
  valueSize: number,
  fill: (
    keys: Uint8Array,
    values: Uint8Array,
    at: (write: (e: E, i: number) => void) => void,
  ) => void,
): void {
  const chunk = 65_536;
  for (let start = 0; start < entries.length; start += chunk) {
    const n = Math.min(chunk, entries.length - start);
    const keys = new Uint8Array(n * keySize);
    const values = new Uint8Array(n * valueSize);
    fill(keys, values, (write) => {
      for (let i = 0; i < n; i++) write(entries[start + i]!, i);
    });
    map.updateBatch(keys, values);
  }
}

/**
 * Two flow maps, one per family, as one {@link FlowTable} of either family's keys: each call goes
 * to the map of its key's family; `entries()` lists the IPv4 map's, then the IPv6 map's. The flow
 * agent's table on a node with the datapath (`hf_flows` + `hf_flows6`).
 */
export class DualFlowTable implements FlowTable {
  readonly #v4: FlowTable<FlowKey, FlowValue>;
  readonly #v6: FlowTable<FlowKey6, AnyFlowValue>;

  constructor(v4: FlowTable<FlowKey, FlowValue>, v6: FlowTable<FlowKey6, AnyFlowValue>) {
    this.#v4 = v4;
    this.#v6 = v6;
  }

  get(key: AnyFlowKey): AnyFlowValue | undefined {
    return isFlowKey6(key) ? this.#v6.get(key) : this.#v4.get(key);
  }

  put(key: AnyFlowKey, value: AnyFlowValue): void {
    if (isFlowKey6(key)) this.#v6.put(key, value);
    else this.#v4.put(key, ipv4Value(value));
  }

  putBatch(entries: readonly { readonly key: AnyFlowKey; readonly value: AnyFlowValue }[]): void {
    let v6 = 0;
    for (const e of entries) {
      if (isFlowKey6(e.key)) v6++;
      else ipv4Value(e.value);
    }
    // IPv4 only (the usual batch): handed over as it is, no copy.
    if (v6 === 0) {
      return this.#v4.putBatch(entries as readonly { key: FlowKey; value: FlowValue }[]);
    }
    const four: { key: FlowKey; value: FlowValue }[] = [];
    const six: { key: FlowKey6; value: AnyFlowValue }[] = [];
    for (const e of entries) {
      if (isFlowKey6(e.key)) six.push({ key: e.key, value: e.value });
      else four.push({ key: e.key, value: e.value as FlowValue });
    }
    if (four.length > 0) this.#v4.putBatch(four);
    this.#v6.putBatch(six);
  }

  delete(key: AnyFlowKey): boolean {
    return isFlowKey6(key) ? this.#v6.delete(key) : this.#v4.delete(key);
  }

  *entries(): Iterable<{ key: AnyFlowKey; value: AnyFlowValue }> {
    yield* this.#v4.entries();
    yield* this.#v6.entries();
  }

  nowNs(): number {
    return this.#v4.nowNs();
  }
}

/** An IPv4 flow's value: its backend must be IPv4 (the IPv4 map has no room for another). */
function ipv4Value(value: AnyFlowValue): FlowValue {
  if (typeof value.backend === "number") return value as FlowValue;
  throw new TypeError(
    `Cannot put IPv6 backend "${value.backend}" in the IPv4 flow map: an IPv4 frontend's flow needs an IPv4 backend`,
  );
}
