/**
 * The lab's stand-in for the Deployment, ReplicaSet and DaemonSet controllers and the scheduler:
 * Pods for each Deployment (its `replicas`, rolling update with one surge, scale down newest
 * first) and for each DaemonSet (one per Node its nodeSelector and tolerations admit; rolling
 * update one node at a time: the old pod is deleted, its successor created once it is gone), each
 * placed on a Node (nodeSelector, NoSchedule/NoExecute taints — for a Deployment's pods a Node not
 * Ready counts as tainted `node.kubernetes.io/unreachable` — fewest pods of the workload), and
 * the workloads' `status` as those controllers write it. Pods carry the label
 * `pod-template-hash` (a hash of the template) and an ownerReference to their workload.
 *
 * @module
 */

import type { Obj, ResourceType } from "../kube/mod.ts";
import type { Rest } from "../kube/rest.ts";

type Any = Record<string, unknown>;
const o = (v: unknown): Any => (v ?? {}) as Any;
const W = { manager: "lab-kube-controller-manager" };
/** The finalizer the lab kubelet puts on the pods it runs: it holds a delete for the grace period. */
export const KUBELET_FINALIZER = "lab.holdfast.io/kubelet";

/** FNV-1a of the template, as a short label value. */
export function templateHash(template: unknown): string {
  let h = 0x811c9dc5;
  for (const ch of JSON.stringify(template)) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return h.toString(36);
}

/** A Pod's Ready condition. */
export function podReady(pod: Obj): boolean {
  const conds = (o(pod.status).conditions ?? []) as Any[];
  return conds.some((c) => c.type === "Ready" && c.status === "True");
}

const deleting = (pod: Obj) => o(pod.metadata).deletionTimestamp !== undefined;

/** A Node's taints, with the one the node lifecycle controller adds to a node not Ready. */
function taints(node: Obj): Any[] {
  const own = (o(node.spec).taints ?? []) as Any[];
  const conds = (o(node.status).conditions ?? []) as Any[];
  const ready = conds.find((c) => c.type === "Ready");
  if (ready === undefined || ready.status === "True") return own;
  return [...own, { key: "node.kubernetes.io/unreachable", effect: "NoSchedule" }];
}

function admits(node: Obj, podSpec: Any, unreachable = false): boolean {
  const labels = o(o(node.metadata).labels);
  for (const [k, v] of Object.entries(o(podSpec.nodeSelector))) if (labels[k] !== v) return false;
  const tolerations = (podSpec.tolerations ?? []) as Any[];
  for (const taint of unreachable ? taints(node) : (o(node.spec).taints ?? []) as Any[]) {
    if (taint.effect === "PreferNoSchedule") continue;
    const ok = tolerations.some((t) =>
      (t.operator === "Exists" && (t.key === undefined || t.key === taint.key)) ||
      (t.key === taint.key && (t.value ?? "") === (taint.value ?? ""))
    );
    if (!ok) return false;
  }
  return true;
}

/** The workload controllers over one API test server's objects. */
export class Workloads {
  readonly #types: Record<string, ResourceType>;
  #serial = 0;

