/**
 * Each flow agent's jobs that tests drive directly (`_testing.ts`); the agent keeps them private.
 *
 * @module
 */

import type { Learner } from "./_learner.ts";
import type { Sweeper } from "./_sweeper.ts";

/** The learner and sweeper of each {@link FlowSyncAgent} (keyed by the agent). */
export const agentJobs = new WeakMap<object, { learner: Learner; sweeper: Sweeper }>();
