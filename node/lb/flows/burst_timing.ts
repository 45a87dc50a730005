/**
 * How flow sharing times its bursts: how long new-flow events gather in the datapath's ring
 * buffer before the agent takes them, and how the ring is read (`RingBufferReader` options for
 * both families' rings, node/lb/_datapath.ts). Measured in bench:agent-cost
 * (bench/RESULTS.md "Agent cost per flow").
 *
 * @module
 */

import { HF_RINGBUF_BYTES } from "../../bpf/consts.ts";

/**
 * How long the datapath's new-flow events gather in the ring buffer before the agent takes them
 * (the reader's `coalesceMs`), ms: one wake-up, one store write, one stream entry and one read
 * on each peer per burst instead of per flow — each costs an agent ~100–400 µs of CPU, far more
 * than the flow itself (bench:agent-cost). The shortest wait, at high rates; lower rates wait
 * longer, up to {@link LEARN_COALESCE_MAX_MS}.
 */
export const LEARN_COALESCE_MS = 20;

/**
 * Longest gathering wait in the ring buffer by default, ms (`main.ts agent --learn-window-ms`):
 * below ~10k new flows/s the wait grows from {@link LEARN_COALESCE_MS} up to this so a burst
 * still carries about {@link LEARN_BURST_FLOWS} flows — the fixed cost per burst (the timer's
 * wake-ups, the store write's round trip, one stream read on every peer; ~0.5–1.2 ms of an
 * agent's CPU) dominates at low rates.
 *
 * What it trades: a flow is shared at most this late (peers read without pausing while their
 * reads block, `_follower.ts`), so a node that dies, or an ECMP change, within this long of a
 * flow's first packet finds it unshared: its peers pick it again by Maglev, which gives the same
 * backend unless the backends changed meanwhile too. A first flow after a quiet spell is taken at
 * once: only a steady stream waits. A longer window is cheaper at low rates (bench:agent-cost,
 * bench/RESULTS.md: 1 s halves the learning node's CPU per flow at 1k flows/s) but leaves flows
 * unshared longer: connections opened under load shortly before a topology change then break
 * (tests/e2e/anycast_redirect_test.ts changes nodes 300 ms after its connections open).
 */
export const LEARN_COALESCE_MAX_MS = 200;

/**
 * New flows per second at which a burst fills the longest wait: the wait grows until a burst
 * carries this rate's worth of flows ({@link LEARN_BURST_FLOWS} with the default window).
 */
const FULL_WINDOW_RATE = 1000;

/** Flows per ring-buffer burst the adaptive wait aims at with the default window. */
export const LEARN_BURST_FLOWS = LEARN_COALESCE_MAX_MS * FULL_WINDOW_RATE / 1000;

/**
 * Flows per store write (the learner's batch): a whole burst even at the top rate (20 ms at
 * 50k/s is 1,000 flows), so a burst is one write, one stream entry and one read on each peer.
 */
export const LEARN_BATCH_FLOWS = 2000;

/**
 * How long the ring readers wait for a first record while idle, ms: close() ends the wait at
 * once (an eventfd), so this only bounds each wait; one wake-up a minute instead of one a second.
 */
export const FLOW_EVENT_IDLE_WAIT_MS = 60_000;

/**
 * Ring bytes per second of gathering wait: the default ring (`HF_RINGBUF_BYTES`, 8 MiB, ~209k IPv4
 * events) holds a 1 s window at 200k new flows/s.
 */
const RING_BYTES_PER_WINDOW_S = HF_RINGBUF_BYTES;

/**
 * How the agent reads the datapath's new-flow ring buffers (`RingBufferReader` options): bursts
 * every {@link LEARN_COALESCE_MS} to `windowMs` (default {@link LEARN_COALESCE_MAX_MS}); while
 * idle, one wait of up to {@link FLOW_EVENT_IDLE_WAIT_MS}. A smaller ring than the default (pinned
 * by an older version: 1 MiB) shortens the longest wait in proportion, so a window still fits in
 * it at the same rate.
 */
export function flowEventReader(
  windowMs: number = LEARN_COALESCE_MAX_MS,
  ringBytes: number = RING_BYTES_PER_WINDOW_S,
) {
  const maxMs = Math.min(windowMs, Math.floor(1000 * ringBytes / RING_BYTES_PER_WINDOW_S));
  return {
    coalesceMs: Math.min(LEARN_COALESCE_MS, maxMs),
    coalesceMaxMs: maxMs,
    coalesceRecords: Math.max(1, Math.round(maxMs * FULL_WINDOW_RATE / 1000)),
    pollMs: FLOW_EVENT_IDLE_WAIT_MS,
  } as const;
}
