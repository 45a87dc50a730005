/**
 * The {@linkcode SourceWriter}: the Writer as one data source sees it. Every row it writes is
 * owned by that source; the cross-table rules (priorities, backends before services, local
 * redirects, frontends marked pending when their selection changes) are applied here.
 *
 * @module
 */

import type { WriteTxn } from "../../../lib/statedb/mod.ts";
import { isAddr, parseAddr } from "./address.ts";
import {
  type Backend,
  type BackendInstance,
  backendsByService,
  compareInstances,
  DEFAULT_WEIGHT,
} from "./backend.ts";
import { type Frontend, frontendsByService } from "./frontend.ts";
import { isDualStack } from "./select.ts";
import { redirectByService } from "./redirect.ts";
import type { Service } from "./service.ts";
import { sameHealthCheck } from "../sources/health_check.ts";
import type { BackendInput, ServiceInput } from "./inputs.ts";
import type { LBTables } from "./tables.ts";
import type { ReconcileStatus } from "../reconciler/status.ts";
import type { Logger } from "../../../lib/log.ts";

/**
 * What a {@linkcode SourceWriter} needs of the Writer (`writer.ts`, which implements it): the
 * tables, the priorities, the rows' pending status and the cross-table refresh.
 */
export interface WriterCore {
  readonly tables: LBTables;
  readonly log: Logger;
  readonly metrics: {
    holdfast_writer_rejected_services_total: number;
    holdfast_writer_rejected_frontends_total: number;
  };
  txn(): WriteTxn;
  priority(source: string): number;
  intern(s: string): string;
  pending(prev?: ReconcileStatus): ReconcileStatus;
  refreshFrontends(txn: WriteTxn, name: string): void;
}

/** Distinct backend parameter sets one `setBackends` call shares instance objects among. */
const MAX_SHARED = 16;

/** The Writer as one data source sees it: every row written is owned by `source`. */
export class SourceWriter {
  readonly writer: WriterCore;
  readonly source: string;
  readonly priority: number;

  /** @internal */
  constructor(writer: WriterCore, source: string) {
    this.writer = writer;
    this.source = writer.intern(source);
    this.priority = writer.priority(source);
  }

  /** A write transaction locking all LB tables. */
  txn(): WriteTxn {
    return this.writer.txn();
  }

  /**
   * Registers this source as an initializer of the LB tables; call the returned function in a
   * write txn once the initial sync is written. Pruning waits for every initializer.
   */
  registerInitializer(txn: WriteTxn): (txn: WriteTxn) => void {
    const t = this.writer.tables;
    const name = this.source;
    const fns = [
      t.services.registerInitializer(txn, name),
      t.frontends.registerInitializer(txn, name),
      t.backends.registerInitializer(txn, name),
    ];
    return (w) => fns.forEach((f) => f(w));
  }

  /**
   * Inserts or updates a service and replaces its set of frontends. Returns false (and changes
   * nothing) if a better-priority source owns the service.
   */
  upsertService(txn: WriteTxn, input: ServiceInput): boolean {
    const { services, frontends, redirects } = this.writer.tables;
    const old = services.get(txn, { index: services.schema.primary, key: input.name });
    if (
      old !== undefined && old.source !== this.source &&
      this.writer.priority(old.source) < this.priority
    ) {
      this.writer.metrics.holdfast_writer_rejected_services_total++;
      this.writer.log.info("service rejected: owned by a better-priority source", {
        service: input.name,
        source: this.source,
        owner: old.source,
      });
      return false;
    }
    const svc: Service = {
      name: old?.name ?? input.name,
      source: this.source,
      flowKeyMode: input.flowKeyMode ?? "five-tuple",
      maglevSize: input.maglevSize ?? 0,
      ...(input.healthCheck ? { healthCheck: input.healthCheck } : {}),
      ...(input.draining ? { draining: true } : {}),
    };
    const svcChanged = old === undefined || old.source !== svc.source ||
      old.flowKeyMode !== svc.flowKeyMode || old.maglevSize !== svc.maglevSize ||
      (old.draining ?? false) !== (svc.draining ?? false);
    // A new health check changes the row (and the model agents read), not what frontends select.
    if (svcChanged || !sameHealthCheck(old.healthCheck, svc.healthCheck)) {
      services.insert(txn, svc);
    }
    const redirect = redirects.get(txn, redirectByService(svc.name));
    const redirectTo = redirect?.target ?? null;
    // Its frontends before this upsert, read once: for the stack check and the deletes below
    // (an insert below only writes addresses in `wanted`, so the others are as read here).
    const existing = frontends.list(txn, frontendsByService(svc.name));
    // Becoming (or ceasing to be) dual stack changes what every frontend selects (select.ts).
    const stackChanged = isDualStack(existing) !== isDualStack(input.frontends);
    const wanted = new Set<string>();
    for (const fi of input.frontends) {
      if (!isAddr(fi.address)) parseAddr(fi.address);
      wanted.add(fi.address);
      const portName = this.writer.intern(fi.portName ?? "");
      const cur = frontends.get(txn, { index: frontends.schema.primary, key: fi.address });
      if (cur !== undefined && cur.serviceName !== svc.name) {
        const owner = services.get(txn, { index: services.schema.primary, key: cur.serviceName });
        if (owner !== undefined && this.writer.priority(owner.source) < this.priority) {
          this.writer.metrics.holdfast_writer_rejected_frontends_total++;
          this.writer.log.info("frontend rejected: owned by a better-priority service", {
            frontend: fi.address,
            service: svc.name,
            owner: cur.serviceName,
          });
          continue;
        }
      }
      if (
        cur !== undefined && !svcChanged && !stackChanged && cur.serviceName === svc.name &&
        cur.portName === portName &&
        cur.redirectTo === redirectTo
      ) continue;
      const fe: Frontend = {
        address: fi.address,
        serviceName: svc.name,
        portName,
        redirectTo,
        status: this.writer.pending(cur?.status),
      };
      frontends.insert(txn, fe);
    }
    for (const fe of existing) {
      if (!wanted.has(fe.address)) frontends.delete(txn, fe);
    }
    return true;
  }

