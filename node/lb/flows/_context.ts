/**
 * What the flow agent's jobs share: the flow map, the store, the state machine, the followed LB
 * IPs, the trust gate, stream positions, settings, and where to report a store failure.
 *
 * @module
 */

import type { Logger } from "../../../lib/log.ts";
import type { FollowedVips } from "./_followed.ts";
import type { FlowGate } from "./_gate.ts";
import type { AgentMetrics } from "./_metrics.ts";
import type { AgentStateMachine } from "./_state.ts";
import type { FlowSharingMode, TablePicker } from "./exceptions.ts";
import type { FlowTally } from "./_tally.ts";
import type { FlowStore } from "./store.ts";
import type { FlowTable } from "./table.ts";

/** The flow agent's shared parts, handed to each of its jobs. */
export interface AgentContext {
  /** This LB node's name, written with every change. */
  readonly node: string;
  readonly table: FlowTable;
  readonly store: FlowStore;
  readonly log: Logger;
  readonly metrics: AgentMetrics;
  readonly state: AgentStateMachine;
  readonly followed: FollowedVips;
  readonly gate: FlowGate;
  /** Learned and installed flows, logged as periodic summary lines. */
  readonly tally: FlowTally;
  /** `all`: every flow is announced and installed everywhere; `exceptions`: only exceptions. */
  readonly sharing: FlowSharingMode;
  /** What this node's current Maglev tables pick (exceptions-only sharing; null: unknown). */
  readonly picker: TablePicker | null;
  /** Stream position per followed LB IP: set by restores, advanced by the follower. */
  readonly positions: Map<string, string>;
  /** A flow with no packet for this long expires everywhere, ms. */
  readonly idleMs: number;
  /** Wall clock, ms since the epoch: learn times, reported last seen, expiry cutoffs. */
  nowMs(): number;
  /** Flows per store write. */
  readonly batchSize: number;
  /** Reports a failed store call: the agent goes store-down and recovers. */
  storeFailed(err: unknown, during: string): void;
  /** Checks the store is still the incarnation restored from (recovers if not); never throws. */
  verifyStore(during: string): Promise<void>;
  /** Reports a successful write: the store works again (resets the recovery backoff). */
  storeWorked(): void;
}
