/**
 * What Holdfast is doing now (`main.ts status`, entry `main.ts` here; docs/dashboard.md): the
 * operator's picture built from Redis (the LB model, flows per LB IP, egress leases and configs,
 * the LB nodes' health reports) and the nodes' `/metrics`, printed as tables or JSON, or served
 * as the live dashboard with its timeline. The controller (`controller/k8s/main.ts`) and the
 * demo (`lab/_demo_dashboard_server.ts`) serve the same dashboard.
 *
 * @module
 */
export { metricsUrl, readStatus, type ReadStatusOptions, scrapeMetrics } from "./collect.ts";
export {
  dashboardHandler,
  type RunningDashboard,
  startDashboard,
  type StartDashboardOptions,
  StatusFeed,
  type StatusFeedOptions,
} from "./dashboard.ts";
export { diffStatus, type TimelineEvent, type TimelineKind } from "./events.ts";
export { buildStatus, type StatusSnapshot, type StatusStore, type StoredState } from "./model.ts";
export { RedisStatusStore } from "./redis_status_store.ts";
export { renderStatusText } from "./text.ts";