  /** Deletes the service and its frontends if this source owns it. Backends stay. */
  deleteService(txn: WriteTxn, name: string): boolean {
    const { services, frontends } = this.writer.tables;
    const old = services.get(txn, { index: services.schema.primary, key: name });
    if (old === undefined || old.source !== this.source) return false;
    services.delete(txn, old);
    for (const fe of frontends.list(txn, frontendsByService(name))) frontends.delete(txn, fe);
    return true;
  }

  /** Adds or updates this source's backends of a service (others of the service stay). */
  upsertBackends(
    txn: WriteTxn,
    args: { service: string; backends: readonly BackendInput[] },
  ): void {
    if (this.#upsertAll(txn, args)) this.writer.refreshFrontends(txn, args.service);
  }

  /** Replaces this source's backends of a service with `backends`. */
  setBackends(txn: WriteTxn, args: { service: string; backends: readonly BackendInput[] }): void {
    let changed = false;
    const { backends } = this.writer.tables;
    const existing = backends.list(txn, backendsByService(args.service));
    if (existing.length > 0) {
      // address → port names wanted ("" when unnamed); built only when there is something to diff.
      const keep = new Map<string, string | string[]>();
      for (const b of args.backends) {
        const p = b.portName ?? "", cur = keep.get(b.address);
        if (cur === undefined) keep.set(b.address, p);
        else keep.set(b.address, typeof cur === "string" ? [cur, p] : [...cur, p]);
      }
      for (const be of existing) {
        const want = keep.get(be.address);
        for (const i of be.instances) {
          if (i.serviceName !== args.service || i.source !== this.source) continue;
          if (want === i.portName || (typeof want === "object" && want.includes(i.portName))) {
            continue;
          }
          changed = this.#releaseInstance(txn, be.address, args.service, i.portName) || changed;
        }
      }
    }
    changed = this.#upsertAll(txn, args) || changed;
    if (changed) this.writer.refreshFrontends(txn, args.service);
  }

  /** Upserts this source's instances of `backends` in a service; true when a row changed. */
  #upsertAll(
    txn: WriteTxn,
    args: { service: string; backends: readonly BackendInput[] },
  ): boolean {
    let changed = false;
    const shared: (readonly BackendInstance[])[] = [];
    for (const b of args.backends) {
      changed = this.#upsertInstance(txn, args.service, b, shared) || changed;
    }
    return changed;
  }

  /** Removes this source's instances of the given backend addresses from a service. */
  releaseBackends(txn: WriteTxn, args: { service: string; addresses: readonly string[] }): void {
    let changed = false;
    const { backends } = this.writer.tables;
    for (const addr of args.addresses) {
      const be = backends.get(txn, { index: backends.schema.primary, key: addr });
      if (be === undefined) continue;
      for (const i of be.instances) {
        if (i.serviceName === args.service && i.source === this.source) {
          changed = this.#releaseInstance(txn, addr, args.service, i.portName) || changed;
        }
      }
    }
    if (changed) this.writer.refreshFrontends(txn, args.service);
  }

  /** Sets a local-redirect override: `service`'s frontends use `target`'s backends. */
  setLocalRedirect(txn: WriteTxn, args: { service: string; target: string }): void {
    const { redirects, frontends } = this.writer.tables;
    redirects.insert(txn, { serviceName: args.service, target: args.target, source: this.source });
    for (const fe of frontends.list(txn, frontendsByService(args.service))) {
      if (fe.redirectTo !== args.target) {
        frontends.insert(txn, {
          ...fe,
          redirectTo: args.target,
          status: this.writer.pending(fe.status),
        });
      }
    }
  }

