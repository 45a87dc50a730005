/**
 * Keeps each EgressNAT's Deployment and PodDisruptionBudget (`_egress_workload.ts`) as derived:
 * creates what is missing (someone deleted it: it comes back), puts back what someone changed
 * (replicas, the template, labels, the owner reference: a PUT over the object's resourceVersion,
 * so a concurrent change retries at the next pass), and leaves alone an object of the same name
 * it does not control (condition `NATPods` False `Conflict`). Nothing is deleted here: the owner
 * references let Kubernetes' garbage collector remove both with the EgressNAT.
 *
 * The result is the EgressNAT's `NATPods` condition: True `Managed`, or False `InvalidSpec`
 * (the message names the field) / `Conflict` / `Deleting` (an EgressNAT being deleted gets
 * nothing made again, so a Foreground delete ends).
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import type { IpamCondition } from "../ipam/mod.ts";
import {
  controlledBy,
  corrected,
  deriveWorkload,
  drifted,
  type EgressWorkloadOptions,
  type Manifest,
} from "./_egress_workload.ts";
import { keyOf, type KubeObject } from "./objects.ts";

/** Writes the NAT pods' Deployment and PDB (kube_writer.ts on the API server). */
export interface WorkloadWriter {
  /** Creates `obj` (a Deployment or PodDisruptionBudget). */
  createWorkload(obj: KubeObject): Promise<void>;
  /** Replaces `obj` (its `metadata.resourceVersion` a precondition). */
  replaceWorkload(obj: KubeObject): Promise<void>;
}

/** The condition type this part owns. */
export const NAT_PODS = "NATPods";

/**
 * The workload writes' metric, on `registry` (lib/metrics.ts: registered by the part that
 * reconciles, controller/k8s/egress.ts, and passed to {@linkcode reconcileWorkload}).
 */
export const workloadWritesCounter = (registry: Registry) =>
  registry.counter(
    "holdfast_controller_egress_workload_writes_total",
    "Writes of EgressNATs' Deployments and PodDisruptionBudgets by kind, op and result",
    { labelNames: ["kind", "op", "result"] },
  );

/** The workload part of one pass over one EgressNAT. */
export async function reconcileWorkload(
  nat: KubeObject,
  deployments: readonly KubeObject[],
  pdbs: readonly KubeObject[],
  options: EgressWorkloadOptions,
  writer: WorkloadWriter,
  logger: Logger,
  isLeader: () => boolean,
  writes: ReturnType<typeof workloadWritesCounter> = workloadWritesCounter(processRegistry),
): Promise<IpamCondition> {
  const gen: number | undefined = nat.metadata?.generation;
  const g = gen !== undefined ? { observedGeneration: gen } : {};
  const cond = (status: "True" | "False", reason: string, message: string): IpamCondition => ({
    type: NAT_PODS,
    status,
    reason,
    message,
    ...g,
  });
  // Being deleted (Foreground: the collector waits for the Deployment and PDB to go): make
  // nothing, or the owner would wait for ever.
  if (nat.metadata?.deletionTimestamp) {
    return cond("False", "Deleting", "the EgressNAT is being deleted");
  }
  const derived = deriveWorkload(nat, options);
  if ("problem" in derived) return cond("False", "InvalidSpec", derived.problem);
  const uid = nat.metadata?.uid ?? "";
  const key = keyOf(nat);
  const find = (list: readonly KubeObject[], want: Manifest) =>
    list.find((o) =>
      o.metadata?.namespace === want.metadata.namespace && o.metadata?.name === want.metadata.name
    );
  const parts: [string, Manifest, KubeObject | undefined][] = [
    ["Deployment", derived.deployment, find(deployments, derived.deployment)],
    ["PodDisruptionBudget", derived.pdb, find(pdbs, derived.pdb)],
  ];
  for (const [kind, , actual] of parts) {
    if (actual && !controlledBy(actual, uid)) {
      return cond(
        "False",
        "Conflict",
        `${kind} "${
          keyOf(actual)
        }" exists and is not controlled by this EgressNAT; delete or rename it`,
      );
    }
  }
  for (const [kind, want, actual] of parts) {
    if (!isLeader()) break;
    const fields = actual ? drifted(actual, want) : [];
    if (actual && fields.length === 0) continue;
    const op = actual ? "replace" : "create";
    try {
      if (actual) await writer.replaceWorkload(corrected(actual, want));
      else await writer.createWorkload(want);
      writes.inc({ kind, op, result: "ok" });
      logger.info(actual ? "egress workload corrected" : "egress workload created", {
        egress: key,
        kind,
        name: want.metadata.name,
        ...(actual ? { fields } : {}),
        ...(kind === "Deployment" ? { replicas: want.spec.replicas } : {}),
      });
    } catch (err) {
      const e = err as { code?: unknown; statusCode?: unknown } | null;
      const raced = (e?.code ?? e?.statusCode) === 409; // the cache was behind: next pass
      writes.inc({ kind, op, result: raced ? "conflict" : "error" });
      (raced ? logger.debug : logger.warn).call(logger, "egress workload not written; retrying", {
        egress: key,
        kind,
        op,
        error: String((err as Error)?.message ?? err),
      });
    }
  }
  const d = parts[0]![2];
  const replicas = derived.deployment.spec.replicas;
  return cond(
    "True",
    "Managed",
    d === undefined
      ? `created Deployment and PodDisruptionBudget "${key}" (${replicas} replicas)`
      : `Deployment and PodDisruptionBudget "${key}": ${
        d.status?.readyReplicas ?? 0
      } of ${replicas} NAT pods ready`,
  );
}
