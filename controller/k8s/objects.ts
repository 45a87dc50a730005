/**
 * The objects the controller reads, as plain types without `@kubernetes/client-node` (so the
 * reconcile loop and its unit tests load without it): any object, a watch event, the watched
 * resources, and the narrow read side ({@linkcode ClusterView}) the reconcile loop needs.
 *
 * @module
 */

/** Any Kubernetes object as the controller reads it (typed lists and raw watch events alike). */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    creationTimestamp?: string | Date | null;
    deletionTimestamp?: string | Date | null;
    ownerReferences?: {
      apiVersion?: string;
      kind?: string;
      name?: string;
      uid?: string;
      controller?: boolean;
      blockOwnerDeletion?: boolean;
    }[];
  };
  // deno-lint-ignore no-explicit-any
  [field: string]: any;
}

/** One change, as {@linkcode K8sSource} takes it. */
export interface ObjectEvent {
  readonly type: "add" | "update" | "delete";
  readonly object: KubeObject;
}

/** The resources the controller watches. */
export type ResourceName =
  | "services"
  | "endpointslices"
  | "addresspools"
  | "loadbalancerconfigs"
  /** EgressNATs (namespaced; controller/k8s/egress.ts). */
  | "egressnats"
  /** NAT pods: pods labelled `holdfast.io/egress` (any namespace). */
  | "egresspods"
  /** Deployments labelled `holdfast.io/egress`: the NAT pods' the controller makes. */
  | "egressdeployments"
  /** PodDisruptionBudgets labelled `holdfast.io/egress`. */
  | "egresspdbs"
  /** Every pod: clients picked by EgressNATs' `spec.sources[].podSelector`. */
  | "pods"
  /** Namespaces: their labels for `spec.sources[].namespaceSelector`. */
  | "namespaces"
  /** The policy ConfigMap (one object, by name, in the controller's namespace). */
  | "policy"
  /** Nodes: `lbNodeSelector` picks the LB nodes among them (controller/k8s/_settings.ts). */
  | "nodes"
  /** Pods of one node (`spec.nodeName`, option `localPodsOf`): the anycast agent's. */
  | "localpods";

/** Every watched resource, in the order they are started. */
export const RESOURCES: readonly ResourceName[] = [
  "addresspools",
  "loadbalancerconfigs",
  "services",
  "endpointslices",
  "egressnats",
  "egresspods",
  "egressdeployments",
  "egresspdbs",
  "pods",
  "namespaces",
  "nodes",
];

/** Events of one flush, per resource (resources without events are absent). */
export type Batch = Partial<Record<ResourceName, ObjectEvent[]>>;

/** The read side the reconcile loop needs (narrow, so tests can hand it plain arrays). */
export interface ClusterView {
  /** Every cached object of `resource`. */
  list(resource: ResourceName): KubeObject[];
}

/** `namespace/name` (or `name` for cluster-scoped objects). */
export function keyOf(o: KubeObject): string {
  const ns = o.metadata?.namespace, name = o.metadata?.name ?? "";
  return ns ? `${ns}/${name}` : name;
}
