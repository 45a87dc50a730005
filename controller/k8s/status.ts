/**
 * What the controller writes to the cluster, behind one narrow interface
 * ({@linkcode ClusterWriter}): Service status, AddressPool and LoadBalancerConfig status (merge
 * patches to `/status`) and Events (events.k8s.io/v1). `KubeClusterWriter` (kube_writer.ts) is
 * the client-node implementation, {@linkcode MemoryClusterWriter} the stand-in for unit tests.
 *
 * Conditions are `metav1.Condition`s: {@linkcode mergeConditions} keeps `lastTransitionTime`
 * when a condition's status does not change, and {@linkcode sameConditions} says whether a write
 * is needed at all (a restarted controller writes nothing when the cluster already shows it).
 *
 * @module
 */

import type { IpamCondition } from "../ipam/mod.ts";

/** The controller's name in Events (`reportingController`) and its field manager. */
export const REPORTING_CONTROLLER = "holdfast.io/controller";
/** Field manager of the controller's status patches. */
export const FIELD_MANAGER = "holdfast-controller";

/** The object a write concerns. */
export interface ObjectTarget {
  kind: "Service" | "AddressPool" | "LoadBalancerConfig" | "ConfigMap" | "EgressNAT";
  namespace?: string;
  name: string;
  uid?: string;
  /** The resourceVersion the status was computed from (a precondition when set). */
  resourceVersion?: string;
}

/** A Service's status as the controller sets it (`null` clears). */
export interface ServiceStatus {
  loadBalancer: { ingress: { ip: string; ipMode: "VIP" }[] | null };
  conditions: IpamCondition[] | null;
}

/** An Event to emit (events.k8s.io/v1). */
export interface EventInput {
  regarding: ObjectTarget;
  type: "Normal" | "Warning";
  /** CamelCase (`AddressAllocated`). */
  reason: string;
  /** What happened, for a person (`note`). */
  note: string;
  /** What the controller did (`Allocate`, `Release`, `Validate`). */
  action: string;
}

/** The controller's writes. Each may throw; the caller retries on its next pass. */
export interface ClusterWriter {
  patchServiceStatus(target: ObjectTarget, status: ServiceStatus): Promise<void>;
  /** Status of a custom object (AddressPool, LoadBalancerConfig; EgressNAT is namespaced). */
  patchObjectStatus(target: ObjectTarget, status: Record<string, unknown>): Promise<void>;
  emitEvent(event: EventInput): Promise<void>;
}

/** A time as RFC 3339 at second precision (what `metav1.Time` carries), or undefined. */
export function rfc3339(t: string | Date | null | undefined): string | undefined {
  if (t === undefined || t === null) return undefined;
  const d = typeof t === "string" ? new Date(t) : t;
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString().replace(/\.\d+Z$/, "Z");
}

/**
 * The conditions to write: `desired` (types it sets) replacing those of the same type in
 * `current`, others kept; `lastTransitionTime` kept where the status is unchanged, else `now`.
 */
export function mergeConditions(
  current: readonly IpamCondition[] | undefined,
  desired: readonly IpamCondition[],
  now: Date,
): IpamCondition[] {
  const mine = new Set(desired.map((c) => c.type));
  const out: IpamCondition[] = (current ?? []).filter((c) => !mine.has(c.type)).map((c) => ({
    ...c,
    lastTransitionTime: rfc3339(c.lastTransitionTime),
  }));
  for (const d of desired) {
    const before = current?.find((c) => c.type === d.type);
    const kept = before !== undefined && before.status === d.status
      ? rfc3339(before.lastTransitionTime)
      : undefined;
    out.push({ ...d, lastTransitionTime: kept ?? rfc3339(now) });
  }
  return out;
}

/** Whether `current` already shows every condition of `desired` (time aside). */
export function sameConditions(
  current: readonly IpamCondition[] | undefined,
  desired: readonly IpamCondition[],
): boolean {
  return desired.every((d) => {
    const c = current?.find((x) => x.type === d.type);
    return c !== undefined && c.status === d.status && c.reason === d.reason &&
      c.message === d.message && c.observedGeneration === d.observedGeneration;
  });
}

/** A write the {@linkcode MemoryClusterWriter} recorded. */
export type RecordedWrite =
  | { op: "service"; target: ObjectTarget; status: ServiceStatus }
  | { op: "object"; target: ObjectTarget; status: Record<string, unknown> }
  | { op: "event"; event: EventInput };

/** Records writes in memory (unit tests); `fail` makes the next writes throw. */
export class MemoryClusterWriter implements ClusterWriter {
  readonly writes: RecordedWrite[] = [];
  fail: Error | undefined;

  patchServiceStatus(target: ObjectTarget, status: ServiceStatus): Promise<void> {
    return this.#record({ op: "service", target, status });
  }
  patchObjectStatus(target: ObjectTarget, status: Record<string, unknown>): Promise<void> {
    return this.#record({ op: "object", target, status });
  }
  emitEvent(event: EventInput): Promise<void> {
    return this.#record({ op: "event", event });
  }
  /** The Events recorded, as `reason namespace/name`. */
  events(): string[] {
    return this.writes.flatMap((w) =>
      w.op === "event"
        ? [
          `${w.event.reason} ${
            w.event.regarding.namespace ? `${w.event.regarding.namespace}/` : ""
          }${w.event.regarding.name}`,
        ]
        : []
    );
  }
  #record(w: RecordedWrite): Promise<void> {
    if (this.fail) return Promise.reject(this.fail);
    this.writes.push(structuredClone(w));
    return Promise.resolve();
  }
}
