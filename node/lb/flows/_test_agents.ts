/**
 * Unit-test rig of the flow agent (not product API: tests import this file directly): agents over
 * an in-memory flow table with the tight timings the tests use and a bounded wait.
 *
 * @module
 */

import { FlowSyncAgent, type FlowSyncAgentOptions } from "./sync_agent.ts";
import { MemoryFlowTable } from "./table.ts";
import type { MemoryFlowStore } from "./_memory_store.ts";
import { Registry } from "../../../lib/metrics.ts";

/**
 * Polls `cond` every 5 ms; throws naming `what` after `ms` (default 10 s: what tests wait for
 * takes milliseconds, so the bound is only how long a failure takes, never reached under load).
 */
export async function until(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * A clock a test steps by hand: the flow table's (ns) and the agents' wall clock (ms) agree, so
 * idle timeouts and sweeps are driven by the test and not by how busy the machine is.
 */
export class TestClock {
  constructor(public ms = 1_000_000) {}
  readonly nowMs = (): number => this.ms;
  readonly nowNs = (): number => this.ms * 1e6;
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** An agent under test, its flow map and its metrics. */
export interface TestAgent {
  readonly agent: FlowSyncAgent;
  readonly table: MemoryFlowTable;
  readonly registry: Registry;
}

/**
 * An agent named `name` sharing `store`, with a fresh in-memory table and registry: short
 * blocking reads, no adaptive gather beyond the default, writes 1 ms after a flow. With `clock`,
 * its table and its wall clock are the test's (idle timeouts driven by hand).
 */
export function testAgent(
  name: string,
  store: MemoryFlowStore,
  options: Partial<FlowSyncAgentOptions> & Pick<FlowSyncAgentOptions, "vips"> & {
    clock?: TestClock;
  },
): TestAgent {
  const { clock, ...rest } = options;
  const table = new MemoryFlowTable({ clockNs: clock?.nowNs });
  const registry = new Registry();
  const agent = new FlowSyncAgent(table, store, {
    node: name,
    readBlockMs: 20,
    readGatherMaxMs: 20,
    flushIntervalMs: 1,
    registry,
    clockMs: clock?.nowMs,
    ...rest,
  });
  return { agent, table, registry };
}

/**
 * Starts `agents` in order; disposing the result stops them (`await using running = await
 * started(a, b)`). If one fails to start, those already started are stopped.
 */
export async function started(...agents: TestAgent[]): Promise<AsyncDisposable> {
  const stopAll = async (list: TestAgent[]) => {
    for (const a of list) await a.agent.stop();
  };
  for (const [i, a] of agents.entries()) {
    try {
      await a.agent.start();
    } catch (err) {
      await stopAll(agents.slice(0, i));
      throw err;
    }
  }
  return { [Symbol.asyncDispose]: () => stopAll(agents) };
}
