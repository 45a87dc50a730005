/**
 * The last line of every lab client (`hold_client.ts`, `connect_loop.ts`, `udp_stream.ts`, …): one
 * JSON object with `"msg":"summary"`. {@linkcode clientSummary} waits for it and parses it.
 *
 * @module
 */

import type { HostProcess } from "../host_process.ts";

/** The summary of `hold_client.ts`: long-lived connections and how they ended. */
export interface HoldSummary {
  connections: number;
  survived: number;
  /** Longest gap between two echoes on any connection, ms. */
  max_stall_ms: number;
  /** Each surviving connection's longest gap between two echoes, ms, longest first (≤ 1,000). */
  stalls_ms?: number[];
  /** Connections that died: their local port and why. */
  deaths: { port: number; reason: string }[];
}

/** Waits (bounded by `timeoutMs`) for `proc`'s summary line and returns it parsed. */
export async function clientSummary<T = HoldSummary>(
  proc: HostProcess,
  timeoutMs: number,
): Promise<T> {
  const line = await proc.waitForLine((l) => l.includes('"msg":"summary"'), { timeoutMs });
  try {
    return JSON.parse(line) as T;
  } catch (err) {
    throw new Error(`Client summary is not JSON: ${JSON.stringify(line.slice(0, 200))}`, {
      cause: err,
    });
  }
}
