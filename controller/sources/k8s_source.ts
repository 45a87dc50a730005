/**
 * The Kubernetes data source's write side: takes Service/EndpointSlice events (from the live
 * watch, a test, or the benchmark), keeps the slices of each service, and writes the converted
 * rows through the Writer as source `k8s`. A service's backends are the union of its slices.
 *
 * @module
 */

import type { WriteTxn } from "../statedb/mod.ts";
import type { SourceWriter, Writer } from "../lb/writer.ts";
import {
  convertEndpointSlice,
  convertService,
  type K8sEndpointSlice,
  type K8sService,
  objectName,
  sliceServiceName,
} from "./k8s_convert.ts";

/** A watch event. */
export interface K8sEvent {
  readonly type: "add" | "update" | "delete";
  readonly object: K8sService | K8sEndpointSlice;
}

/** Applies Kubernetes objects to the LB tables. */
export class K8sSource {
  readonly src: SourceWriter;
  readonly #includeClusterIP: boolean;
  /**
   * slice name → its service and the backend addresses it contributed. Only addresses are
   * kept (the strings are shared with the backend rows), to keep memory per service small.
   */
  readonly #slices = new Map<string, { service: string; addrs: string[] }>();
  /** service → its slice name, or their set when it has several. */
  readonly #byService = new Map<string, string | Set<string>>();
  #initDone: ((txn: WriteTxn) => void) | null = null;

  constructor(writer: Writer, options: { includeClusterIP?: boolean; source?: string } = {}) {
    this.src = writer.source(options.source ?? "k8s");
    this.#includeClusterIP = options.includeClusterIP ?? false;
  }

  /** Registers the initial-sync initializer (call before the first events). */
  registerInitializer(): void {
    const txn = this.src.txn();
    this.#initDone = this.src.registerInitializer(txn);
    txn.commit();
  }

  /** Marks the initial listing as written: pruning may start once every source did. */
  synced(): void {
    if (this.#initDone === null) return;
    const txn = this.src.txn();
    this.#initDone(txn);
    txn.commit();
    this.#initDone = null;
  }

  /** Applies events in one write transaction (a batch, as a reflector would). */
  apply(events: readonly K8sEvent[]): void {
    const txn = this.src.txn();
    try {
      for (const e of events) this.applyIn(txn, e);
      txn.commit();
    } finally {
      txn.abort();
    }
  }

  /** Applies one event inside `txn`. */
  applyIn(txn: WriteTxn, e: K8sEvent): void {
    const o = e.object;
    const kind = o.kind ?? ("endpoints" in o || "addressType" in o ? "EndpointSlice" : "Service");
    if (kind === "Service") {
      const svc = o as K8sService;
      if (e.type === "delete") this.src.deleteService(txn, objectName(svc));
      else {this.src.upsertService(
          txn,
          convertService(svc, { includeClusterIP: this.#includeClusterIP }),
        );}
      return;
    }
    if (kind !== "EndpointSlice") {
      throw new Error(`Cannot apply object of kind "${kind}": expected Service or EndpointSlice`);
    }
    const slice = o as K8sEndpointSlice;
    const service = sliceServiceName(slice);
    if (service === undefined) return;
    const sliceName = objectName(slice);
    const old = this.#slices.get(sliceName);
    if (old !== undefined && old.service !== service) {
      // The slice moved to another service (label changed): drop it from the old one first.
      this.applyIn(txn, { type: "delete", object: slice });
      return this.applyIn(txn, e);
    }
    const backends = e.type === "delete" ? [] : convertEndpointSlice(slice);
    const addrs = backends.map((b) => b.address);
    if (e.type === "delete") this.#slices.delete(sliceName);
    else this.#slices.set(sliceName, { service, addrs });
    const cur = this.#byService.get(service);
    let siblings: Set<string> | undefined = typeof cur === "object" ? cur : undefined;
    if (e.type !== "delete" && old === undefined) {
      if (cur === undefined) this.#byService.set(service, sliceName);
      else if (siblings !== undefined) siblings.add(sliceName);
      else this.#byService.set(service, siblings = new Set<string>([cur as string, sliceName]));
    } else if (e.type === "delete") {
      if (siblings !== undefined) {
        siblings.delete(sliceName);
        if (siblings.size === 1) this.#byService.set(service, siblings.values().next().value!);
      } else if (cur === sliceName) this.#byService.delete(service);
    }
    if (old !== undefined) {
      const keep = new Set(addrs);
      if (siblings !== undefined) {
        for (const n of siblings) {
          if (n !== sliceName) {
            for (const a of this.#slices.get(n)?.addrs ?? []) keep.add(a);
          }
        }
      }
      const gone = old.addrs.filter((a) => !keep.has(a));
      if (gone.length > 0) this.src.releaseBackends(txn, { service, addresses: gone });
    }
    if (backends.length > 0) this.src.upsertBackends(txn, { service, backends });
  }

  /** Forgets every slice of a service (used when resyncing). */
  reset(): void {
    this.#slices.clear();
    this.#byService.clear();
  }
}
