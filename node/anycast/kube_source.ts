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
 * BGP from the cluster ({@linkcode KubeBgp}, when the agent has no `--bgp-config`): the config's
 * `spec.bgp` (controller/model/bgp_cluster.ts) with this node's InternalIP as router id and its
 * Node's labels for the peers' `nodeSelector` (the Node is read once at start). The first
 * section starts bird (or adopts the one a killed agent left); a change reconfigures it; a
 * refused peer is one log line and the others announce; a section refused whole keeps the
 * running settings.
 *
 * @module
 */

import { isIpv4 } from "../../lib/ipv4.ts";
import { formatIpv6, ipv6Bytes, isIpv6 } from "../../lib/ipv6.ts";
import { log as rootLog, type Logger } from "../../lib/log.ts";
import { isClaimed } from "../../controller/ipam/mod.ts";
import type { KubeObject } from "../../controller/k8s/objects.ts";
import type { AnycastService, LocalPod } from "./model.ts";
import type { AnycastState } from "./state_file.ts";
import { type BgpProblem, type BgpSettings, BgpSettingsError, BirdSupervisor } from "../bgp/mod.ts";
import { nodeBgpSettings } from "../../controller/model/bgp_cluster.ts";

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
    addresses: ingress.map((i) => lbAddress(i.ip ?? "")).filter((a) => a !== ""),
    selector: { ...(svc.spec?.selector ?? {}) },
    ports: ports.map((p) => `${p.port}/${p.protocol ?? "TCP"}`),
  };
}

/** An ingress IP as held on `lo` (IPv4, or IPv6 in RFC 5952 form as `ip` lists it); "" if neither. */
function lbAddress(ip: string): string {
  if (isIpv4(ip)) return ip;
  return ip.includes(":") && isIpv6(ip) ? formatIpv6(ipv6Bytes(ip)) : "";
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

/**
 * This node's BGP settings from the LoadBalancerConfig `default`'s `spec.bgp`, or null when it
 * has none. Router id: the Node's first IPv4 InternalIP; labels: the Node's.
 *
 * @throws {BgpSettingsError} for a section refused whole, or a Node without an IPv4 InternalIP.
 *
 * @example
 * ```ts
 * import { kubeBgpSettings } from "./kube_source.ts";
 * const r = kubeBgpSettings(
 *   [{ metadata: { name: "default" }, spec: { bgp: {
 *     localAsn: 65100, prefixes: ["10.0.100.0/24"],
 *     peers: [{ address: "10.9.1.1", asn: 65000 }, { address: "10.9.1.1", asn: 65001 }],
 *   } } }],
 *   { metadata: { name: "n1" }, status: { addresses: [{ type: "InternalIP", address: "10.9.1.2" }] } },
 * );
 * if (r?.settings.routerId !== "10.9.1.2" || r.problems.length !== 1) throw new Error();
 * ```
 */
export function kubeBgpSettings(
  configs: readonly KubeObject[],
  node: KubeObject | undefined,
): { settings: BgpSettings; problems: BgpProblem[] } | null {
  const bgp = configs.find((c) => c.metadata?.name === "default")?.spec?.bgp;
  if (bgp === undefined || bgp === null) return null;
  const addresses = (node?.status?.addresses ?? []) as { type?: string; address?: string }[];
  const routerId = addresses.find((a) => a.type === "InternalIP" && isIpv4(a.address ?? ""))
    ?.address;
  if (routerId === undefined) {
    throw new BgpSettingsError(
      `Node ${JSON.stringify(node?.metadata?.name ?? null)} has no IPv4 InternalIP for a router id`,
    );
  }
  return nodeBgpSettings(bgp, { routerId, labels: node?.metadata?.labels ?? {} });
}

/** The node's bird as the cluster's `spec.bgp` configures it (see the module doc). */
export class KubeBgp {
  #bird: BirdSupervisor | undefined;
  #key = "";
  readonly #log: Logger;

  constructor(readonly options: { readonly dir: string; readonly log?: Logger }) {
    this.#log = options.log ?? rootLog.with({ component: "bgp" });
  }

  /** Whether bird runs (a section was applied). */
  get running(): boolean {
    return this.#bird !== undefined;
  }

  /** Applies the settings `configs` and `node` give (errors are logged; bird keeps running). */
  async apply(configs: readonly KubeObject[], node: KubeObject | undefined): Promise<void> {
    let got;
    try {
      got = kubeBgpSettings(configs, node);
    } catch (error) {
      if (!(error instanceof BgpSettingsError)) throw error;
      this.#log.error(
        "cannot follow BGP settings of the LoadBalancerConfig; the previous ones stay",
        {
          error,
        },
      );
      return;
    }
    if (got === null) {
      if (this.#key !== "none") {
        this.#log.info("no spec.bgp in the LoadBalancerConfig; bird keeps what it runs", {
          running: this.running,
        });
      }
      this.#key = "none";
      return;
    }
    const key = JSON.stringify(got);
    if (key === this.#key) return;
    try {
      if (this.#bird) await this.#bird.reload(got.settings, got.problems);
      else {
        this.#bird = await BirdSupervisor.start(got.settings, {
          dir: this.options.dir,
          problems: got.problems,
          log: this.#log,
        });
      }
      this.#key = key;
    } catch (error) {
      // The addresses on lo still follow the pods; the next batch tries again.
      this.#log.error("cannot apply the BGP settings of the LoadBalancerConfig", { error });
    }
  }

  /** Stops bird (after the caller forfeited its addresses). */
  async stop(): Promise<void> {
    await this.#bird?.stop();
  }
}

/** Options of {@linkcode followKubernetes}. */
export interface KubeSourceOptions {
  readonly signal: AbortSignal;
  readonly log?: Logger;
  /** BGP from the LoadBalancerConfig's `spec.bgp` (needs `get` on this node's Node). */
  readonly bgp?: KubeBgp;
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
  const kc = loadKubeConfig(kubeconfigFile);
  const nodeObject = options.bgp ? await readNode(kc, node, log) : undefined;
  const informers = new Informers(kc, {
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
      const configs = informers.list("loadbalancerconfigs");
      chain = chain.then(async () => {
        // Before the first address goes on lo, so a first bird announces it at once.
        await options.bgp?.apply(configs, nodeObject);
        await onState(state);
      }).catch((error) => log.error("cannot apply the cluster's anycast state", { error }));
    },
  });
  options.signal.addEventListener("abort", () => void informers.stop(), { once: true });
  informers.start();
  await informers.synced;
  await chain;
}

/** This node's Node object (its InternalIP and labels), retried for ≤ 30 s; undefined if unread. */
async function readNode(
  kc: import("@kubernetes/client-node").KubeConfig,
  name: string,
  log: Logger,
): Promise<KubeObject | undefined> {
  const k8s = await import("@kubernetes/client-node");
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const deadline = Date.now() + 30_000;
  for (let attempt = 0; attempt < 60 && Date.now() < deadline; attempt++) {
    try {
      return await core.readNode({ name }) as KubeObject;
    } catch (error) {
      log.warn("cannot read this node's Node (router id, labels); retrying", { error, attempt });
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  log.error("no Node object: BGP settings from the LoadBalancerConfig cannot apply", {
    node: name,
  });
  return undefined;
}
