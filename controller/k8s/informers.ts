/**
 * The controller's view of the cluster: one reflector per watched resource (Services,
 * EndpointSlices, AddressPools, LoadBalancerConfigs, EgressNATs, the pods labelled
 * `holdfast.io/egress` and Nodes), each a list + watch by resourceVersion on
 * `@kubernetes/client-node` (`Watch` with bookmarks), re-listing after 410 Gone, retrying with
 * {@linkcode Backoff}; and one place, {@linkcode Informers}, that turns their callbacks into
 * debounced, bounded batches of `{type, object}` events and resolves `synced` once every
 * resource has been listed.
 *
 * client-node's own `ListWatch` is not used: it does not ask for bookmarks and stops for good on
 * the first error other than 410.
 *
 * @module
 */

import * as k8s from "@kubernetes/client-node";
import { Backoff, type BackoffOptions, sleep } from "../../lib/backoff.ts";
import { log, type Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import { rawGet } from "./_raw_write.ts";
import {
  type Batch,
  type ClusterView,
  keyOf,
  type KubeObject,
  type ObjectEvent,
  type ResourceName,
  RESOURCES,
} from "./objects.ts";

export * from "./objects.ts";

/** The informers' metrics, on `registry` (lib/metrics.ts: registered per instance). */
const informerMetrics = (registry: Registry) => ({
  relists: registry.counter(
    "holdfast_controller_informer_lists_total",
    "Full lists per resource (the first one and every re-list after 410 Gone or an error)",
    { labelNames: ["resource"] },
  ),
  watchErrors: registry.counter(
    "holdfast_controller_informer_errors_total",
    "Failed lists or watches per resource (each retried with backoff)",
    { labelNames: ["resource"] },
  ),
});

/** How a resource is listed and where it is watched. */
interface ResourceSpec {
  readonly watchPath: string;
  /** Extra watch query parameters (a field selector). */
  readonly params?: Record<string, string>;
  readonly list: () => Promise<{ items: KubeObject[]; metadata?: { resourceVersion?: string } }>;
}

const GROUP = "holdfast.io", VERSION = "v1alpha1";
/** The label of NAT pods; its value names their EgressNAT (in the pod's namespace). */
export const EGRESS_POD_LABEL = "holdfast.io/egress";

function specs(
  kc: k8s.KubeConfig,
  policy: { namespace: string; name: string } | undefined,
  localPodsOf?: string,
): Record<ResourceName, ResourceSpec | undefined> {
  // Lists as the API answers them, not deserialized into client-node's model classes: a listed
  // object then looks as the same object does in a watch event (timestamps as strings, the
  // server's field order, no keys holding undefined), and 1,000 Services list in a fraction of
  // the CPU (`_raw_write.ts`).
  const spec = (watchPath: string, params?: Record<string, string>): ResourceSpec => ({
    watchPath,
    params,
    list: () => rawGet(kc, watchPath, params),
  });
  return {
    services: spec("/api/v1/services"),
    endpointslices: spec("/apis/discovery.k8s.io/v1/endpointslices"),
    addresspools: spec(`/apis/${GROUP}/${VERSION}/addresspools`),
    loadbalancerconfigs: spec(`/apis/${GROUP}/${VERSION}/loadbalancerconfigs`),
    egressnats: spec(`/apis/${GROUP}/${VERSION}/egressnats`),
    egresspods: spec("/api/v1/pods", { labelSelector: EGRESS_POD_LABEL }),
    egressdeployments: spec("/apis/apps/v1/deployments", { labelSelector: EGRESS_POD_LABEL }),
    egresspdbs: spec("/apis/policy/v1/poddisruptionbudgets", { labelSelector: EGRESS_POD_LABEL }),
    pods: spec("/api/v1/pods"),
    namespaces: spec("/api/v1/namespaces"),
    nodes: spec("/api/v1/nodes"),
    localpods: localPodsOf === undefined
      ? undefined
      : spec("/api/v1/pods", { fieldSelector: `spec.nodeName=${localPodsOf}` }),
    policy: policy &&
      spec(`/api/v1/namespaces/${policy.namespace}/configmaps`, {
        fieldSelector: `metadata.name=${policy.name}`,
      }),
  };
}

/** An error's HTTP status, however client-node carries it. */
export function statusCodeOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown } | null;
  const c = e?.code ?? e?.statusCode;
  return typeof c === "number" ? c : undefined;
}

