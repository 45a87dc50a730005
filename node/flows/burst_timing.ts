/**
 * How flow sharing times its bursts: how long new-flow events gather in the datapath's ring
 * buffer before the agent takes them, and how the ring is read (`RingBufferReader` options for
 * both families' rings, node/_node_datapath.ts). Measured in bench:agent-cost
 * (bench/RESULTS.md "Agent cost per flow").
 *
 * @module
 */

/**
 * How long the datapath's new-flow events gather in the ring buffer before the agent takes them
 * (the reader's `coalesceMs`), ms: one wake-up, one store write, one stream entry and one read
 * on each peer per burst instead of per flow — each costs an agent ~100–400 µs of CPU, far more
 * than the flow itself (bench:agent-cost). The shortest wait, at high rates; lower rates wait
 * longer, up to {@link LEARN_COALESCE_MAX_MS}.
 */
export const LEARN_COALESCE_MS = 20;

/**
 * Longest gathering wait in the ring buffer, ms: below ~10k new flows/s the wait grows from
 * {@link LEARN_COALESCE_MS} up to this so a burst still carries about
 * {@link LEARN_BURST_FLOWS} flows — the fixed cost per burst (a timer wake-up, the store
 * write's round trip, one stream read on every peer) dominates at low rates. Peers read without
 * pausing while their reads block (`_follower.ts`), so this is also about how late a peer gets a
 * flow at low rates; and a node that dies loses up to this much of unshared flows (its peers
 * pick them again by Maglev).
 */
export const LEARN_COALESCE_MAX_MS = 200;

/** Flows per ring-buffer burst the adaptive wait aims at (the reader's `coalesceRecords`). */
export const LEARN_BURST_FLOWS = 200;

/**
 * How the agent reads the datapath's new-flow ring buffer (`RingBufferReader` options): bursts
 * every {@link LEARN_COALESCE_MS} to {@link LEARN_COALESCE_MAX_MS}; while idle, one wait of up
 * to a second (the stream read waits as long), instead of ten 100 ms waits, each a thread
 * hand-off.
 */
export const FLOW_EVENT_READER = {
  coalesceMs: LEARN_COALESCE_MS,
  coalesceMaxMs: LEARN_COALESCE_MAX_MS,
  coalesceRecords: LEARN_BURST_FLOWS,
  pollMs: 1000,
} as const;
