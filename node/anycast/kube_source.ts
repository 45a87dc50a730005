/**
 * The anycast agent's Kubernetes source: the LoadBalancerConfig `default`, every Service, and
 * the pods of this node only (field selector `spec.nodeName=NODE`), watched with the
 * controller's informers (controller/k8s/informers.ts), turned into an {@linkcode AnycastState}
 * on every batch.
 *
 * Which Services are anycast: those Holdfast claims (type LoadBalancer, the config's
 * `loadBalancerClass`, controller/ipam `isClaimed`) when the config says `mode: Anycast`, or
 * whose annotation `holdfast.io/announce` is `anycast` (`stateful` opts one out of an
 * anycast cluster). Their addresses are `status.loadBalancer.ingress[].ip` (what the
 * controller allocated), their selector `spec.selector`. A pod serves when its `Ready`
 * condition is True; it is terminating once `metadata.deletionTimestamp` is set.
 *
 * @module
 */

import { isIpv4 } from "../../lib/ipv4.ts";
import { log as rootLog, type Logger } from "../../lib/log.ts";
import { isClaimed } from "../../controller/ipam/mod.ts";
import type { KubeObject } from "../../controller/k8s/objects.ts";
import type { AnycastService, LocalPod } from "./model.ts";
import type { AnycastState } from "./state_file.ts";

/** Per-Service announce mode: `anycast` or `stateful` (overrides the LoadBalancerConfig). */
export const ANNOUNCE_ANNOTATION = "holdfast.io/announce";

/** The objects the state is made from. */
export interface AnycastObjects {
  readonly configs: readonly KubeObject[];
  readonly services: readonly KubeObject[];
  readonly pods: readonly KubeObject[];
}

const nameOf = (o: KubeObject) => `${o.metadata?.namespace ?? "default"}/${o.metadata?.name}`;

function anycastService(svc: KubeObject, config: KubeObject | undefined): AnycastService | null {
  const spec = config?.spec ?? {};
  const claimed = isClaimed(svc, {
    loadBalancerClass: typeof spec.loadBalancerClass === "string" && spec.loadBalancerClass !== ""
      ? spec.loadBalancerClass
      : undefined,
    claimServicesWithoutClass: spec.claimServicesWithoutClass === true,
  });
  const annotation = svc.metadata?.annotations?.[ANNOUNCE_ANNOTATION]?.toLowerCase();
  const anycast = annotation === "anycast" ||
    (annotation !== "stateful" && spec.mode === "Anycast");
  if (!claimed || !anycast) return null;
  const ingress = (svc.status?.loadBalancer?.ingress ?? []) as { ip?: string }[];
  const ports = (svc.spec?.ports ?? []) as { port: number; protocol?: string }[];
  return {
    name: nameOf(svc),
    addresses: ingress.map((i) => i.ip ?? "").filter(isIpv4),
    selector: { ...(svc.spec?.selector ?? {}) },
    ports: ports.map((p) => `${p.port}/${p.protocol ?? "TCP"}`),
  };
}

function localPod(pod: KubeObject): LocalPod {
  const conditions = (pod.status?.conditions ?? []) as { type: string; status: string }[];
  return {
    name: nameOf(pod),
    node: pod.spec?.nodeName ?? "",
    labels: { ...(pod.metadata?.labels ?? {}) },
    ready: conditions.some((c) => c.type === "Ready" && c.status === "True"),
    terminating: (pod.metadata as { deletionTimestamp?: unknown } | undefined)
      ?.deletionTimestamp != null,
  };
}

/**
 * The anycast state from watched objects.
 *
 * @example
 * ```ts
 * import { anycastStateFrom } from "./kube_source.ts";
 * const state = anycastStateFrom({
 *   configs: [{ metadata: { name: "default" }, spec: { mode: "Anycast" } }],
 *   services: [{
 *     metadata: { namespace: "default", name: "web" },
 *     spec: { type: "LoadBalancer", loadBalancerClass: "holdfast.io/lb", selector: { app: "web" } },
 *     status: { loadBalancer: { ingress: [{ ip: "10.0.100.10" }] } },
 *   }],
 *   pods: [{
 *     metadata: { namespace: "default", name: "web-1", labels: { app: "web" } },
 *     spec: { nodeName: "n1" },
 *     status: { conditions: [{ type: "Ready", status: "True" }] },
 *   }],
 * });
 * if (state.services[0]?.addresses[0] !== "10.0.100.10" || !state.pods[0]?.ready) throw new Error();
 * ```
 */
export function anycastStateFrom(objects: AnycastObjects): AnycastState {
  const config = objects.configs.find((c) => c.metadata?.name === "default");
  return {
    services: objects.services.map((s) => anycastService(s, config)).filter((s) =>
      s !== null
    ) as AnycastService[],
    pods: objects.pods.map(localPod),
  };
}

/** Options of {@linkcode followKubernetes}. */
export interface KubeSourceOptions {
  readonly signal: AbortSignal;
  readonly log?: Logger;
}

/**
 * Watches the cluster for `node` and calls `onState` with the whole state after the first
 * full list and after every batch of changes; resolves once the first state went out.
 */
export async function followKubernetes(
  kubeconfigFile: string | undefined,
  node: string,
  onState: (state: AnycastState) => Promise<void>,
  options: KubeSourceOptions,
): Promise<void> {
  // Loaded only when asked for: the file source never loads client-node.
  const { loadKubeConfig } = await import("../../controller/k8s/main.ts");
  const { Informers } = await import("../../controller/k8s/informers.ts");
  const log = options.log ?? rootLog.with({ component: "anycast-kube", node });
  let chain = Promise.resolve();
  const informers = new Informers(loadKubeConfig(kubeconfigFile), {
    resources: ["loadbalancerconfigs", "services", "localpods"],
    localPodsOf: node,
    debounceMs: 1,
    logger: log,
    onBatch: () => {
      const state = anycastStateFrom({
        configs: informers.list("loadbalancerconfigs"),
        services: informers.list("services"),
        pods: informers.list("localpods"),
      });
      chain = chain.then(() => onState(state)).catch((error) =>
        log.error("cannot apply the cluster's anycast state", { error })
      );
    },
  });
  options.signal.addEventListener("abort", () => void informers.stop(), { once: true });
  informers.start();
  await informers.synced;
  await chain;
}