/**
 * List + watch of one resource into a cache. A watch that ends is resumed from the last
 * resourceVersion (bookmarks keep it fresh); 410 Gone re-lists and reports the difference as
 * events; any other failure is retried after a capped backoff.
 */
class Reflector {
  readonly objects = new Map<string, KubeObject>();
  #rv = "";
  #watch: AbortController | undefined;

  constructor(
    readonly name: ResourceName,
    readonly spec: ResourceSpec,
    readonly kc: k8s.KubeConfig,
    readonly emit: (e: ObjectEvent) => void,
    readonly logger: Logger,
    readonly metrics: ReturnType<typeof informerMetrics>,
  ) {}

  /** Runs until `signal` aborts; `onListed` after each successful list. */
  async run(signal: AbortSignal, backoffOptions: BackoffOptions, onListed: () => void) {
    const backoff = new Backoff(backoffOptions);
    signal.addEventListener("abort", () => this.#watch?.abort(), { once: true });
    while (!signal.aborted) {
      const started = Date.now();
      try {
        if (this.#rv === "") {
          await this.#list();
          onListed();
        }
        await this.#watchOnce(signal);
        // A watch the server ended after a while is normal: resume at once.
        if (Date.now() - started >= 1000) {
          backoff.reset();
          continue;
        }
      } catch (err) {
        if (signal.aborted) break;
        this.metrics.watchErrors.inc({ resource: this.name });
        if (statusCodeOf(err) === 410) this.#rv = "";
        this.logger.warn("list or watch failed; retrying", {
          resource: this.name,
          error: String((err as Error)?.message ?? err),
          code: statusCodeOf(err),
        });
      }
      await sleep(backoff.next(), signal).catch(() => {});
    }
  }

  async #list(): Promise<void> {
    this.metrics.relists.inc({ resource: this.name });
    const list = await this.spec.list();
    const seen = new Set<string>();
    for (const o of list.items) {
      const key = keyOf(o);
      seen.add(key);
      const before = this.objects.get(key);
      this.objects.set(key, o);
      if (before === undefined) this.emit({ type: "add", object: o });
      else if (before.metadata?.resourceVersion !== o.metadata?.resourceVersion) {
        this.emit({ type: "update", object: o });
      }
    }
    for (const [key, o] of this.objects) {
      if (!seen.has(key)) {
        this.objects.delete(key);
        this.emit({ type: "delete", object: o });
      }
    }
    this.#rv = list.metadata?.resourceVersion ?? "";
    this.logger.debug("listed", { resource: this.name, count: list.items.length, rv: this.#rv });
  }

  /** One watch from the current resourceVersion; resolves when it ends, throws on failure. */
  #watchOnce(signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = (err: unknown) => {
        this.#watch = undefined;
        if (err && !signal.aborted && !(err instanceof Error && err.name === "AbortError")) {
          reject(err);
        } else resolve();
      };
      const handle = (phase: string, obj: KubeObject) => {
        if (phase === "ERROR") {
          // In-stream 410 Expired: the history is gone; re-list when the stream ends.
          if (obj?.code === 410) this.#rv = "";
          this.#watch?.abort();
          return;
        }
        const rv = obj?.metadata?.resourceVersion;
        if (phase === "BOOKMARK") {
          if (rv) this.#rv = rv;
          return;
        }
        const key = keyOf(obj);
        if (phase === "DELETED") {
          this.objects.delete(key);
          this.emit({ type: "delete", object: obj });
        } else if (phase === "ADDED" || phase === "MODIFIED") {
          const had = this.objects.has(key);
          this.objects.set(key, obj);
          this.emit({ type: had ? "update" : "add", object: obj });
        }
        if (rv) this.#rv = rv;
      };
      new k8s.Watch(this.kc).watch(
        this.spec.watchPath,
        {
          ...this.spec.params,
          resourceVersion: this.#rv,
          allowWatchBookmarks: true,
          timeoutSeconds: 300,
        },
        handle,
        done,
      ).then((c) => {
        if (signal.aborted) c.abort();
        else this.#watch = c;
      }, reject);
    });
  }
}

