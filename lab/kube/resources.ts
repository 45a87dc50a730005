/**
 * The kinds the test server serves: the built-in table (the ones Holdfast and kubectl use) and
 * resource types made from CustomResourceDefinitions.
 *
 * @module
 */

import { coreFromEventsV1, eventsV1FromCore } from "./events.ts";

/** A JSON object as the server stores it. */
export type Obj = Record<string, unknown>;

/** One additional printer column of a CRD version (`kubectl get` columns). */
export interface PrinterColumn {
  readonly name: string;
  readonly type: string;
  readonly jsonPath: string;
  readonly format?: string;
  readonly description?: string;
  readonly priority?: number;
}

/** A served resource: one group/version/plural. */
export interface ResourceType {
  /** API group, `""` for the core group. */
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  /** URL name, e.g. `pods`. */
  readonly plural: string;
  readonly singular: string;
  readonly namespaced: boolean;
  readonly shortNames: readonly string[];
  /** Has a `/status` subresource: the main resource ignores status, `/status` only status. */
  readonly status: boolean;
  /** `metadata.generation` bumps when anything but metadata and status changes. */
  readonly generation: boolean;
  /** Label/field names besides `metadata.name`/`metadata.namespace` usable in field selectors. */
  readonly fieldSelectors: readonly string[];
  /** The CRD's `openAPIV3Schema` for custom resources. */
  readonly schema?: Obj;
  /** The CRD's printer columns for custom resources. */
  readonly printerColumns?: readonly PrinterColumn[];
  /** Categories (`kubectl get all`). */
  readonly categories?: readonly string[];
  /** Whether this type was made from a CRD. */
  readonly custom: boolean;
  /** Built-ins: the `@kubernetes/client-node` model that lists the kind's fields. */
  readonly model?: string;
  /** Storage shared with another type (`group/plural`), read and written through converters. */
  readonly storage?: string;
  /** The stored form as this type shows it. */
  readonly fromStorage?: (obj: Obj) => Obj;
  /** This type's form as it is stored. */
  readonly toStorage?: (obj: Obj) => Obj;
}

/** Whether a JSON value is an object (not an array, not null). */
export function isObj(v: unknown): v is Obj {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** JSON with object keys sorted, so equal objects print equal whatever their key order. */
export function canonical(v: unknown): string {
  return JSON.stringify(
    v,
    (_k, x) => isObj(x) ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, x[k]])) : x,
  );
}

/**
 * Whether an update changes nothing but its own bookkeeping (resourceVersion, managedFields
 * times): the real server then stores nothing, keeps the resourceVersion and sends no event.
 */
export function unchanged(current: Obj, next: Obj): boolean {
  const a = (current.metadata ?? {}) as Obj, b = (next.metadata ?? {}) as Obj;
  return sameJson(current, next, "metadata") &&
    sameJson(a, b, "resourceVersion", "managedFields") &&
    sameManagedFields(a.managedFields, b.managedFields);
}

/** Whether two JSON values print equal by {@linkcode canonical} (keys with `undefined` absent). */
export function sameJson(x: unknown, y: unknown, ...skip: string[]): boolean {
  if (x === y) return true;
  if (typeof x !== "object" || typeof y !== "object" || x === null || y === null) {
    return JSON.stringify(x) === JSON.stringify(y); // NaN, undefined and functions as JSON has them
  }
  if (Array.isArray(x) || Array.isArray(y)) {
    if (!Array.isArray(x) || !Array.isArray(y) || x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) {
      // In an array, undefined prints as null.
      if (!sameJson(x[i] === undefined ? null : x[i], y[i] === undefined ? null : y[i])) {
        return false;
      }
    }
    return true;
  }
  const ox = x as Obj, oy = y as Obj;
  let nx = 0;
  for (const k in ox) {
    if (skip.includes(k) || ox[k] === undefined) continue;
    nx++;
    if (!Object.hasOwn(oy, k) || !sameJson(ox[k], oy[k])) return false;
  }
  let ny = 0;
  for (const k in oy) if (!skip.includes(k) && oy[k] !== undefined) ny++;
  return nx === ny;
}

