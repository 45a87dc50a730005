/**
 * The Kubernetes data source's write side: takes Service/EndpointSlice events and writes the
 * converted rows through the Writer as source `k8s`, keeping the slices of each service (a
 * service's backends are the union of its slices). In the controller the informers feed it
 * (`controller/k8s/_feed.ts`: claimed Services with their allocated addresses, and their
 * EndpointSlices, as one batch per reconcile pass); tests and the control-plane benchmark feed
 * it plain events.
 *
 * @module
 */

import type { WriteTxn } from "../../../lib/statedb/mod.ts";
import { backendsByService } from "../tables/backend.ts";
import type { SourceWriter } from "../tables/source_writer.ts";
import type { BackendInput, Writer } from "../tables/writer.ts";
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
   * service → the name of its only slice, or, for services with several slices, slice name →
   * that slice's converted backends (the union is written). Single-slice services, the common
   * case, keep no backend list here: the backends table is the state.
   */
  readonly #byService = new Map<string, string | Map<string, BackendInput[]>>();
  #initDone: ((txn: WriteTxn) => void) | null = null;

  constructor(writer: Writer, options: { includeClusterIP?: boolean; source?: string } = {}) {
    this.src = writer.source(options.source ?? "k8s");
    this.#includeClusterIP = options.includeClusterIP ?? false;
  }

  /**
   * Registers the initial-sync initializer (before the control plane starts; idempotent):
   * pruning waits until `synced()`.
   */
  registerInitializer(): void {
    if (this.#initDone !== null) return;
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
    const sliceName = slice.metadata?.name ?? "";
    const cur = this.#byService.get(service);
    const backends = e.type === "delete" ? [] : convertEndpointSlice(slice);
    if (cur === undefined || cur === sliceName) {
      // The only slice of the service (the common case).
      if (e.type === "delete") this.#byService.delete(service);
      else if (cur === undefined) this.#byService.set(service, sliceName);
      this.src.setBackends(txn, { service, backends });
      return;
    }
    let slices: Map<string, BackendInput[]>;
    if (typeof cur === "string") {
      if (e.type === "delete") return; // an unknown slice went away
      // A second slice: recover the first one's backends from the table.
      slices = new Map([[cur, this.#currentBackends(txn, service)]]);
      this.#byService.set(service, slices);
    } else slices = cur;
    if (e.type === "delete") slices.delete(sliceName);
    else slices.set(sliceName, backends);
    if (slices.size === 1) this.#byService.set(service, slices.keys().next().value!);
    else if (slices.size === 0) this.#byService.delete(service);
    this.src.setBackends(txn, { service, backends: [...slices.values()].flat() });
  }

  /** This source's backends of `service` as currently in the table. */
  #currentBackends(txn: WriteTxn, service: string): BackendInput[] {
    const out: BackendInput[] = [];
    const { backends } = this.src.writer.tables;
    for (const b of backends.list(txn, backendsByService(service))) {
      for (const i of b.instances) {
        if (i.serviceName === service && i.source === this.src.source) {
          out.push({
            address: b.address,
            portName: i.portName,
            state: i.state,
            weight: i.weight,
            zone: i.zone,
          });
        }
      }
    }
    return out;
  }

  /** Forgets every slice of a service (used when resyncing). */
  reset(): void {
    this.#byService.clear();
  }
}
