/**
 * Test entry points into a {@link FlowSyncAgent} (not product API): write what is queued now,
 * run one sweep now (a full one, or one as the sweep timer runs it).
 *
 * @module
 */

import type { FlowSyncAgent } from "./sync_agent.ts";
import { agentJobs } from "./_jobs.ts";

function jobsOf(agent: FlowSyncAgent) {
  const jobs = agentJobs.get(agent);
  if (!jobs) throw new Error(`Cannot reach the jobs of flow agent "${agent.node}"`);
  return jobs;
}

/** Writes everything `agent` has queued now (while in sync with the store) and waits for it. */
export function flush(agent: FlowSyncAgent): Promise<void> {
  return jobsOf(agent).learner.flush();
}

/** Runs one activity/expiry pass of `agent` now (while in sync), or waits for the one running. */
export function sweep(agent: FlowSyncAgent): Promise<void> {
  return jobsOf(agent).sweeper.sweep();
}

/**
 * Runs one sweep of `agent` as its timer would (the map read only on every report interval's
 * sweep), so a test with an injected clock steps sweeps instead of waiting for them.
 */
export function tick(agent: FlowSyncAgent): Promise<void> {
  return jobsOf(agent).sweeper.tick();
}
