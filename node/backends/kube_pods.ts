/**
 * The node agent's Kubernetes pod source: the pods of this node only (field selector
 * `spec.nodeName=NODE`, the controller's informers), turned into {@linkcode LocalPod}s on every
 * batch. A pod counts while it has addresses (`status.podIPs`, else `status.podIP`) and is not
 * finished (phase Succeeded or Failed) — a terminating pod keeps its state so its connections
 * drain, and loses it when the pod object is deleted. Pods on the host network share the node's
 * address and are left out (docs/backends.md "Not yet"). The Node is read once at start (its
 * existence checks `--node-name`; RBAC: `get` on nodes, `list`/`watch` on pods, nothing else).
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import type { KubeObject } from "../../controller/k8s/objects.ts";
import { canonicalIp, type LocalPod } from "./plan.ts";
import type { PodSource } from "./pods.ts";

/** A pod object as the node serves it, or null when it has nothing to serve. */
export function localPodOf(pod: KubeObject): LocalPod | null {
  const spec = (pod.spec ?? {}) as { hostNetwork?: boolean };
  const status = (pod.status ?? {}) as {
    phase?: string;
    podIP?: string;
    podIPs?: { ip?: string }[];
  };
  if (spec.hostNetwork === true) return null;
  if (status.phase === "Succeeded" || status.phase === "Failed") return null;
  const listed = status.podIPs?.map((p) => p.ip ?? "") ?? [status.podIP ?? ""];
  const ips = [...new Set(listed.map(canonicalIp).filter((a) => a !== ""))];
  if (ips.length === 0) return null;
  return { name: `${pod.metadata?.namespace ?? "default"}/${pod.metadata?.name}`, ips };
}

/** Follows the pods scheduled on `node` through the API server of `kubeconfigFile`. */
export function kubePodSource(
  kubeconfigFile: string | undefined,
  node: string,
  log: Logger,
): PodSource {
  let stop = () => Promise.resolve();
  return {
    async start(onPods) {
      // Loaded only when asked for: the file source never loads client-node.
      const { loadKubeConfig } = await import("../../controller/k8s/main.ts");
      const { Informers } = await import("../../controller/k8s/informers.ts");
      const k8s = await import("@kubernetes/client-node");
      const kc = loadKubeConfig(kubeconfigFile);
      try {
        const n = await kc.makeApiClient(k8s.CoreV1Api).readNode({ name: node });
        const addresses = (n.status?.addresses ?? []).map((a) => `${a.type}=${a.address}`);
        log.info("node found", { node, addresses });
      } catch (err) {
        log.warn("cannot read this node's Node object (is --node-name right?)", { node, err });
      }
      let chain = Promise.resolve();
      const informers = new Informers(kc, {
        resources: ["localpods"],
        localPodsOf: node,
        debounceMs: 5,
        logger: log,
        onBatch: () => {
          const pods = informers.list("localpods").map(localPodOf).filter((p) => p !== null);
          chain = chain.then(() => onPods(pods)).catch((err) =>
            log.error("cannot apply the node's pods", { err })
          );
        },
      });
      stop = async () => {
        await informers.stop();
        await chain;
      };
      informers.start();
      await informers.synced;
      await chain;
    },
    stop: () => stop(),
  };
}
