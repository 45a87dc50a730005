/**
 * {@linkcode ClusterWriter} on `@kubernetes/client-node`: merge patches to the `/status`
 * subresources (with the resourceVersion the status was computed from as a precondition) and
 * events.k8s.io/v1 Events reported by `holdfast.io/controller`, over kept-alive connections
 * (`_keep_alive.ts`; `close()` ends them). Status patches and Events go out through
 * `_raw_write.ts` (client-node's credentials and agent, not its generated layers, whose
 * deserialization of every returned object the controller does not need); the NAT workloads
 * through the generated clients.
 *
 * @module
 */

import * as k8s from "@kubernetes/client-node";
import { keepAliveConfig } from "./_keep_alive.ts";
import { rawWrite } from "./_raw_write.ts";
import type { WorkloadWriter } from "./_egress_workloads.ts";
import type { KubeObject } from "./objects.ts";
import {
  type ClusterWriter,
  type EventInput,
  FIELD_MANAGER,
  type ObjectTarget,
  REPORTING_CONTROLLER,
  type ServiceStatus,
} from "./status.ts";

const GROUP = "holdfast.io", VERSION = "v1alpha1";
const PLURAL: Record<string, string> = {
  AddressPool: "addresspools",
  LoadBalancerConfig: "loadbalancerconfigs",
  EgressNAT: "egressnats",
};
const MERGE_PATCH = "application/merge-patch+json";

function precondition(target: ObjectTarget): { metadata?: { resourceVersion: string } } {
  return target.resourceVersion ? { metadata: { resourceVersion: target.resourceVersion } } : {};
}

/** Writes through `@kubernetes/client-node` as `identity` (the Events' `reportingInstance`). */
export class KubeClusterWriter implements ClusterWriter, WorkloadWriter {
  readonly #apps: k8s.AppsV1Api;
  readonly #policy: k8s.PolicyV1Api;
  readonly #kc: k8s.KubeConfig;
  readonly #close: () => void;

  constructor(kc: k8s.KubeConfig, readonly identity: string) {
    const kept = keepAliveConfig(kc);
    this.#close = kept.close;
    this.#kc = kept.kc;
    this.#apps = kept.kc.makeApiClient(k8s.AppsV1Api);
    this.#policy = kept.kc.makeApiClient(k8s.PolicyV1Api);
  }

  /** Ends the kept-alive connections (a later write opens new ones). */
  close(): void {
    this.#close();
  }

  async patchServiceStatus(target: ObjectTarget, status: ServiceStatus): Promise<void> {
    const ns = encodeURIComponent(target.namespace ?? "default");
    await rawWrite(this.#kc, {
      method: "PATCH",
      path: `/api/v1/namespaces/${ns}/services/${encodeURIComponent(target.name)}/status`,
      query: { fieldManager: FIELD_MANAGER },
      contentType: MERGE_PATCH,
      body: { ...precondition(target), status },
    });
  }

  /** Creates an EgressNAT's Deployment or PodDisruptionBudget (`_egress_workloads.ts`). */
  async createWorkload(obj: KubeObject): Promise<void> {
    const namespace = obj.metadata?.namespace ?? "default";
    const request = { namespace, body: obj as never, fieldManager: FIELD_MANAGER };
    if (obj.kind === "Deployment") await this.#apps.createNamespacedDeployment(request);
    else await this.#policy.createNamespacedPodDisruptionBudget(request);
  }

  /** Replaces one (its resourceVersion a precondition: a concurrent change gets 409). */
  async replaceWorkload(obj: KubeObject): Promise<void> {
    const namespace = obj.metadata?.namespace ?? "default";
    const name = obj.metadata?.name ?? "";
    const request = { name, namespace, body: obj as never, fieldManager: FIELD_MANAGER };
    if (obj.kind === "Deployment") await this.#apps.replaceNamespacedDeployment(request);
    else await this.#policy.replaceNamespacedPodDisruptionBudget(request);
  }

  async patchObjectStatus(target: ObjectTarget, status: Record<string, unknown>): Promise<void> {
    const plural = PLURAL[target.kind];
    if (plural === undefined) {
      throw new Error(`Cannot patch status of "${target.name}": kind "${target.kind}" is not ours`);
    }
    const ns = target.namespace === undefined
      ? ""
      : `/namespaces/${encodeURIComponent(target.namespace)}`;
    await rawWrite(this.#kc, {
      method: "PATCH",
      path: `/apis/${GROUP}/${VERSION}${ns}/${plural}/${encodeURIComponent(target.name)}/status`,
      query: { fieldManager: FIELD_MANAGER },
      contentType: MERGE_PATCH,
      body: { ...precondition(target), status },
    });
  }

  /**
   * Emits `e` as an events.k8s.io/v1 Event named as client-go names them
   * (`<object>.<time in ns, hex>`): a generateName of `<object>.` is refused by the API server
   * (a generateName must be a DNS subdomain but for a trailing '-').
   */
  async emitEvent(e: EventInput): Promise<void> {
    const r = e.regarding;
    // Events about cluster-scoped objects go to "default", as the API server's own do.
    const namespace = r.namespace ?? "default";
    const apiVersion = r.kind === "Service" || r.kind === "ConfigMap"
      ? "v1"
      : `${GROUP}/${VERSION}`;
    await rawWrite(this.#kc, {
      method: "POST",
      path: `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`,
      contentType: "application/json",
      body: {
        apiVersion: "events.k8s.io/v1",
        kind: "Event",
        metadata: { name: eventName(r.name) },
        eventTime: microTime(new Date()),
        type: e.type,
        reason: e.reason,
        note: e.note.slice(0, 1024),
        action: e.action,
        reportingController: REPORTING_CONTROLLER,
        reportingInstance: this.identity,
        regarding: {
          apiVersion,
          kind: r.kind,
          name: r.name,
          ...(r.namespace ? { namespace: r.namespace } : {}),
          ...(r.uid ? { uid: r.uid } : {}),
        },
      },
    });
  }
}

/** A `metav1.MicroTime` as client-node's `V1MicroTime` writes it (six fractional digits). */
export function microTime(d: Date): string {
  return d.toISOString().slice(0, -1) + "000Z";
}

let eventSeq = 0n;

/** `name.<hex nanoseconds>`, unique within this process (a counter breaks ties in a millisecond). */
export function eventName(name: string): string {
  eventSeq = (eventSeq + 1n) % 1_000_000n;
  return `${name}.${(BigInt(Date.now()) * 1_000_000n + eventSeq).toString(16)}`;
}
