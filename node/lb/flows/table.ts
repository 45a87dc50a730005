/**
 * The node's flow map as the sync agent needs it, behind a narrow interface ({@link FlowTable},
 * defined next to the flow contract in node/bpf/flow_table.ts with the real one over the
 * datapath's BPF LRU hash); {@link MemoryFlowTable} stands in for unit tests and for agents run
 * without a datapath.
 *
 * @module
 */

import type { AnyFlowEntry, AnyFlowKey, AnyFlowValue } from "../../bpf/flow.ts";
import type { FlowTable } from "../../bpf/flow_table.ts";
import { flowId } from "./field.ts";

export type { FlowTable };

/**
 * An in-memory {@link FlowTable} of either family's keys; the clock is `performance.now()` unless
 * one is given.
 */
export class MemoryFlowTable implements FlowTable {
  #map = new Map<string, AnyFlowEntry>();
  #clock: () => number;

  constructor(options: { clockNs?: () => number } = {}) {
    this.#clock = options.clockNs ?? (() => Math.round(performance.now() * 1e6));
  }

  /** Number of entries. */
  get size(): number {
    return this.#map.size;
  }

  get(key: AnyFlowKey): AnyFlowValue | undefined {
    return this.#map.get(flowId(key))?.value;
  }

  put(key: AnyFlowKey, value: AnyFlowValue): void {
    this.#map.set(flowId(key), { key, value });
  }

  putBatch(entries: readonly AnyFlowEntry[]): void {
    for (const e of entries) this.#map.set(flowId(e.key), e);
  }

  delete(key: AnyFlowKey): boolean {
    return this.#map.delete(flowId(key));
  }

  *entries(): Iterable<AnyFlowEntry> {
    yield* [...this.#map.values()];
  }

  nowNs(): number {
    return this.#clock();
  }

  /** Simulates the datapath seeing a packet of `key` now (sets last seen). */
  touch(key: AnyFlowKey, nowNs = this.nowNs()): void {
    const e = this.#map.get(flowId(key));
    if (e) this.#map.set(flowId(key), { key, value: { ...e.value, lastSeenNs: nowNs } });
  }
}