/** Options of {@linkcode Informers}. */
export interface InformersOptions {
  /** Called with each flushed batch (after `debounceMs` quiet, or `maxBatch` events). */
  onBatch: (batch: Batch) => void;
  /** Quiet time before a batch is flushed (default 10 ms). */
  debounceMs?: number;
  /** Events that flush a batch at once (default 1,000). */
  maxBatch?: number;
  /** Retry schedule of failed lists and watches (default 200 ms .. 30 s). */
  backoff?: BackoffOptions;
  /** Also watch this ConfigMap as resource `policy` (the WASM policy module). */
  policyConfigMap?: { namespace: string; name: string };
  /** Watch the pods of this node as resource `localpods` (name it in `resources`). */
  localPodsOf?: string;
  /** Only these resources (default {@linkcode RESOURCES}). */
  resources?: readonly ResourceName[];
  logger?: Logger;
  /** Where its metrics go (default the process registry, served at `/metrics`). */
  registry?: Registry;
}

/** The watched resources' caches and the batching of their events. */
export class Informers implements ClusterView, AsyncDisposable {
  /** Resolves once every resource has been listed once. */
  readonly synced: Promise<void>;
  readonly #reflectors: Reflector[];
  readonly #abort = new AbortController();
  readonly #options: InformersOptions;
  #pending: Batch = {};
  #pendingCount = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running: Promise<unknown> | undefined;
  #markSynced!: () => void;
  #listed = new Set<ResourceName>();

  constructor(kc: k8s.KubeConfig, options: InformersOptions) {
    this.#options = options;
    const logger = (options.logger ?? log).with({ component: "informers" });
    const all = specs(kc, options.policyConfigMap, options.localPodsOf);
    const metrics = informerMetrics(options.registry ?? processRegistry);
    const names = [...(options.resources ?? RESOURCES)];
    if (options.policyConfigMap && !names.includes("policy")) names.push("policy");
    this.#reflectors = names.map((name) => {
      const spec = all[name];
      if (!spec) {
        const option = name === "localpods" ? "localPodsOf" : "policyConfigMap";
        throw new Error(`Cannot watch "${name}": ${option} is not set`);
      }
      return new Reflector(name, spec, kc, (e) => this.#push(name, e), logger, metrics);
    });
    this.synced = new Promise((resolve) => (this.#markSynced = resolve));
  }

  /** Starts every reflector (idempotent). */
  start(): void {
    if (this.#running) return;
    const backoff = this.#options.backoff ?? { minMs: 200, maxMs: 30_000 };
    this.#running = Promise.all(
      this.#reflectors.map((r) =>
        r.run(this.#abort.signal, backoff, () => {
          this.#listed.add(r.name);
          if (this.#listed.size === this.#reflectors.length) {
            this.#flush(); // the initial state goes out before `synced` resolves
            this.#markSynced();
          }
        })
      ),
    );
  }

  /** Every cached object of `resource`. */
  list(resource: ResourceName): KubeObject[] {
    const r = this.#reflectors.find((x) => x.name === resource);
    return r ? [...r.objects.values()] : [];
  }

  #push(resource: ResourceName, e: ObjectEvent): void {
    (this.#pending[resource] ??= []).push(e);
    this.#pendingCount++;
    if (this.#listed.size < this.#reflectors.length) return; // flushed when all are listed
    if (this.#pendingCount >= (this.#options.maxBatch ?? 1000)) this.#flush();
    else if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.#flush(), this.#options.debounceMs ?? 10);
    }
  }

  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pendingCount === 0) return;
    const batch = this.#pending;
    this.#pending = {};
    this.#pendingCount = 0;
    this.#options.onBatch(batch);
  }

  /** Stops every watch and waits for the reflectors to end. */
  async stop(): Promise<void> {
    this.#abort.abort();
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
