/**
 * What one reconcile pass must write: the difference between what the allocator decided (and the
 * config check said) and what the cluster's objects show. Plain functions; the reconcile loop
 * (`controller.ts`) runs the writes with fencing, concurrency and retries.
 *
 * Nothing is planned for an object that already shows the outcome (conditions compared without
 * `lastTransitionTime`), so a restarted controller writes nothing.
 *
 * @module
 */

import {
  ADDRESS_ALLOCATED_CONDITION,
  type IpamCondition,
  type IpamEvent,
  type IpamResult,
  isClaimed,
} from "../ipam/mod.ts";
import type { ConfigView } from "./_config.ts";
import {
  annotationProblem,
  CONFIGURED_CONDITION,
  configuredCondition,
  INVALID_ANNOTATION,
} from "./_configured.ts";
import { keyOf, type KubeObject } from "./objects.ts";
import {
  type ClusterWriter,
  type EventInput,
  mergeConditions,
  type ObjectTarget,
  sameConditions,
} from "./status.ts";

/** One status write. */
export interface PlannedWrite {
  /** `Service`, `AddressPool` or `LoadBalancerConfig` (metrics label). */
  readonly kind: string;
  /** Identifies the object among pending writes. */
  readonly key: string;
  /** The resourceVersion the write was computed from. */
  readonly resourceVersion?: string;
  apply(writer: ClusterWriter): Promise<void>;
}

const ACTIONS: Record<IpamEvent["reason"], string> = {
  AddressAllocated: "Allocate",
  AddressReleased: "Release",
  AllocationFailed: "Allocate",
  PoolInvalid: "Validate",
};

function sameIngress(svc: KubeObject, ips: readonly string[]): boolean {
  const cur: { ip?: string; ipMode?: string }[] = svc.status?.loadBalancer?.ingress ?? [];
  // An API server without the LoadBalancerIPMode feature drops ipMode: absent counts as VIP, or
  // every pass would write the status again.
  return cur.length === ips.length &&
    cur.every((i, n) => i.ip === ips[n] && (i.ipMode ?? "VIP") === "VIP");
}

function target(kind: ObjectTarget["kind"], obj: KubeObject): ObjectTarget {
  return {
    kind,
    ...(obj.metadata?.namespace ? { namespace: obj.metadata.namespace } : {}),
    name: obj.metadata?.name ?? "",
    uid: obj.metadata?.uid,
    resourceVersion: obj.metadata?.resourceVersion,
  };
}

/**
 * The status writes `result` (and the config check) call for, given the objects as they are.
 * `problems`: claimed Services that cannot be converted (key → error), for their
 * `holdfast.io/Configured` condition and `InvalidAnnotation` Event.
 */
