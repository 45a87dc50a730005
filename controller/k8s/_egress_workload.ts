/**
 * The NAT pods an `EgressNAT` owns, as objects: one Deployment and one PodDisruptionBudget per
 * EgressNAT, both named like it, in its namespace, controlled by it (ownerReference with
 * `controller: true`, `blockOwnerDeletion: true`: deleting the EgressNAT deletes them, and the pods
 * with the Deployment). Pure: the reconciler (`_egress_workloads.ts`) writes them.
 *
 * Why a Deployment and not a StatefulSet: NAT pods need no stable identity (a lease's holder is
 * `POD/BOOT`, peers are whichever pods are listed), and a rolling update with one surge and none
 * unavailable starts the successor before the old pod drains, so a standby is always there for the
 * planned handover; a StatefulSet replaces a pod only after it is gone.
 *
 * A pod runs `main.ts egress --egress NS/NAME --name $(POD_NAME) --redis URL` in the image of the
 * controller's own version, privileged (it writes sysctls, nftables and conntrack in its network
 * namespace and sends gratuitous ARP), with preferred anti-affinity across nodes (required would
 * stall a rollout's surge pod when there are as many nodes as replicas) and the PDB allowing one
 * pod down at a time.
 *
 * @module
 */

import { VERSION } from "../../lib/version.ts";
import type { KubeObject } from "./objects.ts";

/** The label of NAT pods (value: their EgressNAT's name), also on the Deployment and PDB. */
export const NAT_LABEL = "holdfast.io/egress";
/** The field manager / `managed-by` of what the controller creates. */
export const MANAGED_BY = "holdfast-controller";

/** How the controller makes NAT pods. */
export interface EgressWorkloadOptions {
  /** The NAT pods' image (default `holdfast:<VERSION>`: the controller's own). */
  image?: string;
  /** Redis of the configs and leases as the NAT pods reach it (no password in it). */
  redisUrl: string;
  /** Redis ACL user (default none). */
  redisUser?: string;
  /**
   * A Secret in the EgressNAT's namespace whose key `password` is the Redis password (put in the
   * URL through `$(HOLDFAST_REDIS_PASSWORD)`; absent: no password).
   */
  redisPasswordSecret?: string;
  /** Port of the agent's `/metrics` `/readyz` (default 9470). */
  metricsPort?: number;
}

/** The default NAT pod image: the controller's own version. */
export function defaultImage(): string {
  return `holdfast:${VERSION}`;
}

/** An object the controller makes (the fields it keeps). */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    ownerReferences: KubeObject[];
  };
  // deno-lint-ignore no-explicit-any
  spec: Record<string, any>;
}

/** What one EgressNAT's workload derives to. */
export type DerivedWorkload =
  | { readonly deployment: Manifest; readonly pdb: Manifest }
  | { readonly problem: string };

/** The Redis URL the agent gets: user and `$(HOLDFAST_REDIS_PASSWORD)` put in. */
export function agentRedisUrl(o: EgressWorkloadOptions): string {
  if (o.redisUser === undefined && o.redisPasswordSecret === undefined) return o.redisUrl;
  const m = /^([a-z+]+:\/\/)(.*)$/.exec(o.redisUrl);
  if (!m) return o.redisUrl;
  const user = o.redisUser ?? "";
  const pass = o.redisPasswordSecret !== undefined ? ":$(HOLDFAST_REDIS_PASSWORD)" : "";
  return `${m[1]}${user}${pass}@${m[2]}`;
}