  constructor(readonly rest: Rest) {
    const find = (g: string, v: string, p: string) => {
      const t = rest.registry.find(g, v, p);
      if (!t) throw new Error(`the API test server has no ${p}`);
      return t;
    };
    this.#types = {
      pods: find("", "v1", "pods"),
      nodes: find("", "v1", "nodes"),
      deployments: find("apps", "v1", "deployments"),
      daemonsets: find("apps", "v1", "daemonsets"),
    };
  }

  #list(kind: "pods" | "nodes" | "deployments" | "daemonsets"): Obj[] {
    const t = this.#types[kind]!;
    return this.rest.registry.store.list(`${t.group}/${t.plural}`);
  }

  #owned(w: Obj, pods: Obj[]): Obj[] {
    const uid = o(w.metadata).uid;
    return pods.filter((p) =>
      ((o(p.metadata).ownerReferences ?? []) as Any[]).some((r) => r.uid === uid)
    );
  }

  #createPod(w: Obj, kind: string, node: string): void {
    const m = o(w.metadata), tpl = o(o(w.spec).template);
    const hash = templateHash(tpl);
    const name = kind === "DaemonSet"
      ? `${m.name}-${node}-${(++this.#serial).toString(36)}`
      : `${m.name}-${hash}-${(++this.#serial).toString(36)}`;
    this.rest.create(this.#types.pods!, String(m.namespace), {
      metadata: {
        name,
        labels: { ...o(o(tpl.metadata).labels), "pod-template-hash": hash },
        ...(o(tpl.metadata).annotations ? { annotations: o(tpl.metadata).annotations } : {}),
        ownerReferences: [{
          apiVersion: "apps/v1",
          kind,
          name: m.name,
          uid: m.uid,
          controller: true,
        }],
        finalizers: [KUBELET_FINALIZER],
      },
      spec: { ...o(tpl.spec), nodeName: node },
    }, W);
  }

  #delete(pod: Obj): void {
    const m = o(pod.metadata);
    if (!deleting(pod)) this.rest.delete(this.#types.pods!, String(m.namespace), String(m.name));
  }

  #setStatus(kind: "deployments" | "daemonsets", w: Obj, status: Any): void {
    const m = o(w.metadata);
    const next = { observedGeneration: m.generation, ...status };
    if (JSON.stringify(o(w.status)) === JSON.stringify({ ...o(w.status), ...next })) return;
    this.rest.patch(this.#types[kind]!, String(m.namespace), String(m.name), "merge", {
      status: next,
    }, { ...W, subresource: "status" });
  }

  /** One pass over every Deployment and DaemonSet. */
  reconcile(): void {
    const nodes = this.#list("nodes");
    for (const d of this.#list("deployments")) this.#deployment(d, nodes);
    for (const ds of this.#list("daemonsets")) this.#daemonSet(ds, nodes);
  }

  #deployment(d: Obj, nodes: Obj[]): void {
    if (deleting(d)) return;
    const hash = templateHash(o(o(d.spec).template));
    const pods = this.#owned(d, this.#list("pods")).filter((p) => !deleting(p));
    const want = Number(o(d.spec).replicas ?? 1);
    const current = pods.filter((p) => o(o(p.metadata).labels)["pod-template-hash"] === hash);
    const old = pods.filter((p) => !current.includes(p));
    const readyCurrent = current.filter(podReady);
    if (current.length < want && old.length + current.length <= want) {
      const podSpec = o(o(o(d.spec).template).spec);
      const fit = nodes.filter((n) => admits(n, podSpec, true));
      if (fit.length > 0) {
        const count = (n: Obj) =>
          pods.filter((p) => o(p.spec).nodeName === o(n.metadata).name).length;
        fit.sort((a, b) =>
          count(a) - count(b) ||
          String(o(a.metadata).name).localeCompare(String(o(b.metadata).name))
        );
        this.#createPod(d, "ReplicaSet", String(o(fit[0]!.metadata).name));
      }
    } else if (old.length > 0 && readyCurrent.length >= Math.min(want, current.length)) {
      this.#delete(old[0]!); // rolling: one old pod goes once the new ones are ready
    } else if (current.length > want) {
      const sorted = [...current].sort((a, b) =>
        Number(podReady(a)) - Number(podReady(b)) ||
        String(o(b.metadata).creationTimestamp).localeCompare(
          String(o(a.metadata).creationTimestamp),
        )
      );
      this.#delete(sorted[0]!);
    }
    const ready = pods.filter(podReady).length;
    this.#setStatus("deployments", d, {
      replicas: pods.length,
      updatedReplicas: current.length,
      readyReplicas: ready,
      availableReplicas: ready,
      unavailableReplicas: Math.max(0, want - ready),
      conditions: [{
        type: "Available",
        status: ready >= want ? "True" : "False",
        reason: ready >= want ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable",
      }],
    });
  }

  #daemonSet(ds: Obj, nodes: Obj[]): void {
    if (deleting(ds)) return;
    const tpl = o(o(ds.spec).template), hash = templateHash(tpl);
    const all = this.#owned(ds, this.#list("pods"));
    const fit = nodes.filter((n) => admits(n, o(tpl.spec)));
    let rolling = all.some(deleting);
    let updated = 0, ready = 0;
    for (const n of fit) {
      const name = String(o(n.metadata).name);
      const here = all.filter((p) => o(p.spec).nodeName === name);
      const live = here.filter((p) => !deleting(p));
      if (here.length === 0) {
        this.#createPod(ds, "DaemonSet", name);
        continue;
      }
      const pod = live[0];
      if (pod === undefined) continue;
      if (podReady(pod)) ready++;
      if (o(o(pod.metadata).labels)["pod-template-hash"] === hash) updated++;
      else if (!rolling && all.filter((p) => !deleting(p)).every(podReady)) {
        this.#delete(pod); // one node at a time (maxUnavailable 1)
        rolling = true;
      }
    }
    this.#setStatus("daemonsets", ds, {
      desiredNumberScheduled: fit.length,
      currentNumberScheduled: all.filter((p) => !deleting(p)).length,
      updatedNumberScheduled: updated,
      numberReady: ready,
      numberAvailable: ready,
      numberUnavailable: Math.max(0, fit.length - ready),
      numberMisscheduled: 0,
    });
  }
}
