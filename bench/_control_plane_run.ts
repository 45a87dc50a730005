/**
 * The timed runs of `bench/control_plane.ts`: the store pipeline (k8s source → Writer → tables →
 * BPF reconciler → in-memory maps) and its plain-Maps baseline, with the timed Maglev builder and
 * the memory counters they read.
 *
 * @module
 */

import process from "node:process";
import v8 from "node:v8";
import { createControlPlane } from "../node/lb/control_plane.ts";
import { hostPort } from "../node/lb/tables/address.ts";
import { MemoryLBMaps } from "../node/lb/maps/memory.ts";
import type { MaglevBuilder } from "../policy-as/host/maglev_input.ts";
import { TsMaglevBuilder } from "../policy-as/host/mod.ts";
import {
  convertEndpointSlice,
  convertService,
  type K8sEndpointSlice,
  type K8sService,
} from "../node/lb/sources/k8s_convert.ts";
import { type K8sEvent, K8sSource } from "../node/lb/sources/k8s_source.ts";

/** The TypeScript Maglev builder (`--maglev-builder=ts`, and the WASM builder's fallback). */
export const tsMaglev = new TsMaglevBuilder();

export const gcFn = (globalThis as { gc?: () => void }).gc;
export function gc(): void {
  if (gcFn) { for (let i = 0; i < 3; i++) gcFn(); }
}
/** V8's running total of bytes allocated (Deno exposes it; @types/node does not list it). */
export const allocated = () =>
  (v8.getHeapStatistics() as unknown as { total_allocated_bytes: number }).total_allocated_bytes;
export const heapUsed = () => Deno.memoryUsage().heapUsed;

/** The builder, timed: the pipeline reports how much of its time Maglev takes. */
export const timedMaglev = {
  ms: 0,
  inner: tsMaglev as MaglevBuilder,
  build(
    backends: readonly { key: string; weight: number }[],
    m: number,
    out?: Uint32Array,
    ids?: readonly number[],
  ) {
    const t = performance.now();
    const table = this.inner.build(backends, m, out, ids);
    this.ms += performance.now() - t;
    return table;
  },
};

export interface PipelineResult {
  maglevMs: number;
  ingestMs: number;
  reconcileMs: number;
  totalMs: number;
  allocatedBytes: number;
  /** Process CPU time (all threads, GC helpers included) over the timed run. */
  cpuMs: number;
  keep: unknown;
  maps: MemoryLBMaps;
  stop: () => Promise<void>;
}

export async function pipeline(
  events: K8sEvent[],
  opts: { batch: number; maglev: number },
): Promise<PipelineResult> {
  const maps = new MemoryLBMaps({ checkInvariants: false });
  timedMaglev.ms = 0;
  const cp = await createControlPlane(maps, {
    maglevSize: opts.maglev,
    batchSize: 1000,
    maglev: timedMaglev,
  });
  const k8s = new K8sSource(cp.writer);
  k8s.registerInitializer();
  cp.start();
  const a0 = allocated();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const step = opts.batch * 2; // a service and its slice per service
  for (let i = 0; i < events.length; i += step) k8s.apply(events.slice(i, i + step));
  k8s.synced();
  const t1 = performance.now();
  await cp.reconciler.waitIdle();
  const t2 = performance.now();
  const a1 = allocated();
  const c1 = process.cpuUsage(c0);
  const n = events.length / 2;
  const txn = cp.db.readTxn();
  let done = 0;
  cp.tables.frontends.scan(txn, (fe) => {
    if (fe.status.kind === "done") done++;
  });
  if (done !== n || maps.services.size !== n) {
    throw new Error(
      `Benchmark did not converge: ${done}/${n} frontends done, ${maps.services.size} services in maps`,
    );
  }
  return {
    maglevMs: timedMaglev.ms,
    ingestMs: t1 - t0,
    reconcileMs: t2 - t1,
    totalMs: t2 - t0,
    allocatedBytes: a1 - a0,
    cpuMs: (c1.user + c1.system) / 1000,
    keep: { cp, k8s },
    maps,
    stop: () => cp.stop(),
  };
}

/** Same conversion, Maglev and map writes with plain Maps: the floor under the store's cost. */
export async function baseline(events: K8sEvent[], maglev: number): Promise<number> {
  const builder = timedMaglev.inner;
  let scratch: Uint32Array | undefined;
  const maps = new MemoryLBMaps({ checkInvariants: false });
  const t0 = performance.now();
  const services = new Map<string, ReturnType<typeof convertService>>();
  const backends = new Map<string, ReturnType<typeof convertEndpointSlice>>();
  for (const e of events) {
    const o = e.object;
    if (o.kind === "Service") {
      const s = convertService(o as K8sService);
      services.set(s.name, s);
    } else {
      const sl = o as K8sEndpointSlice;
      backends.set(
        `${sl.metadata!.namespace}/${sl.metadata!.labels!["kubernetes.io/service-name"]}`,
        convertEndpointSlice(sl),
      );
    }
  }
  const ids = new Map<string, number>();
  let nextId = 1, sid = 1;
  for (const [name, s] of services) {
    const bs = backends.get(name) ?? [];
    const keys = bs.map((b) => ({ key: hostPort(b.address), weight: b.weight ?? 100 }));
    const bids: number[] = [];
    for (const k of keys) {
      let id = ids.get(k.key);
      if (id === undefined) {
        ids.set(k.key, id = nextId++);
        const c = k.key.lastIndexOf(":");
        await maps.updateBackend(id, {
          address: k.key.slice(0, c),
          port: Number(k.key.slice(c + 1)),
        });
      }
      bids.push(id);
    }
    // One reused buffer, as the reconciler does (the maps copy what they are given); the slots
    // hold the backend IDs straight from the builder, as in the reconciler.
    const table = scratch = builder.build(keys, maglev, scratch, bids);
    const id = sid++;
    await maps.updateMaglev(id, table);
    for (const f of s.frontends) {
      const [ipPort, proto] = f.address.split("/");
      const c = ipPort!.lastIndexOf(":");
      await maps.updateService(
        {
          address: ipPort!.slice(0, c),
          port: Number(ipPort!.slice(c + 1)),
          protocol: proto as "TCP",
        },
        { serviceId: id, backendCount: keys.length, flowKeyMode: "five-tuple", maglevSize: maglev },
      );
    }
  }
  return performance.now() - t0;
}
