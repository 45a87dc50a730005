/**
 * Stand-in for the controllers a cluster runs and this server does not (no kube-controller-
 * manager, no kubelet): when enabled, each Deployment and DaemonSet whose generation is ahead of
 * its `status.observedGeneration` gets the status of a finished rollout (all replicas updated,
 * ready and available; a DaemonSet counts the Nodes its nodeSelector matches), so
 * `kubectl rollout status` and deploy tooling can wait on it. Off by default: a test that wants
 * to see a rollout stall leaves it off and writes status itself.
 *
 * @module
 */
import type { Obj } from "./resources.ts";
import type { Rest } from "./rest.ts";
import { parseLabelSelector } from "./selectors.ts";

function finishedStatus(kind: string, obj: Obj, nodes: Obj[]): Obj {
  const spec = (obj.spec ?? {}) as Obj;
  const generation = (obj.metadata as Obj).generation;
  if (kind === "Deployment") {
    const n = Number(spec.replicas ?? 1);
    return {
      observedGeneration: generation,
      replicas: n,
      updatedReplicas: n,
      readyReplicas: n,
      availableReplicas: n,
      conditions: [
        {
          type: "Available",
          status: "True",
          reason: "MinimumReplicasAvailable",
          message: "Deployment has minimum availability.",
        },
        {
          type: "Progressing",
          status: "True",
          reason: "NewReplicaSetAvailable",
          message: "ReplicaSet has successfully progressed.",
        },
      ],
    };
  }
  const selector = ((((spec.template ?? {}) as Obj).spec ?? {}) as Obj).nodeSelector as
    | Record<string, string>
    | undefined;
  const text = Object.entries(selector ?? {}).map(([k, v]) => `${k}=${v}`).join(",");
  const n = nodes.filter(parseLabelSelector(text)).length;
  return {
    observedGeneration: generation,
    currentNumberScheduled: n,
    desiredNumberScheduled: n,
    numberAvailable: n,
    numberMisscheduled: 0,
    numberReady: n,
    updatedNumberScheduled: n,
  };
}

/** Marks every Deployment and DaemonSet rolled out whenever its spec changes; returns the stop. */
export function simulateRollouts(rest: Rest): () => void {
  const types = ["deployments", "daemonsets"].map((p) => rest.registry.find("apps", "v1", p)!);
  const nodes = rest.registry.find("", "v1", "nodes")!;
  let pending = false;
  const settle = () => {
    pending = false;
    for (const type of types) {
      for (const obj of rest.registry.store.list(`apps/${type.plural}`)) {
        const meta = obj.metadata as Obj;
        if (
          (obj.status as Obj | undefined)?.observedGeneration === meta.generation ||
          meta.deletionTimestamp
        ) continue;
        const status = finishedStatus(type.kind, obj, rest.registry.store.list(`/${nodes.plural}`));
        rest.update(type, String(meta.namespace), String(meta.name), { ...obj, status }, {
          manager: "kube-controller-manager",
          subresource: "status",
        });
      }
    }
  };
  return rest.registry.store.subscribe((e) => {
    if (
      (e.resource !== "apps/deployments" && e.resource !== "apps/daemonsets") ||
      e.type === "DELETED" || pending
    ) return;
    pending = true;
    setTimeout(settle, 0);
  });
}
