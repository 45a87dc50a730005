/**
 * The shared flow store as the sync agent needs it, behind a narrow interface: the real one is
 * Redis (`redis_store.ts`); `_memory_store.ts` stands in for unit tests.
 *
 * Flows are addressed per LB IP (`vip`: dotted IPv4 or RFC 5952 IPv6 text) by their field
 * (`flowField` in `field.ts`).
 *
 * @module
 */

import type { FlowBackend } from "../../bpf/flow.ts";

/** A flow as stored: field within its LB IP, backend (IPv4 host-order u32, or IPv6 text). */
export interface StoredFlow {
  readonly field: string;
  readonly backend: FlowBackend;
  /** Version of the Maglev table that placed it (exceptions-only sharing; 0 or absent: none). */
  readonly version?: number;
}

/** How {@link FlowStore.learn} writes. */
export interface LearnOptions {
  node: string;
  nowMs: number;
  idleTimeoutMs: number;
  /** Announce on the stream (default true); false: stored only (exceptions-only sharing). */
  announce?: boolean;
}

/** A frontend whose flows a purge removes: LB IP (text), port, IP protocol number. */
export interface PurgeScope {
  readonly vip: string;
  readonly port: number;
  readonly proto: number;
}

/** One stream entry: a batch of additions or removals by one node. */
export interface FlowChange {
  readonly vip: string;
  /** Stream entry ID. */
  readonly id: string;
  readonly node: string;
  readonly op: "add" | "del";
  /** Why flows were removed (`del` only): `idle` or `purge`. */
  readonly reason?: string;
  /** For `del`, backend is 0. */
  readonly flows: readonly StoredFlow[];
}

/** Thrown when the store cannot be reached; the agent queues and retries. One home: lib/. */
export { StoreUnavailableError } from "../../../lib/redis_connection.ts";

/** The shared flow store. Every method may throw {@link StoreUnavailableError}. */
export interface FlowStore {
  /**
   * Identity of the store's current incarnation for these LB IPs; changes when their data was
   * lost (Redis restarted without persistence). Creates it when missing.
   */
  instanceId(vips: readonly string[]): Promise<string>;
  /**
   * Calls `listener` whenever the connection to the store came back after it was lost (a store
   * without connections leaves it out). The store may have restarted empty with no call failing
   * meanwhile, so the agent checks {@link instanceId} then. Returns the unsubscriber.
   */
  onReconnect?(listener: () => void): () => void;
  /**
   * Stores flows (last writer wins) learned at `nowMs` and announces them, atomically: stored
   * values and announcements are in the same order.
   */
  learn(vip: string, flows: readonly StoredFlow[], options: LearnOptions): Promise<void>;
  /** Raises the last activity of flows. */
  touch(
    vip: string,
    seen: readonly { field: string; lastSeenMs: number }[],
    options: { idleTimeoutMs: number },
  ): Promise<void>;
  /**
   * Removes flows whose learn time and last activity are at or before `cutoffMs`, announces and
   * returns them — if this node wins the LB IP's expiry lock for `lockMs` (else returns []).
   */
  expire(
    vip: string,
    cutoffMs: number,
    options: { node: string; lockMs: number },
  ): Promise<string[]>;
  /** Which of `fields` are stored. */
  exists(vip: string, fields: readonly string[]): Promise<boolean[]>;
  /** Every stored flow of `vip`, in pages. */
  scan(vip: string, options?: { pageSize?: number }): AsyncIterable<StoredFlow[]>;
  /**
   * Removes the flows of one frontend (`scope`: LB IP, port, protocol) whose backend is
   * `backend` — not those of other frontends on the same LB IP — announces and returns their
   * fields.
   */
  purgeBackend(
    scope: PurgeScope,
    backend: FlowBackend,
    options: { node: string },
  ): Promise<string[]>;
  /** ID of the newest stream entry of `vip` ("0-0" if none): follow from here after a scan. */
  streamTail(vip: string): Promise<string>;
  /**
   * Stream entries after the given positions (vip → last ID), waiting up to `blockMs` for one.
   * Returns [] on timeout.
   */
  read(
    positions: ReadonlyMap<string, string>,
    options: { blockMs: number; count: number },
  ): Promise<FlowChange[]>;
  /** Closes connections. */
  close(): Promise<void>;
}
