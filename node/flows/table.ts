/**
 * The node's flow map as the sync agent needs it, behind a narrow interface ({@link FlowTable},
 * defined next to the flow contract in node/bpf/flow_table.ts with the real one over the
 * datapath's BPF LRU hash); {@link MemoryFlowTable} stands in for unit tests and for agents run
 * without a datapath.
 *
 * @module
 */

import { type FlowEntry, type FlowKey, type FlowValue } from "../bpf/flow.ts";
import type { FlowTable } from "../bpf/flow_table.ts";
import { flowId } from "./field.ts";

export type { FlowTable };

/** An in-memory {@link FlowTable}; the clock is `performance.now()` unless one is given. */
export class MemoryFlowTable implements FlowTable {
  #map = new Map<string, FlowEntry>();
  #clock: () => number;

  constructor(options: { clockNs?: () => number } = {}) {
    this.#clock = options.clockNs ?? (() => Math.round(performance.now() * 1e6));
  }

  /** Number of entries. */
  get size(): number {
    return this.#map.size;
  }

  get(key: FlowKey): FlowValue | undefined {
    return this.#map.get(flowId(key))?.value;
  }

  put(key: FlowKey, value: FlowValue): void {
    this.#map.set(flowId(key), { key, value });
  }

  putBatch(entries: readonly FlowEntry[]): void {
    for (const e of entries) this.#map.set(flowId(e.key), e);
  }

  delete(key: FlowKey): boolean {
    return this.#map.delete(flowId(key));
  }

  *entries(): Iterable<FlowEntry> {
    yield* [...this.#map.values()];
  }

  nowNs(): number {
    return this.#clock();
  }

  /** Simulates the datapath seeing a packet of `key` now (sets last seen). */
  touch(key: FlowKey, nowNs = this.nowNs()): void {
    const e = this.#map.get(flowId(key));
    if (e) this.#map.set(flowId(key), { key, value: { ...e.value, lastSeenNs: nowNs } });
  }
}
