/**
 * What the allocator reads from a Service: whether Holdfast claims it, the families it wants
 * (`spec.ipFamilies`, `spec.ipFamilyPolicy`), the addresses it asks for, the pool it names, its
 * sharing key and ports, and what its status already shows.
 *
 * The types are the structural subset of `@kubernetes/client-node`'s V1Service read here (as in
 * `sources/k8s_convert.ts`), so watched objects are passed as they are.
 *
 * @module
 */

import { type Addr, compareAddr, FAMILIES, type Family, parseAddress } from "./_addr.ts";
import { flat, type K8sMeta, objectName } from "../../node/lb/sources/k8s_convert.ts";

/** A timestamp as client-node gives it (`Date`) or as YAML/JSON carries it (RFC 3339). */
export type K8sTime = string | Date | null;

/** A `metav1.Condition` as the allocator produces and reads it. */
export interface IpamCondition {
  type: string;
  status: string;
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime?: K8sTime;
}

/** Annotation naming the pool to allocate from (allowed even when the pool has autoAssign false). */
export const ADDRESS_POOL_ANNOTATION = "holdfast.io/address-pool";
/** Annotation requesting addresses, comma-separated (`spec.loadBalancerIP` is honoured too). */
export const LOAD_BALANCER_IPS_ANNOTATION = "holdfast.io/load-balancer-ips";
/** Annotation with a sharing key: same namespace + same key → may share one address. */
export const ALLOW_SHARED_IP_ANNOTATION = "holdfast.io/allow-shared-ip";
/** The Service condition type the allocator sets. */
export const ADDRESS_ALLOCATED_CONDITION = "holdfast.io/AddressAllocated";
/** `spec.loadBalancerClass` of Services Holdfast claims by default. */
export const DEFAULT_LOAD_BALANCER_CLASS = "holdfast.io/lb";

/** The subset of V1Service the allocator reads. */
export interface IpamService {
  metadata?: K8sMeta & { creationTimestamp?: K8sTime; generation?: number };
  spec?: {
    type?: string;
    loadBalancerClass?: string | null;
    loadBalancerIP?: string | null;
    ports?: { port: number; protocol?: string }[];
    /** `IPv4` / `IPv6`, primary first (the API server defaults it). */
    ipFamilies?: string[] | null;
    /** `SingleStack` (default), `PreferDualStack` or `RequireDualStack`. */
    ipFamilyPolicy?: string | null;
  };
  status?: {
    loadBalancer?: { ingress?: { ip?: string }[] };
    conditions?: IpamCondition[];
  };
}

/** Which Services are Holdfast's (LoadBalancerConfig `loadBalancerClass`, `claimServicesWithoutClass`). */
export interface ClaimOptions {
  /** Default {@linkcode DEFAULT_LOAD_BALANCER_CLASS}. */
  loadBalancerClass?: string;
  /** Also claim LoadBalancer Services without a class (default false). */
  claimServicesWithoutClass?: boolean;
}

/** Whether Holdfast allocates for this Service: type LoadBalancer and our class (or none, if configured). */
export function isClaimed(svc: IpamService, options: ClaimOptions = {}): boolean {
  const spec = svc.spec;
  if (spec?.type !== "LoadBalancer") return false;
  const cls = spec.loadBalancerClass;
  if (cls === undefined || cls === null || cls === "") {
    return options.claimServicesWithoutClass ?? false;
  }
  return cls === (options.loadBalancerClass ?? DEFAULT_LOAD_BALANCER_CLASS);
}

/** `spec.ipFamilyPolicy` values. */
export type IpFamilyPolicy = "SingleStack" | "PreferDualStack" | "RequireDualStack";

