/**
 * One cold status run of the controller against the Kubernetes API test server, both in this
 * process and nothing else (no Redis, no agents): N LoadBalancer Services × E endpoints and an
 * AddressPool exist, the controller starts (`startController`, its own `KubeClusterWriter`), and
 * the run is timed, on the wall clock and the process's CPU clock, until the server's store holds
 * every Service's status with its address (`statusMs`) and every `AddressAllocated` Event
 * (`eventsMs`). The store is read through its listener (`Store.subscribe`): what is timed is the
 * write landing in the server, not a client noticing it.
 *
 * Used by `bench/k8s_status_ab.ts` (this tree against another checkout, alternately). The modules
 * are passed in, so each side runs its own controller, client wrapper and test server.
 *
 * @module
 */

import process from "node:process";
import v8 from "node:v8";

// deno-lint-ignore no-explicit-any
type Mod = any;

/** The modules one side runs. */
export interface StatusSide {
  name: string;
  /** lab/kube/mod.ts */
  kube: Mod;
  /** controller/k8s/run.ts */
  run: Mod;
  /** Directory of the CRDs (k8s/crds). */
  crdDir: string;
}

/** What one run measured. */
export interface StatusRun {
  /** Controller start → every Service's status in the store (ms). */
  statusMs: number;
  /** Controller start → every AddressAllocated Event in the store (ms). */
  eventsMs: number;
  /** Controller start → informers listed and the first pass fed the tables (ms). */
  syncedMs: number;
  /** Process CPU from the start to `synced`, per Service (µs). */
  syncedCpuUs: number;
  /** Process CPU (every thread) from the start to the last status, per Service (µs). */
  statusCpuUs: number;
  /** Same, to the last Event. */
  eventsCpuUs: number;
  /** Bytes allocated (V8 heap) to the last Event, per Service. */
  allocB: number;
  /** Service status writes that landed (some Services may be written twice). */
  statusWrites: number;
}

const ENDPOINTS = 10;
const WAIT_MS = 120_000;
const allocated = () =>
  (v8.getHeapStatistics() as unknown as { total_allocated_bytes: number }).total_allocated_bytes;
const gcFn = (globalThis as { gc?: () => void }).gc;

/** Service `i` as bench/k8s.ts creates it. */
export function serviceBody(i: number, maglev?: number) {
  return {
    metadata: {
      name: `svc-${i}`,
      namespace: "default",
      annotations: (maglev ? { "holdfast.io/maglev-size": String(maglev) } : {}) as Record<
        string,
        string
      >,
    },
    spec: {
      type: "LoadBalancer",
      loadBalancerClass: "holdfast.io/lb",
      ports: [{ name: "http", port: 80, protocol: "TCP" }],
    },
  };
}

/** Service `i`'s EndpointSlice of `endpoints` ready endpoints, as bench/k8s.ts creates it. */
export function sliceBody(i: number, endpoints = ENDPOINTS) {
  return {
    metadata: {
      name: `svc-${i}-1`,
      namespace: "default",
      labels: { "kubernetes.io/service-name": `svc-${i}` },
    },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    endpoints: Array.from({ length: endpoints }, (_, j) => {
      const k = i * endpoints + j;
      return {
        addresses: [`172.${16 + (k >>> 16)}.${(k >>> 8) & 255}.${k & 255}`],
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: `node-${k % 50}`,
      };
    }),
  };
}

/** Runs `tasks` with at most `n` in flight. */
export async function limited(tasks: (() => Promise<unknown>)[], n: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await tasks[next++]!();
  };
  await Promise.all(Array.from({ length: Math.min(n, tasks.length) }, worker));
}

/**
 * Counts, from the store's listener, Services whose status shows an address and
 * `AddressAllocated` Events.
 */
export function watchStore(store: {
  subscribe(fn: (e: { type: string; resource: string; object: Mod }) => void): () => void;
}): { statuses: Set<string>; writes: () => number; events: () => number; stop: () => void } {
  const statuses = new Set<string>();
  let events = 0, writes = 0;
  const stop = store.subscribe((e) => {
    const o = e.object;
    if (e.resource.endsWith("/services") && e.type === "MODIFIED") {
      if ((o.status?.loadBalancer?.ingress?.length ?? 0) > 0) {
        writes++;
        statuses.add(`${o.metadata.namespace}/${o.metadata.name}`);
      }
    } else if (
      e.resource.endsWith("/events") && e.type === "ADDED" && o.reason === "AddressAllocated"
    ) events++;
  });
  return { statuses, writes: () => writes, events: () => events, stop };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const end = performance.now() + WAIT_MS;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`Timed out after ${WAIT_MS} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** One cold run of side `s` with `n` Services; `during` runs around the timed part. */
export async function statusRun(
  s: StatusSide,
  n: number,
  during?: { start(): Promise<void>; stop(): Promise<void> },
): Promise<StatusRun> {
  const kube = await s.kube.startKubeServer({ crdDirs: [s.crdDir], historyLimit: 4 * n + 100 });
  try {
    const kc = await s.kube.kubeConfigFor(kube);
    await s.kube.createAddressPool(kc, "bench", [{ cidr: "10.96.0.0/20" }]);
    const k8s = await import("@kubernetes/client-node");
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const discovery = kc.makeApiClient(k8s.DiscoveryV1Api);
    await limited(
      Array.from({ length: n }, (_, i) => () =>
        Promise.all([
          core.createNamespacedService({ namespace: "default", body: serviceBody(i) }),
          discovery.createNamespacedEndpointSlice({ namespace: "default", body: sliceBody(i) }),
        ])),
      32,
    );
    const seen = watchStore(kube.store);
    gcFn?.();
    await during?.start();
    const a0 = allocated(), c0 = process.cpuUsage(), t0 = performance.now();
    const running = s.run.startController(kc, { identity: `ab-${s.name}` });
    let syncedMs = NaN, syncedCpu = NaN;
    running.synced.then(() => {
      syncedMs = performance.now() - t0;
      const c = process.cpuUsage(c0);
      syncedCpu = c.user + c.system;
    });
    await until(() => seen.statuses.size >= n, `${n} statuses (side ${s.name})`);
    const statusMs = performance.now() - t0, cs = process.cpuUsage(c0);
    await until(() => seen.events() >= n, `${n} Events (side ${s.name})`);
    const eventsMs = performance.now() - t0, ce = process.cpuUsage(c0), a1 = allocated();
    await during?.stop();
    await running.synced;
    await running.stop();
    seen.stop();
    return {
      statusMs,
      eventsMs,
      syncedMs,
      syncedCpuUs: syncedCpu / n,
      statusCpuUs: (cs.user + cs.system) / n,
      eventsCpuUs: (ce.user + ce.system) / n,
      allocB: (a1 - a0) / n,
      statusWrites: seen.writes(),
    };
  } finally {
    await kube.close();
  }
}
