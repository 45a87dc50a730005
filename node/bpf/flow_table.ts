/**
 * The node's flow map behind a narrow interface ({@link FlowTable}), and {@link BpfFlowTable},
 * the real one over the datapath's `hf_flows` (an LRU hash of `struct flow_key` →
 * `struct flow_value`, docs/contracts.md). The in-memory stand-in is `MemoryFlowTable` in
 * node/flows/table.ts. Needs FFI (libbpf) and, for a real map, root.
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
  FLOW_KEY_SIZE,
  FLOW_VALUE_SIZE,
  type FlowEntry,
  type FlowKey,
  type FlowValue,
  readFlowKey,
  readFlowValue,
  writeFlowKey,
  writeFlowValue,
} from "./flow.ts";
import type { BpfMap } from "./map.ts";

/** A node's flow map: flow key → backend, flags, last seen. */
export interface FlowTable {
  /** The entry for `key`, or undefined. */
  get(key: FlowKey): FlowValue | undefined;
  /** Inserts or replaces the entry for `key`. */
  put(key: FlowKey, value: FlowValue): void;
  /** Inserts or replaces many entries at once (the datapath's batch update). */
  putBatch(entries: readonly FlowEntry[]): void;
  /** Removes the entry for `key`; true if it existed. */
  delete(key: FlowKey): boolean;
  /** Every entry, in no particular order. Safe against concurrent deletes. */
  entries(): Iterable<FlowEntry>;
  /** The clock of `lastSeenNs` (CLOCK_MONOTONIC ns for the BPF map). */
  nowNs(): number;
}

/** The datapath's flow map as a {@link FlowTable}. */
export class BpfFlowTable implements FlowTable {
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
  putBatch(entries: readonly FlowEntry[]): void {
    const chunk = 65_536;
    for (let start = 0; start < entries.length; start += chunk) {
      const n = Math.min(chunk, entries.length - start);
      const keys = new Uint8Array(n * FLOW_KEY_SIZE);
      const values = new Uint8Array(n * FLOW_VALUE_SIZE);
      const kv = new DataView(keys.buffer);
      const vv = new DataView(values.buffer);
      for (let i = 0; i < n; i++) {
        const e = entries[start + i]!;
        writeFlowKey(kv, i * FLOW_KEY_SIZE, e.key);
        writeFlowValue(vv, i * FLOW_VALUE_SIZE, e.value);
      }
      this.#map.updateBatch(keys, values);
    }
  }

  delete(key: FlowKey): boolean {
    writeFlowKey(this.#keyView, 0, key);
    return this.#map.delete(this.#key);
  }

  /** A batch-lookup snapshot of the map. */
  *entries(): Iterable<FlowEntry> {
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
