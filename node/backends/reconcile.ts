/**
 * Keeps the node maps equal to {@linkcode planNode}'s answer for the LB model and the pods on the
 * node (docs/backends.md). Nothing is written until both are known, so a restarted agent keeps
 * serving from the pinned maps until it has the whole picture; then every entry that should not
 * be there goes (pods deleted or moved while it was down), every missing one is written, and the
 * recorded flows of pods no longer served are deleted. Each change is one log line naming the
 * pod, its address and the frontend.
 *
 * @module
 */

import type { FileConfig } from "../lb/sources/file_source.ts";
import type { Logger } from "../../lib/log.ts";
import type { Registry } from "../../lib/metrics.ts";
import type { PodFrontend } from "../bpf/node_structs.ts";
import { type LocalPod, planNode, servingKey } from "./plan.ts";

/** What the reconciler writes: the node datapath's maps, or an in-memory stand-in in tests. */
export interface NodeMaps {
  setFrontend(f: PodFrontend): void;
  deleteFrontend(f: Omit<PodFrontend, "targetPort">): boolean;
  frontends(): PodFrontend[];
  pruneFlows(keep: ReadonlySet<string>, idleBeforeNs?: bigint): number;
}

/** Outcome of one pass. */
export interface ReconcileResult {
  readonly added: number;
  readonly removed: number;
  readonly flowsPruned: number;
}

const short = (name: string) => name.startsWith("default/") ? name.slice(8) : name;

/** The node's reconciler: `setModel` and `setPods` as they change. */
export class NodeBackends {
  readonly #maps: NodeMaps;
  readonly #log: Logger;
  #model: FileConfig | null = null;
  #pods: readonly LocalPod[] | null = null;
  /** pod address → pod name, as last applied (for the removal lines). */
  #names = new Map<string, string>();
  #conflicts = new Set<string>();
  #served = new Set<string>();
  #applied = false;
  readonly #gauges: { frontends?: (n: number) => void; pods?: (n: number) => void } = {};

  constructor(maps: NodeMaps, log: Logger, registry?: Registry) {
    this.#maps = maps;
    this.#log = log;
    if (registry) {
      const fe = registry.gauge(
        "holdfast_node_pod_frontends",
        "(pod, frontend) pairs this node translates for (hf_node_svc + hf_node_svc6)",
      );
      const pods = registry.gauge("holdfast_node_pods_serving", "Local pods serving a frontend");
      this.#gauges.frontends = (n) => fe.set(undefined, n);
      this.#gauges.pods = (n) => pods.set(undefined, n);
    }
  }

  /** True once model and pods were both known and applied. */
  get applied(): boolean {
    return this.#applied;
  }

  /** Addresses of the local pods that serve at least one frontend. */
  get servedPods(): ReadonlySet<string> {
    return this.#served;
  }

  setModel(model: FileConfig): ReconcileResult | null {
    this.#model = model;
    return this.#apply();
  }

  setPods(pods: readonly LocalPod[]): ReconcileResult | null {
    this.#pods = pods;
    return this.#apply();
  }

  #apply(): ReconcileResult | null {
    if (this.#model === null || this.#pods === null) return null;
    const { serving, conflicts } = planNode(this.#model, this.#pods);
    const conflictKeys = new Set(conflicts.map((c) => c.frontend));
    for (const c of conflicts) {
      if (!this.#conflicts.has(c.frontend)) {
        this.#log.error("services disagree on a pod's target port: the first one is used", {
          pod: c.pod,
          frontend: c.frontend,
          services: c.services,
        });
      }
    }
    this.#conflicts = conflictKeys;
    const want = new Map(serving.map((s) => [servingKey(s.frontend), s]));
    const have = new Map(this.#maps.frontends().map((f) => [servingKey(f), f]));
    let added = 0, removed = 0;
    for (const [key, f] of have) {
      if (want.has(key)) continue; // kept, or its target port overwritten below
      this.#maps.deleteFrontend(f);
      removed++;
      const pod = this.#names.get(f.pod) ?? "(unknown pod)";
      this.#log.info(`pod ${short(pod)} ${f.pod} no longer serves ${fe(f)}: removed`, {
        pod,
        ip: f.pod,
        frontend: fe(f),
      });
    }
    for (const [key, s] of want) {
      const h = have.get(key);
      if (h !== undefined && h.targetPort === s.frontend.targetPort) continue;
      this.#maps.setFrontend(s.frontend);
      added++;
      const f = s.frontend;
      this.#log.info(`pod ${short(s.pod)} ${f.pod} serves ${fe(f)} → :${f.targetPort}`, {
        pod: s.pod,
        ip: f.pod,
        frontend: fe(f),
        targetPort: f.targetPort,
        service: s.service,
      });
    }
    this.#names = new Map(serving.map((s) => [s.frontend.pod, s.pod]));
    const before = this.#served, served = new Set(serving.map((s) => s.frontend.pod));
    this.#served = served;
    // The flow maps are walked only when a pod stopped serving (or on the first pass, for what a
    // previous agent left): a change that only adds costs no walk.
    const lost = !this.#applied || [...before].some((p) => !served.has(p));
    const flowsPruned = lost ? this.#maps.pruneFlows(served) : 0;
    if (flowsPruned > 0) {
      this.#log.info("flows of pods no longer served removed", { flows: flowsPruned });
    }
    this.#gauges.frontends?.(want.size);
    this.#gauges.pods?.(this.#served.size);
    if (!this.#applied) {
      this.#log.info("node state applied", {
        frontends: want.size,
        pods: this.#served.size,
        added,
        removed,
      });
    }
    this.#applied = true;
    return { added, removed, flowsPruned };
  }

  /** Deletes recorded flows idle since before `idleBeforeNs` (monotonic ns); returns how many. */
  sweepIdle(idleBeforeNs: bigint): number {
    return this.#maps.pruneFlows(this.#served, idleBeforeNs);
  }
}

function fe(f: Omit<PodFrontend, "targetPort" | "pod">): string {
  return servingKey({ ...f, pod: "" }).trim();
}