  /** Removes the local-redirect override of `service`; its own backends are used again. */
  removeLocalRedirect(txn: WriteTxn, service: string): boolean {
    const { redirects, frontends } = this.writer.tables;
    const r = redirects.get(txn, redirectByService(service));
    if (r === undefined || r.source !== this.source) return false;
    redirects.delete(txn, r);
    for (const fe of frontends.list(txn, frontendsByService(service))) {
      if (fe.redirectTo !== null) {
        frontends.insert(txn, { ...fe, redirectTo: null, status: this.writer.pending(fe.status) });
      }
    }
    return true;
  }

  /** Removes every row of this source: services (with frontends), backend instances, redirects. */
  deleteAll(txn: WriteTxn): void {
    const { services, backends, redirects } = this.writer.tables;
    const svcs = services.all(txn).filter((s) => s.source === this.source);
    for (const s of svcs) this.deleteService(txn, s.name);
    const touched = new Set<string>();
    const rows = backends.all(txn).filter((b) => b.instances.some((i) => i.source === this.source));
    for (const be of rows) {
      const rest = be.instances.filter((i) => i.source !== this.source);
      for (const i of be.instances) if (i.source === this.source) touched.add(i.serviceName);
      if (rest.length === 0) backends.delete(txn, be);
      else backends.insert(txn, { address: be.address, instances: rest });
    }
    for (const r of redirects.all(txn).filter((r) => r.source === this.source)) {
      this.removeLocalRedirect(txn, r.serviceName);
    }
    for (const s of touched) this.writer.refreshFrontends(txn, s);
  }

  /**
   * `shared` memoizes, per call, the single-instance array for each distinct parameter set (the
   * first {@linkcode MAX_SHARED} of them):
   * the endpoints of one slice usually share all parameters, so their rows share one instance
   * object and one array (rows are immutable, sharing is safe) — ~70 bytes less per backend.
   */
  #upsertInstance(
    txn: WriteTxn,
    service: string,
    b: BackendInput,
    shared: (readonly BackendInstance[])[],
  ): boolean {
    const { backends } = this.writer.tables;
    const w = this.writer;
    const portName = b.portName ?? "",
      state = b.state ?? "active",
      weight = b.weight ?? DEFAULT_WEIGHT;
    const zone = b.zone ?? "";
    // The parameter sets seen in this call (a slice's endpoints have one or a few: a port name,
    // a zone or two), compared field by field: no key string per backend.
    let single: readonly BackendInstance[] | undefined;
    for (let j = shared.length - 1; j >= 0; j--) {
      const c = shared[j]![0]!;
      if (
        c.portName === portName && c.state === state && c.weight === weight && c.zone === zone
      ) {
        single = shared[j]!;
        break;
      }
    }
    if (single === undefined) {
      const fresh: BackendInstance = {
        serviceName: service,
        portName: w.intern(portName),
        source: this.source,
        priority: this.priority,
        state,
        weight,
        zone: w.intern(zone),
      };
      single = [fresh];
      if (shared.length < MAX_SHARED) shared.push(single);
    }
    const inst = single[0]!;
    const old = backends.get(txn, { index: backends.schema.primary, key: b.address });
    if (old === undefined) {
      if (!isAddr(b.address)) parseAddr(b.address); // throws the descriptive error
      backends.insert(txn, { address: b.address, instances: single });
      return true;
    }
    const list = old.instances;
    let i = 0;
    for (; i < list.length; i++) {
      const o = list[i]!;
      if (o.serviceName === service && o.source === this.source && o.portName === inst.portName) {
        break;
      }
    }
    let instances: BackendInstance[];
    if (i < list.length) {
      const o = list[i]!;
      if (o.state === inst.state && o.weight === inst.weight && o.zone === inst.zone) return false;
      instances = list.slice();
      instances[i] = inst;
    } else {
      instances = [...list, inst].sort(compareInstances);
    }
    const row: Backend = { address: old.address, instances };
    backends.insert(txn, row);
    return true;
  }

  #releaseInstance(txn: WriteTxn, address: string, service: string, portName: string): boolean {
    const { backends } = this.writer.tables;
    const old = backends.get(txn, { index: backends.schema.primary, key: address });
    if (old === undefined) return false;
    const rest = old.instances.filter((i) =>
      !(i.serviceName === service && i.source === this.source && i.portName === portName)
    );
    if (rest.length === old.instances.length) return false;
    if (rest.length === 0) backends.delete(txn, old);
    else backends.insert(txn, { address: old.address, instances: rest });
    return true;
  }
}
