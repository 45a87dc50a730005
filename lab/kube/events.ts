/**
 * One Event storage behind two APIs, as on a real server: `v1` Events are stored, and
 * `events.k8s.io/v1` Events are the same objects under other field names (`regarding` is
 * `involvedObject`, `note` is `message`, `deprecated*` the old counters), so an Event a
 * controller writes through `events.k8s.io/v1` shows in `kubectl describe` and
 * `kubectl get events`.
 *
 * @module
 */
import type { Obj } from "./resources.ts";

/** events.k8s.io/v1 field ↔ core v1 field (the same in both when absent here). */
const RENAMES: readonly [string, string][] = [
  ["regarding", "involvedObject"],
  ["note", "message"],
  ["reportingController", "reportingComponent"],
  ["deprecatedSource", "source"],
  ["deprecatedFirstTimestamp", "firstTimestamp"],
  ["deprecatedLastTimestamp", "lastTimestamp"],
  ["deprecatedCount", "count"],
];

const SAME = [
  "metadata",
  "eventTime",
  "series",
  "reportingInstance",
  "action",
  "reason",
  "related",
  "type",
];

function rename(obj: Obj, pairs: readonly [string, string][], apiVersion: string): Obj {
  const out: Obj = { apiVersion, kind: "Event" };
  for (const k of SAME) if (obj[k] !== undefined) out[k] = obj[k];
  for (const [from, to] of pairs) if (obj[from] !== undefined) out[to] = obj[from];
  return out;
}

/** A stored (core v1) Event as events.k8s.io/v1 shows it. */
export function eventsV1FromCore(obj: Obj): Obj {
  return rename(obj, RENAMES.map(([a, b]) => [b, a]), "events.k8s.io/v1");
}

/** An events.k8s.io/v1 Event as it is stored (core v1). */
export function coreFromEventsV1(obj: Obj): Obj {
  return rename(obj, RENAMES, "v1");
}
