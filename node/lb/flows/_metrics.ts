/**
 * The flow agent's metrics (docs/flows.md), shared by its jobs.
 *
 * @module
 */

import type { Counter, Gauge, Histogram, Registry } from "../../../lib/metrics.ts";

/** Every metric the flow agent exports. */
export interface AgentMetrics {
  readonly learned: Counter;
  readonly installed: Counter;
  readonly removed: Counter;
  readonly rejected: Counter;
  readonly dropped: Counter;
  readonly ignored: Counter;
  readonly queue: Gauge;
  readonly up: Gauge;
  readonly ready: Gauge;
  readonly state: Gauge;
  readonly writeSeconds: Histogram;
  readonly restoreSeconds: Gauge;
  readonly rewritten: Counter;
  readonly exceptionsPublished: Counter;
  readonly exceptionsInstalled: Counter;
  readonly unannounced: Counter;
}

/** Registers (or finds) the flow agent's metrics in `r`. */
export function agentMetrics(r: Registry): AgentMetrics {
  const vip = { labelNames: ["vip"] };
  return {
    learned: r.counter("holdfast_flows_learned_total", "Flows learned here and stored.", vip),
    installed: r.counter(
      "holdfast_flows_installed_total",
      "Flows installed into the flow map from the store (peers, restore).",
      vip,
    ),
    removed: r.counter(
      "holdfast_flows_removed_total",
      "Flows removed from the flow map (reason: idle, purge, orphan, stale, unfollowed).",
      { labelNames: ["vip", "reason"] },
    ),
    rejected: r.counter(
      "holdfast_flows_rejected_total",
      "Flows from the store not installed: their frontend is unknown here or their backend " +
        "does not serve it (reason: unknown_frontend, backend_not_serving).",
      { labelNames: ["vip", "reason"] },
    ),
    dropped: r.counter(
      "holdfast_flow_queue_dropped_total",
      "Learned flows dropped because the outage queue was full.",
    ),
    ignored: r.counter(
      "holdfast_flow_events_ignored_total",
      "New-flow events for an LB IP this agent does not sync.",
    ),
    queue: r.gauge("holdfast_flow_queue_length", "Learned flows waiting to be stored."),
    up: r.gauge("holdfast_flow_store_up", "1 while the flow agent is in sync with the store."),
    ready: r.gauge("holdfast_flow_agent_ready", "1 once the flow map was restored."),
    state: r.gauge(
      "holdfast_flow_agent_state",
      "1 for the flow agent's current state, 0 for the others.",
      { labelNames: ["state"] },
    ),
    writeSeconds: r.histogram(
      "holdfast_flow_write_seconds",
      "Time from a new-flow event to its batch being stored (oldest flow of each batch).",
    ),
    restoreSeconds: r.gauge("holdfast_flow_restore_seconds", "Duration of the last restore."),
    rewritten: r.counter(
      "holdfast_flows_rewritten_total",
      "Local flows written to the store by a restore because it lacked them (learned during an " +
        "outage or a shard failover, or the store lost its data).",
      vip,
    ),
    exceptionsPublished: r.counter(
      "holdfast_flow_exceptions_published_total",
      "Exceptions announced to peers (--flow-sharing exceptions): flows whose backend differs " +
        "from what the current Maglev table picks (why: learn, table_change).",
      { labelNames: ["vip", "why"] },
    ),
    exceptionsInstalled: r.counter(
      "holdfast_flow_exceptions_installed_total",
      "Exceptions installed into the flow map (--flow-sharing exceptions; via: stream, restore, " +
        "table_change).",
      { labelNames: ["vip", "via"] },
    ),
    unannounced: r.counter(
      "holdfast_flows_stored_unannounced_total",
      "Flows stored for durability but not announced: no exception (--flow-sharing exceptions).",
      vip,
    ),
  };
}