export function planStatusWrites(
  result: IpamResult,
  services: readonly KubeObject[],
  pools: readonly KubeObject[],
  config: KubeObject | undefined,
  cfg: ConfigView,
  now: Date,
  problems: ReadonlyMap<string, string> = new Map(),
): PlannedWrite[] {
  const out: PlannedWrite[] = [];
  const byKey = new Map(services.map((s) => [keyOf(s), s]));
  for (const a of result.services) {
    const key = `${a.namespace}/${a.name}`, svc = byKey.get(key)!;
    const conditions = svc.status?.conditions as IpamCondition[] | undefined;
    const configured = configuredCondition(svc, annotationProblem(svc, problems.get(key)));
    const desired = configured ? [a.condition, configured] : [a.condition];
    if (sameIngress(svc, a.addresses) && sameConditions(conditions, desired)) continue;
    // A new or different annotation problem is also told as an Event, after the status.
    const tell = configured?.status === "False" && !sameConditions(conditions, [configured]);
    const t = target("Service", svc);
    const ingress = a.addresses.length > 0
      ? a.addresses.map((ip) => ({ ip, ipMode: "VIP" as const }))
      : null;
    const status = {
      loadBalancer: { ingress },
      conditions: mergeConditions(conditions, desired, now),
    };
    out.push({
      kind: "Service",
      key,
      resourceVersion: t.resourceVersion,
      apply: async (w) => {
        await w.patchServiceStatus(t, status);
        if (!tell) return;
        await w.emitEvent({
          regarding: t,
          type: "Warning",
          reason: INVALID_ANNOTATION,
          note: configured!.message,
          action: "Validate",
        });
      },
    });
  }
  // Level-triggered release: a Service we no longer claim loses what we wrote.
  for (const svc of services) {
    const conditions = (svc.status?.conditions ?? []) as IpamCondition[];
    if (!conditions.some((c) => c.type === ADDRESS_ALLOCATED_CONDITION)) continue;
    if (isClaimed(svc, cfg.claim)) continue;
    const others = conditions.filter((c) =>
      c.type !== ADDRESS_ALLOCATED_CONDITION && c.type !== CONFIGURED_CONDITION
    );
    const t = target("Service", svc);
    const status = {
      loadBalancer: { ingress: null },
      conditions: others.length > 0 ? others : null,
    };
    out.push({
      kind: "Service",
      key: keyOf(svc),
      resourceVersion: t.resourceVersion,
      apply: (w) => w.patchServiceStatus(t, status),
    });
  }
  const poolsByName = new Map(pools.map((p) => [keyOf(p), p]));
  for (const p of result.pools) {
    const obj = poolsByName.get(p.name)!, cur = obj.status ?? {};
    const gen = obj.metadata?.generation;
    if (
      cur.total === p.total && cur.used === p.used && cur.available === p.available &&
      cur.observedGeneration === gen && sameConditions(cur.conditions, p.conditions)
    ) continue;
    const t = target("AddressPool", obj);
    const status = {
      ...(gen !== undefined ? { observedGeneration: gen } : {}),
      total: p.total,
      used: p.used,
      available: p.available,
      conditions: mergeConditions(cur.conditions, p.conditions, now),
    };
    out.push({
      kind: "AddressPool",
      key: `pool:${p.name}`,
      resourceVersion: t.resourceVersion,
      apply: (w) => w.patchObjectStatus(t, status),
    });
  }
  const ready = cfg.ready;
  if (config && ready) {
    const cur = config.status ?? {}, gen = config.metadata?.generation;
    const conditions = cfg.peers ? [ready, cfg.peers] : [ready];
    if (cur.observedGeneration !== gen || !sameConditions(cur.conditions, conditions)) {
      const t = target("LoadBalancerConfig", config);
      const status = {
        ...(gen !== undefined ? { observedGeneration: gen } : {}),
        conditions: mergeConditions(cur.conditions, conditions, now),
      };
      const peersBefore = (cur.conditions as IpamCondition[] | undefined)
        ?.find((c) => c.type === "PeersAccepted");
      out.push({
        kind: "LoadBalancerConfig",
        key: `config:${t.name}`,
        resourceVersion: t.resourceVersion,
        apply: async (w) => {
          await w.patchObjectStatus(t, status);
          const peers = cfg.peers;
          if (peers?.status === "False" && peersBefore?.message !== peers.message) {
            await w.emitEvent({
              regarding: t,
              type: "Warning",
              reason: peers.reason,
              note: peers.message,
              action: "Validate",
            });
          }
          if (ready.status !== "False") return;
          await w.emitEvent({
            regarding: t,
            type: "Warning",
            reason: "ConfigInvalid",
            note: ready.message,
            action: "Validate",
          });
        },
      });
    }
  }
  return out;
}

/** The allocator's Events as the writer takes them (with the objects' uids). */
export function planEvents(
  result: IpamResult,
  services: readonly KubeObject[],
  pools: readonly KubeObject[],
): EventInput[] {
  const byKey = new Map([...services, ...pools].map((o) => [keyOf(o), o]));
  return result.events.map((e) => {
    const o = e.object;
    const obj = byKey.get(o.kind === "Service" ? `${o.namespace}/${o.name}` : o.name);
    return {
      regarding: { ...o, ...(obj?.metadata?.uid ? { uid: obj.metadata.uid } : {}) },
      type: e.type,
      reason: e.reason,
      note: e.message,
      action: ACTIONS[e.reason],
    };
  });
}