/** managedFields compared without their entries' `time`. */
function sameManagedFields(x: unknown, y: unknown): boolean {
  if (!Array.isArray(x) || !Array.isArray(y)) return sameJson(x, y);
  if (x.length !== y.length) return false;
  return x.every((e, i) => isObj(e) && isObj(y[i]) ? sameJson(e, y[i], "time") : sameJson(e, y[i]));
}

/** `apiVersion` of a type: `v1` or `apps/v1`. */
export function apiVersionOf(t: ResourceType): string {
  return t.group ? `${t.group}/${t.version}` : t.version;
}

/** Storage key of a type: objects of the same group and plural share it across versions. */
export function storageKey(t: ResourceType): string {
  return t.storage ?? `${t.group}/${t.plural}`;
}

/** A stored object as `t` shows it. */
export function readAs(t: ResourceType, obj: Obj): Obj {
  return t.fromStorage ? t.fromStorage(obj) : obj;
}

/** An object of `t` as it is stored. */
export function writeAs(t: ResourceType, obj: Obj): Obj {
  return t.toStorage ? t.toStorage(obj) : obj;
}

interface BuiltinSpec {
  g: string;
  v: string;
  kind: string;
  plural: string;
  ns?: boolean;
  short?: string[];
  status?: boolean;
  gen?: boolean;
  fields?: string[];
  cat?: string[];
  model?: string;
  events?: boolean;
}

const BUILTINS: readonly BuiltinSpec[] = [
  {
    g: "",
    v: "v1",
    kind: "Namespace",
    plural: "namespaces",
    ns: false,
    short: ["ns"],
    status: true,
    fields: ["status.phase"],
  },
  {
    g: "",
    v: "v1",
    kind: "Service",
    plural: "services",
    short: ["svc"],
    status: true,
    fields: ["spec.clusterIP", "spec.type"],
    cat: ["all"],
  },
  {
    g: "",
    v: "v1",
    kind: "Pod",
    plural: "pods",
    short: ["po"],
    status: true,
    fields: [
      "spec.nodeName",
      "spec.restartPolicy",
      "spec.schedulerName",
      "spec.serviceAccountName",
      "spec.hostNetwork",
      "status.phase",
      "status.podIP",
      "status.nominatedNodeName",
    ],
    cat: ["all"],
  },
  {
    g: "",
    v: "v1",
    kind: "Node",
    plural: "nodes",
    ns: false,
    short: ["no"],
    status: true,
    fields: ["spec.unschedulable"],
  },
  { g: "", v: "v1", kind: "ConfigMap", plural: "configmaps", short: ["cm"] },
  { g: "", v: "v1", kind: "Secret", plural: "secrets", fields: ["type"] },
  { g: "", v: "v1", kind: "ServiceAccount", plural: "serviceaccounts", short: ["sa"] },
  {
    g: "",
    v: "v1",
    kind: "Event",
    plural: "events",
    short: ["ev"],
    model: "CoreV1Event",
    fields: [
      "involvedObject.kind",
      "involvedObject.namespace",
      "involvedObject.name",
      "involvedObject.uid",
      "involvedObject.apiVersion",
      "involvedObject.resourceVersion",
      "involvedObject.fieldPath",
      "reason",
      "reportingComponent",
      "source",
      "type",
    ],
  },
  {
    g: "events.k8s.io",
    v: "v1",
    kind: "Event",
    plural: "events",
    short: ["ev"],
    model: "EventsV1Event",
    events: true,
    fields: [
      "regarding.kind",
      "regarding.namespace",
      "regarding.name",
      "regarding.uid",
      "reason",
      "type",
      "reportingController",
    ],
  },
  { g: "discovery.k8s.io", v: "v1", kind: "EndpointSlice", plural: "endpointslices" },
  { g: "coordination.k8s.io", v: "v1", kind: "Lease", plural: "leases" },
  {
    g: "apps",
    v: "v1",
    kind: "Deployment",
    plural: "deployments",
    short: ["deploy"],
    status: true,
    gen: true,
    cat: ["all"],
  },
  {
    g: "apps",
    v: "v1",
    kind: "DaemonSet",
    plural: "daemonsets",
    short: ["ds"],
    status: true,
    gen: true,
    cat: ["all"],
  },
  {
    g: "policy",
    v: "v1",
    kind: "PodDisruptionBudget",
    plural: "poddisruptionbudgets",
    short: ["pdb"],
    status: true,
    gen: true,
  },
  { g: "rbac.authorization.k8s.io", v: "v1", kind: "Role", plural: "roles" },
  { g: "rbac.authorization.k8s.io", v: "v1", kind: "RoleBinding", plural: "rolebindings" },
  {
    g: "rbac.authorization.k8s.io",
    v: "v1",
    kind: "ClusterRole",
    plural: "clusterroles",
    ns: false,
  },
  {
    g: "rbac.authorization.k8s.io",
    v: "v1",
    kind: "ClusterRoleBinding",
    plural: "clusterrolebindings",
    ns: false,
  },
  {
    g: "apiextensions.k8s.io",
    v: "v1",
    kind: "CustomResourceDefinition",
    plural: "customresourcedefinitions",
    ns: false,
    short: ["crd", "crds"],
    status: true,
    gen: true,
  },
];