/** The Deployment and PDB of `nat`, or the problem that keeps them from being made. */
export function deriveWorkload(nat: KubeObject, o: EgressWorkloadOptions): DerivedWorkload {
  const name = nat.metadata?.name ?? "", ns = nat.metadata?.namespace ?? "";
  const spec = nat.spec ?? {};
  if (name.length > 63) {
    return {
      problem:
        `field "metadata.name": at most 63 characters (it labels the NAT pods ${NAT_LABEL}=NAME), got ${name.length}`,
    };
  }
  const replicas = spec.replicas ?? 2;
  if (!Number.isInteger(replicas) || replicas < 1) {
    return { problem: `field "spec.replicas": expected a positive integer, got ${replicas}` };
  }
  const owner = {
    apiVersion: "holdfast.io/v1alpha1",
    kind: "EgressNAT",
    name,
    uid: nat.metadata?.uid ?? "",
    controller: true,
    blockOwnerDeletion: true,
  };
  const labels = {
    [NAT_LABEL]: name,
    "app.kubernetes.io/name": "holdfast-egress",
    "app.kubernetes.io/part-of": "holdfast",
    "app.kubernetes.io/managed-by": MANAGED_BY,
  };
  const metadata = { name, namespace: ns, labels, ownerReferences: [owner] };
  const selector = { matchLabels: { [NAT_LABEL]: name } };
  const port = o.metricsPort ?? 9470;
  const ports = spec.ports ?? {};
  const env: KubeObject[] = [
    { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
    { name: "DENO_DIR", value: "/tmp/deno-dir" },
  ];
  if (o.redisPasswordSecret !== undefined) {
    env.push({
      name: "HOLDFAST_REDIS_PASSWORD",
      valueFrom: { secretKeyRef: { name: o.redisPasswordSecret, key: "password" } },
    });
  }
  const container = {
    name: "nat",
    image: o.image ?? defaultImage(),
    imagePullPolicy: "IfNotPresent",
    workingDir: "/opt/holdfast",
    command: ["deno", "run", "-P=egress", "--no-prompt"],
    args: [
      "main.ts",
      "egress",
      `--egress=${ns}/${name}`,
      "--name=$(POD_NAME)",
      `--redis=${agentRedisUrl(o)}`,
      `--metrics-addr=0.0.0.0:${port}`,
    ],
    env,
    ports: [
      { name: "metrics", containerPort: port, protocol: "TCP" },
      { name: "health", containerPort: ports.health ?? 7946, protocol: "UDP" },
      { name: "sync", containerPort: ports.sync ?? 7947, protocol: "TCP" },
    ],
    readinessProbe: {
      httpGet: { path: "/readyz", port: "metrics" },
      periodSeconds: 2,
      failureThreshold: 2,
    },
    securityContext: { privileged: true },
  };
  const template = {
    metadata: {
      labels,
      ...(spec.podAnnotations ? { annotations: { ...spec.podAnnotations } } : {}),
    },
    spec: {
      ...(spec.nodeSelector ? { nodeSelector: { ...spec.nodeSelector } } : {}),
      // A draining pod flushes its sync stream and hands its leases over, then lingers 1 s.
      terminationGracePeriodSeconds: 30,
      affinity: {
        podAntiAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [{
            weight: 100,
            podAffinityTerm: { topologyKey: "kubernetes.io/hostname", labelSelector: selector },
          }],
        },
      },
      containers: [container],
    },
  };
  const deployment: Manifest = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata,
    spec: {
      replicas,
      selector,
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template,
    },
  };
  const pdb: Manifest = {
    apiVersion: "policy/v1",
    kind: "PodDisruptionBudget",
    metadata,
    spec: { maxUnavailable: 1, selector },
  };
  return { deployment, pdb };
}

/** Whether `actual` is controlled by the object of `uid`. */
export function controlledBy(actual: KubeObject, uid: string): boolean {
  const refs: KubeObject[] = actual.metadata?.ownerReferences ?? [];
  return refs.some((r) => r.uid === uid && r.controller === true);
}

/**
 * Whether `actual` shows everything `want` says (objects: every key of `want`, recursively;
 * arrays: the same length, element by element; values: equal). Fields the API server added
 * (defaults, status) are not drift; a changed, missing or extra list element is.
 */
export function covers(actual: unknown, want: unknown): boolean {
  if (Array.isArray(want)) {
    return Array.isArray(actual) && actual.length === want.length &&
      want.every((w, i) => covers(actual[i], w));
  }
  if (want !== null && typeof want === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual)) return false;
    const a = actual as Record<string, unknown>;
    return Object.entries(want).every(([k, v]) => covers(a[k], v));
  }
  return actual === want || (typeof want === "number" && String(actual) === String(want));
}

/** The fields of `desired` the controller keeps: labels, ownerReferences and spec. */
export function drifted(actual: KubeObject, desired: Manifest): string[] {
  const out: string[] = [];
  if (!covers(actual.metadata?.labels, desired.metadata.labels)) out.push("metadata.labels");
  if (!covers(actual.metadata?.ownerReferences, desired.metadata.ownerReferences)) {
    out.push("metadata.ownerReferences");
  }
  for (const k of Object.keys(desired.spec)) {
    if (!covers(actual.spec?.[k], desired.spec[k])) out.push(`spec.${k}`);
  }
  return out;
}

/** `actual` with what the controller keeps put back (its resourceVersion kept: a checked PUT). */
export function corrected(actual: KubeObject, desired: Manifest): KubeObject {
  return {
    ...desired,
    metadata: {
      ...actual.metadata,
      labels: { ...actual.metadata?.labels, ...desired.metadata.labels },
      ownerReferences: desired.metadata.ownerReferences,
    },
    spec: desired.spec,
  };
}