/** A claimed Service as the allocator sees it. */
export interface ServiceIntent {
  /** `namespace/name`. */
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  readonly createdMs: number;
  readonly generation?: number;
  readonly labels: Readonly<Record<string, string>>;
  /**
   * Families to allocate, primary first: `spec.ipFamilies` as the API server set it (its first
   * with SingleStack; a single-stack cluster lists one family even for PreferDualStack, and its
   * pods have no addresses of the other). Without `spec.ipFamilies` (objects not from an API
   * server): IPv4, or both families with a dual-stack policy.
   */
  readonly families: readonly Family[];
  /** Whether `spec.ipFamilies` was set (then addresses of other families are not kept). */
  readonly familiesSet: boolean;
  readonly policy: IpFamilyPolicy;
  /** Requested addresses as written (validated by the allocator, which reports bad ones). */
  readonly requested: readonly string[];
  /** Set when the annotation and `spec.loadBalancerIP` ask for different addresses. */
  readonly requestProblem?: string;
  readonly poolName?: string;
  readonly sharingKey?: string;
  /** `PORT/PROTOCOL`, sorted, unique. */
  readonly ports: readonly string[];
  /** Addresses its `status.loadBalancer.ingress` shows, ascending (IPv4 first). */
  readonly statusIps: readonly Addr[];
  /** Its `holdfast.io/AddressAllocated` condition as the status shows it. */
  readonly statusCondition?: IpamCondition;
}

function splitList(text: string): string[] {
  return text.split(",").map((s) => s.trim()).filter((s) => s !== "");
}

/** Reads a (claimed) Service. Throws {@linkcode ConversionError} when it has no name. */
export function readService(svc: IpamService, createdMs: number): ServiceIntent {
  const key = objectName(svc);
  const meta = svc.metadata ?? {};
  const ann = meta.annotations ?? {};
  const fromAnnotation = ann[LOAD_BALANCER_IPS_ANNOTATION];
  const fromSpec = svc.spec?.loadBalancerIP ?? "";
  let requested = fromAnnotation !== undefined ? splitList(fromAnnotation) : splitList(fromSpec);
  let requestProblem: string | undefined;
  if (fromAnnotation !== undefined && fromSpec !== "") {
    const a = [...new Set(requested)].sort().join(","), b = splitList(fromSpec).sort().join(",");
    if (a !== b) {
      requestProblem =
        `annotation ${LOAD_BALANCER_IPS_ANNOTATION}="${fromAnnotation}" and spec.loadBalancerIP="${fromSpec}" ask for different addresses; set one`;
    }
  }
  requested = [...new Set(requested)];
  const ports = new Set<string>();
  for (const p of svc.spec?.ports ?? []) ports.add(flat([p.port, "/", p.protocol ?? "TCP"]));
  const statusIps: Addr[] = [];
  for (const i of svc.status?.loadBalancer?.ingress ?? []) {
    const ip = i.ip === undefined ? undefined : parseAddress(i.ip);
    if (ip !== undefined && !statusIps.includes(ip)) statusIps.push(ip);
  }
  statusIps.sort(compareAddr);
  const { families, familiesSet, policy } = readFamilies(svc.spec ?? {});
  const poolName = ann[ADDRESS_POOL_ANNOTATION]?.trim() || undefined;
  const sharingKey = ann[ALLOW_SHARED_IP_ANNOTATION]?.trim() || undefined;
  const slash = key.indexOf("/");
  return {
    key,
    namespace: key.slice(0, slash),
    name: key.slice(slash + 1),
    createdMs,
    generation: meta.generation,
    labels: meta.labels ?? {},
    families,
    familiesSet,
    policy,
    requested,
    requestProblem,
    poolName,
    sharingKey,
    ports: [...ports].sort(),
    statusIps,
    statusCondition: svc.status?.conditions?.find((c) => c.type === ADDRESS_ALLOCATED_CONDITION),
  };
}

/** The families a Service wants from `spec.ipFamilies` and `spec.ipFamilyPolicy`. */
export function readFamilies(
  spec: NonNullable<IpamService["spec"]>,
): { families: Family[]; familiesSet: boolean; policy: IpFamilyPolicy } {
  const p = spec.ipFamilyPolicy;
  const policy: IpFamilyPolicy = p === "PreferDualStack" || p === "RequireDualStack"
    ? p
    : "SingleStack";
  const listed = (spec.ipFamilies ?? []).filter((f): f is Family => f === "IPv4" || f === "IPv6");
  const families: Family[] = [...new Set(listed)];
  const familiesSet = families.length > 0;
  if (families.length === 0) {
    families.push(...(policy === "SingleStack" ? ["IPv4" as const] : FAMILIES));
  }
  if (policy === "SingleStack") families.length = 1;
  return { families, familiesSet, policy };
}