/** The built-in resource types, in discovery order. */
export const BUILTIN_TYPES: readonly ResourceType[] = BUILTINS.map((b) => ({
  group: b.g,
  version: b.v,
  kind: b.kind,
  plural: b.plural,
  singular: b.kind.toLowerCase(),
  namespaced: b.ns ?? true,
  shortNames: b.short ?? [],
  status: b.status ?? false,
  generation: b.gen ?? false,
  fieldSelectors: b.fields ?? [],
  categories: b.cat,
  custom: false,
  model: b.model ?? `V1${b.kind}`,
  ...(b.events
    ? { storage: "/events", fromStorage: eventsV1FromCore, toStorage: coreFromEventsV1 }
    : {}),
}));

/** The group CRDs are served by. */
export const CRD_GROUP = "apiextensions.k8s.io";

/**
 * The resource types a CustomResourceDefinition serves, one per served version.
 * Throws (with the CRD's name) when the CRD lacks what the server needs.
 */
export function typesFromCrd(crd: Obj): ResourceType[] {
  const meta = (crd.metadata ?? {}) as Obj;
  const spec = (crd.spec ?? {}) as Obj;
  const names = (spec.names ?? {}) as Obj;
  const group = String(spec.group ?? "");
  const plural = String(names.plural ?? "");
  const kind = String(names.kind ?? "");
  if (!group || !plural || !kind) {
    throw new Error(
      `Cannot serve CRD "${meta.name}": spec.group, names.plural and names.kind are required`,
    );
  }
  const versions = (spec.versions ?? []) as Obj[];
  return versions.filter((v) => v.served !== false).map((v) => {
    const sub = (v.subresources ?? {}) as Obj;
    const schema = ((v.schema ?? {}) as Obj).openAPIV3Schema as Obj | undefined;
    const fields = ((v.selectableFields ?? []) as Obj[]).map((f) =>
      String(f.jsonPath).replace(/^\./, "")
    );
    return {
      group,
      version: String(v.name),
      kind,
      plural,
      singular: String(names.singular ?? kind.toLowerCase()),
      namespaced: spec.scope !== "Cluster",
      shortNames: (names.shortNames ?? []) as string[],
      status: sub.status !== undefined,
      generation: true,
      fieldSelectors: fields,
      schema,
      printerColumns: (v.additionalPrinterColumns ?? []) as PrinterColumn[],
      categories: names.categories as string[] | undefined,
      custom: true,
    };
  });
}
