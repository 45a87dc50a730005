/**
 * The Kubernetes side of the `main.ts anycast --kube` tests (anycast_kube_test.ts,
 * anycast_kube_bgp_test.ts): the API test server (lab/kube/) with Holdfast's CRDs in the test
 * process, and the writes a user would make with kubectl — the LoadBalancerConfig, a
 * LoadBalancer Service with its allocated address, Nodes, pods and their readiness.
 */

import { ok } from "node:assert/strict";
import { type KubeServer, type ResourceType, startKubeServer } from "../../lab/kube/mod.ts";

const CRDS = new URL("../../k8s/crds", import.meta.url).pathname;
const W = { manager: "test" };
const STATUS = { ...W, subresource: "status" } as const;

/** Options of {@linkcode AnycastKube.createPod}. */
export interface PodOptions {
  /** The Node it runs on. */
  readonly node: string;
  /** Its `app` label (default the Service name `web`). */
  readonly app?: string;
  /** Hold it with a finalizer so a delete leaves it terminating. */
  readonly finalizer?: boolean;
}

/** The API test server and the writes the anycast tests make, all in namespace `default`. */
export interface AnycastKube extends AsyncDisposable {
  readonly server: KubeServer;
  /** What `AnycastLab.create({ kube })` needs: the server's port and a kubeconfig for it. */
  readonly lab: { readonly port: number; readonly kubeconfig: string };
  /** Creates LoadBalancerConfig `default` in mode Anycast, with `spec` added. */
  createConfig(spec?: Record<string, unknown>): void;
  /** Merge-patches LoadBalancerConfig `default`'s spec. */
  patchConfig(spec: Record<string, unknown>): void;
  /** Creates a Node with `labels` and InternalIP `internalIp` in its status. */
  createNode(name: string, internalIp: string, labels?: Record<string, string>): void;
  /**
   * Creates LoadBalancer Service `name` (class holdfast.io/lb, selector `app: name`, port 80)
   * and writes `ip` as its allocated ingress address, as the controller would.
   */
  createService(name: string, ip: string): void;
  /** Merge-patches Service `name`'s annotations. */
  annotateService(name: string, annotations: Record<string, string>): void;
  /** Creates pod `name` on `options.node`. */
  createPod(name: string, options: PodOptions): void;
  /** Sets pod `name`'s Ready condition. */
  setPodReady(name: string, ready: boolean): void;
  /** Deletes pod `name`; `pending` when a finalizer holds it (terminating). */
  deletePod(name: string): { pending: boolean };
}

/** Starts the API test server with Holdfast's CRDs; dispose to stop it. */
export async function startAnycastKube(): Promise<AnycastKube> {
  const server = await startKubeServer({ crdDirs: [CRDS] });
  try {
    const kubeconfig = await server.writeKubeconfig();
    const type = (group: string, version: string, plural: string): ResourceType => {
      const found = server.registry.find(group, version, plural);
      ok(found, `the API test server has no ${group || "core"}/${version} ${plural}`);
      return found;
    };
    const configs = type("holdfast.io", "v1alpha1", "loadbalancerconfigs");
    const services = type("", "v1", "services");
    const pods = type("", "v1", "pods");
    const nodes = type("", "v1", "nodes");
    const rest = server.rest;
    return {
      server,
      lab: { port: server.port, kubeconfig },
      createConfig(spec = {}) {
        const body = { metadata: { name: "default" }, spec: { mode: "Anycast", ...spec } };
        rest.create(configs, "", body, W);
      },
      patchConfig(spec) {
        rest.patch(configs, "", "default", "merge", { spec }, W);
      },
      createNode(name, internalIp, labels = {}) {
        rest.create(nodes, "", { metadata: { name, labels } }, W);
        const status = { addresses: [{ type: "InternalIP", address: internalIp }] };
        rest.patch(nodes, "", name, "merge", { status }, STATUS);
      },
      createService(name, ip) {
        rest.create(services, "default", {
          metadata: { name },
          spec: {
            type: "LoadBalancer",
            loadBalancerClass: "holdfast.io/lb",
            selector: { app: name },
            ports: [{ port: 80 }],
          },
        }, W);
        const status = { loadBalancer: { ingress: [{ ip }] } };
        rest.patch(services, "default", name, "merge", { status }, STATUS);
      },
      annotateService(name, annotations) {
        rest.patch(services, "default", name, "merge", { metadata: { annotations } }, W);
      },
      createPod(name, options) {
        const finalizers = options.finalizer ? ["test.holdfast.io/hold"] : [];
        rest.create(pods, "default", {
          metadata: { name, labels: { app: options.app ?? "web" }, finalizers },
          spec: { nodeName: options.node, containers: [{ name: "c", image: "x" }] },
        }, W);
      },
      setPodReady(name, ready) {
        const conditions = [{ type: "Ready", status: ready ? "True" : "False" }];
        rest.patch(pods, "default", name, "merge", { status: { conditions } }, STATUS);
      },
      deletePod: (name) => ({ pending: rest.delete(pods, "default", name).pending }),
      [Symbol.asyncDispose]: () => server[Symbol.asyncDispose](),
    };
  } catch (e) {
    await server[Symbol.asyncDispose]();
    throw e;
  }
}
