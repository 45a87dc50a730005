/**
 * The BPF-maps reconciler: frontends table → {@linkcode LBMaps}.
 *
 * Per frontend, one update writes, in order, the backends it needs that are not written yet,
 * its Maglev table, then its service entry; if any step fails the whole update is retried.
 * Backends shared by several frontends are written once and reference-counted; the last
 * frontend to drop one deletes it (after its own service entry no longer points at it).
 * Service and backend IDs are allocated here and restored from the maps' contents at start
 * (`restore()`), so a restarted controller rewrites identical entries: no flow is disturbed.
 * IDs stay within the maps' capacity (`LBMaps.capacity`, the datapath's `--max-services` and
 * `--max-backends`): a frontend that finds the ID space full fails with an error saying so (its
 * row shows it, retried with backoff until an ID frees up); the others are unaffected.
 *
 * @module
 */

import { hostPort, parseAddr } from "./lb/address.ts";
import type { Frontend } from "./lb/frontend.ts";
import { selectBackends } from "./lb/select.ts";
import { serviceByName } from "./lb/service.ts";
import type { LBTables } from "./lb/tables.ts";
import { frontendDiffers } from "./_lbmaps_verify.ts";
import type { LBMaps, ServiceEntry, ServiceKey } from "./lbmaps.ts";
import { MAGLEV_M_DEFAULT } from "../policy-as/host/abi.ts";
import { checkMaglevSize, type MaglevBuilder } from "../policy-as/host/maglev_input.ts";
import { TsMaglevBuilder } from "../policy-as/host/maglev_ts.ts";
import type { Operations, Repair } from "./reconciler/mod.ts";
import { pendingStatus } from "./reconciler/status.ts";
import type { ReadTxn } from "./statedb/mod.ts";

/** Pops a released ID below `capacity` (dropping larger ones: maps reloaded smaller). */
function popFree(free: number[], capacity: number): number | undefined {
  for (let id = free.pop(); id !== undefined; id = free.pop()) {
    if (id < capacity) return id;
  }
  return undefined;
}

interface FrontendState {
  readonly serviceId: number;
  /** Distinct backend IDs its written Maglev table uses, ascending; null: nothing written yet. */
  readonly backendIds: readonly number[] | null;
}

/** Counters of the BPF reconciler. */
export interface BPFMetrics {
  holdfast_lbmaps_backend_writes_total: number;
  holdfast_lbmaps_backend_deletes_total: number;
  holdfast_lbmaps_maglev_writes_total: number;
  /** Maglev tables copied from the previous build (same backend set and M) instead of built. */
  holdfast_lbmaps_maglev_reused_total: number;
  holdfast_lbmaps_service_writes_total: number;
  holdfast_lbmaps_service_deletes_total: number;
  holdfast_lbmaps_pruned_total: number;
}

/** Options of {@linkcode LBMapsOps}. */
export interface LBMapsOpsOptions {
  /** Maglev builder (default: the TypeScript reference; the policy WASM plugs in here). */
  maglev?: MaglevBuilder;
  /** Maglev table size when a service does not set one (prime; default 16,381, docs/maglev.md). */
  maglevSize?: number;
}

/** Reconciler operations for frontends against the BPF maps. */
export class LBMapsOps implements Operations<Frontend> {
  readonly #tables: LBTables;
  readonly #maps: LBMaps;
  readonly #maglev: MaglevBuilder;
  readonly #defaultM: number;
  #freeServiceIds: number[] = [];
  #nextServiceId = 1;
  /**
   * Backend address (`IP:PORT/PROTO`, the row's own string: no copy kept) → ID; reference
   * counts and "written" flags by ID in typed arrays, so a backend costs one Map entry here.
   */
  readonly #backendIds = new Map<string, number>();
  /** ID → address (sparse). */
  readonly #keyById: (string | undefined)[] = [];
  #refs = new Int32Array(1024);
  #written = new Uint8Array(1024);
  #freeBackendIds: number[] = [];
  #nextBackendId = 1;
  /** Unreferenced backends whose delete failed; retried before every operation. */
  readonly #orphans = new Set<number>();
  /**
   * The last Maglev table written (with its keys, IDs and M): the frontends of one service
   * (several ports or addresses) are reconciled one after the other with the same backend set,
   * so they share one build. One entry only: retained memory stays one table.
   */
  #lastKeys: readonly { key: string; weight: number }[] = [];
  #lastIds: readonly number[] = [];
  #lastM = 0;
  #lastTable: Uint32Array | null = null;
  /** A table buffer nothing holds, handed to the builder as `out` (two buffers alternate). */
  #spare: Uint32Array | null = null;
  /** Frontend address → its service ID and the backend IDs its written table uses. */
  readonly #frontends = new Map<string, FrontendState>();
  readonly metrics: BPFMetrics = {
    holdfast_lbmaps_backend_writes_total: 0,
    holdfast_lbmaps_backend_deletes_total: 0,
    holdfast_lbmaps_maglev_writes_total: 0,
    holdfast_lbmaps_maglev_reused_total: 0,
    holdfast_lbmaps_service_writes_total: 0,
    holdfast_lbmaps_service_deletes_total: 0,
    holdfast_lbmaps_pruned_total: 0,
  };

  constructor(tables: LBTables, maps: LBMaps, options: LBMapsOpsOptions = {}) {
    this.#tables = tables;
    this.#maps = maps;
    this.#maglev = options.maglev ?? new TsMaglevBuilder();
    this.#defaultM = options.maglevSize ?? MAGLEV_M_DEFAULT;
    checkMaglevSize(this.#defaultM);
  }

  /** The service ID of a frontend address, if allocated. */
  serviceId(frontendAddress: string): number | undefined {
    return this.#frontends.get(frontendAddress)?.serviceId;
  }

  /** The backend ID of a backend address (`IP:PORT/PROTO`), if allocated. */
  backendId(address: string): number | undefined {
    return this.#backendIds.get(address);
  }

  /**
   * Restores IDs and reference counts from what the maps already hold (after a restart).
   * Call before starting the reconciler.
   */
  async restore(): Promise<{ services: number; backends: number }> {
    const dump = await this.#maps.dump();
    const entries = new Map(dump.backends);
    const tables = new Map(dump.maglev);
    for (const [id] of dump.backends) {
      this.#grow(id);
      this.#written[id] = 1;
      this.#refs[id] = 0;
      this.#nextBackendId = Math.max(this.#nextBackendId, id + 1);
    }
    const name = (id: number, protocol: string) => {
      const b = entries.get(id)!;
      return `${b.address}:${b.port}/${protocol}`;
    };
    for (const [key, entry] of dump.services) {
      const addr = `${key.address}:${key.port}/${key.protocol}`;
      this.#nextServiceId = Math.max(this.#nextServiceId, entry.serviceId + 1);
      const ids = [...new Set(tables.get(entry.serviceId) ?? [])].filter((id) =>
        id !== 0 && entries.has(id)
      )
        .sort((a, b) => a - b);
      for (const id of ids) {
        this.#refs[id]!++;
        // The maps know backends by IP:PORT; the protocol is the service's.
        if (this.#keyById[id] === undefined) {
          this.#keyById[id] = name(id, key.protocol);
          this.#backendIds.set(this.#keyById[id]!, id);
        }
      }
      this.#frontends.set(addr, { serviceId: entry.serviceId, backendIds: ids });
    }
    for (const [id] of dump.backends) {
      // Unreferenced: kept under an assumed protocol until prune removes it.
      if (this.#keyById[id] === undefined) {
        this.#keyById[id] = name(id, "TCP");
        this.#backendIds.set(this.#keyById[id]!, id);
      }
    }
    // IDs below the high-water mark that nothing holds are free again.
    const usedSvc = new Set([...this.#frontends.values()].map((f) => f.serviceId));
    for (let id = this.#nextServiceId - 1; id >= 1; id--) {
      if (!usedSvc.has(id)) this.#freeServiceIds.push(id);
    }
    const usedBe = new Set(this.#backendIds.values());
    for (let id = this.#nextBackendId - 1; id >= 1; id--) {
      if (!usedBe.has(id)) this.#freeBackendIds.push(id);
    }
    return { services: dump.services.length, backends: dump.backends.length };
  }

  #grow(id: number): void {
    if (id < this.#refs.length) return;
    let n = this.#refs.length;
    while (n <= id) n *= 2;
    const r = new Int32Array(n);
    r.set(this.#refs);
    this.#refs = r;
    const w = new Uint8Array(n);
    w.set(this.#written);
    this.#written = w;
  }

  #serviceState(addr: string): FrontendState {
    const st = this.#frontends.get(addr);
    if (st !== undefined) return st;
    const capacity = this.#maps.capacity.services;
    const id = popFree(this.#freeServiceIds, capacity) ??
      (this.#nextServiceId < capacity ? this.#nextServiceId++ : undefined);
    if (id === undefined) {
      throw new RangeError(
        `Cannot allocate service ID for "${addr}": the datapath holds ${capacity} services ` +
          `(--max-services), IDs 1..${capacity - 1} are in use`,
      );
    }
    const fresh: FrontendState = { serviceId: id, backendIds: null };
    this.#frontends.set(addr, fresh);
    return fresh;
  }

  #backendIdFor(key: string): number {
    let id = this.#backendIds.get(key);
    if (id !== undefined) return id;
    const capacity = this.#maps.capacity.backends;
    id = popFree(this.#freeBackendIds, capacity) ??
      (this.#nextBackendId < capacity ? this.#nextBackendId++ : undefined);
    if (id === undefined) {
      throw new RangeError(
        `Cannot allocate backend ID for "${key}": the datapath holds ${capacity} backends ` +
          `(--max-backends), IDs 1..${capacity - 1} are in use`,
      );
    }
    this.#grow(id);
    this.#refs[id] = 0;
    this.#written[id] = 0;
    this.#backendIds.set(key, id);
    this.#keyById[id] = key;
    return id;
  }

  async #flushOrphans(): Promise<void> {
    if (this.#orphans.size === 0) return;
    for (const id of [...this.#orphans]) {
      if (this.#refs[id] !== 0) {
        this.#orphans.delete(id);
        continue;
      }
      if (this.#written[id] !== 0) {
        await this.#maps.deleteBackend(id);
        this.metrics.holdfast_lbmaps_backend_deletes_total++;
      }
      this.#orphans.delete(id);
      this.#freeBackend(id);
    }
  }

  #freeBackend(id: number): void {
    if (this.#refs[id] !== 0) return;
    const k = this.#keyById[id];
    if (k !== undefined && this.#backendIds.get(k) === id) this.#backendIds.delete(k);
    this.#keyById[id] = undefined;
    this.#written[id] = 0;
    this.#freeBackendIds.push(id);
  }

  #release(old: readonly number[], keep: ReadonlySet<number> | null): void {
    for (const id of old) {
      if (keep !== null && keep.has(id)) continue;
      if (--this.#refs[id]! === 0) this.#orphans.add(id);
    }
  }

  /**
   * The previous frontend's ID table if it was built from the same keys, weights, IDs and M
   * (never mutated after it was written, so it can be written again as it is).
   */
  #reuseMaglev(
    keys: readonly { key: string; weight: number }[],
    ids: readonly number[],
    m: number,
  ): Uint32Array | null {
    const last = this.#lastKeys, lastIds = this.#lastIds;
    if (this.#lastTable === null || m !== this.#lastM || keys.length !== last.length) return null;
    for (let i = 0; i < keys.length; i++) {
      if (
        keys[i]!.key !== last[i]!.key || keys[i]!.weight !== last[i]!.weight ||
        ids[i] !== lastIds[i]
      ) return null;
    }
    this.metrics.holdfast_lbmaps_maglev_reused_total++;
    return this.#lastTable;
  }

  /** Writes backends → Maglev table → service entry for `fe`. */
  async update(txn: ReadTxn, fe: Frontend): Promise<void> {
    if (this.#orphans.size > 0) await this.#flushOrphans();
    const svc = this.#tables.services.get(txn, serviceByName(fe.serviceName));
    if (svc === undefined) {
      throw new Error(
        `Cannot reconcile frontend "${fe.address}": service "${fe.serviceName}" is not in the table`,
      );
    }
    const addr = parseAddr(fe.address);
    const selected = selectBackends(txn, this.#tables, fe);
    const m = svc.maglevSize || this.#defaultM;
    const prev = this.#serviceState(fe.address);
    const serviceId = prev.serviceId;
    let n = selected.length;
    const ids = new Array<number>(n);
    const keys = new Array<{ key: string; weight: number }>(n);
    let j = 0;
    try {
      for (let i = 0; i < n; i++) {
        const b = selected[i]!;
        // Maglev keys are IP:PORT (the maps' identity of a backend, the same on every node).
        const key = hostPort(b.address);
        // A TCP and a UDP backend on the same pair (adjacent: selection is sorted) share a slot.
        if (j > 0 && keys[j - 1]!.key === key) {
          keys[j - 1] = { key, weight: Math.max(keys[j - 1]!.weight, b.weight) };
          continue;
        }
        ids[j] = this.#backendIdFor(b.address);
        keys[j++] = { key, weight: b.weight };
      }
    } catch (e) {
      // Out of backend IDs: the ones just allocated (nothing holds or wrote them) go back.
      for (let k = 0; k < j; k++) {
        if (this.#refs[ids[k]!] === 0 && this.#written[ids[k]!] === 0) this.#freeBackend(ids[k]!);
      }
      throw e;
    }
    n = ids.length = keys.length = j;
    // References first: from here until the update succeeds this frontend holds old ∪ new, so
    // nothing it wrote or may still name is deleted under it, whatever step fails. The Maglev
    // table is live as soon as it is written (the service entry only names its ID), so the
    // old-only backends are released right after that write.
    const now = ids.slice().sort((a, b) => a - b);
    const before = prev.backendIds ?? [];
    const oldOnly: number[] = [], union: number[] = [];
    {
      let a = 0, b = 0;
      while (a < now.length || b < before.length) {
        const x = now[a], y = before[b];
        if (y === undefined || (x !== undefined && x < y)) {
          this.#refs[x!]!++;
          union.push(x!);
          a++;
        } else if (x === undefined || y < x) {
          oldOnly.push(y);
          union.push(y);
          b++;
        } else {
          union.push(x);
          a++;
          b++;
        }
      }
    }
    this.#frontends.set(fe.address, { serviceId, backendIds: union });
    let writes: Promise<void>[] | null = null, writeIds: number[] | null = null;
    for (let i = 0; i < n; i++) {
      const id = ids[i]!;
      if (this.#written[id] !== 0) continue;
      // Backends are independent of each other: issue them together, then wait for all of
      // them, and only then write the table that names them.
      const key = keys[i]!.key, colon = key.lastIndexOf(":");
      (writes ??= []).push(
        this.#maps.updateBackend(id, {
          address: key.slice(0, colon),
          port: Number(key.slice(colon + 1)),
        }),
      );
      (writeIds ??= []).push(id);
    }
    if (writes !== null) {
      // Each write that lands is marked written, whether or not another one failed.
      let failure: unknown = undefined, failed = false;
      for (let i = 0; i < writes.length; i++) {
        try {
          await writes[i];
          this.#written[writeIds![i]!] = 1;
          this.metrics.holdfast_lbmaps_backend_writes_total++;
        } catch (e) {
          if (!failed) failure = e;
          failed = true;
        }
      }
      if (failed) throw failure;
    }
    let table = this.#reuseMaglev(keys, ids, m);
    if (table === null) {
      const spare = this.#spare !== null && this.#spare.length === m ? this.#spare : undefined;
      try {
        table = this.#maglev.build(keys, m, spare);
      } catch (e) {
        throw new Error(
          `Cannot reconcile frontend "${fe.address}" of service "${svc.name}": ${
            (e as Error).message
          }`,
          { cause: e },
        );
      }
      if (table.length !== m) {
        throw new Error(
          `Maglev builder returned ${table.length} slots for "${fe.address}", expected ${m}`,
        );
      }
      for (let s = 0; s < m; s++) {
        const v = table[s]!;
        if (v !== 0) table[s] = ids[v - 1]!;
      }
      // The maps copy a table when it is written, so the previous one is free again.
      if (table === spare || this.#spare === null) this.#spare = this.#lastTable;
      this.#lastTable = table;
      this.#lastKeys = keys;
      this.#lastIds = ids;
      this.#lastM = m;
    }
    await this.#maps.updateMaglev(serviceId, table);
    this.metrics.holdfast_lbmaps_maglev_writes_total++;
    this.#release(oldOnly, null);
    this.#frontends.set(fe.address, { serviceId, backendIds: now });
    const key: ServiceKey = { address: addr.ip, port: addr.port, protocol: addr.protocol };
    await this.#maps.updateService(key, {
      serviceId,
      backendCount: n,
      flowKeyMode: svc.flowKeyMode,
      maglevSize: m,
    });
    this.metrics.holdfast_lbmaps_service_writes_total++;
    if (this.#orphans.size > 0) await this.#flushOrphans();
  }

  /** Deletes service entry → Maglev table → unreferenced backends of `fe`. */
  async delete(_txn: ReadTxn, fe: Frontend): Promise<void> {
    await this.#flushOrphans();
    const addr = parseAddr(fe.address);
    await this.#maps.deleteService({ address: addr.ip, port: addr.port, protocol: addr.protocol });
    this.metrics.holdfast_lbmaps_service_deletes_total++;
    const st = this.#frontends.get(fe.address);
    if (st !== undefined) await this.#maps.deleteMaglev(st.serviceId);
    this.#frontends.delete(fe.address);
    if (st !== undefined) {
      this.#freeServiceIds.push(st.serviceId);
      if (st.backendIds !== null) this.#release(st.backendIds, null);
    }
    await this.#flushOrphans();
  }

  /** Removes from the maps every service, table and backend that no frontend accounts for. */
  async prune(_txn: ReadTxn, rows: readonly Frontend[]): Promise<void> {
    await this.#flushOrphans();
    const wanted = new Set(rows.map((r) => r.address));
    // Frontends we hold state for that are gone from the table (e.g. removed while stopped).
    for (const [addr] of [...this.#frontends]) {
      if (!wanted.has(addr)) {
        await this.delete(_txn, {
          address: addr,
          serviceName: "",
          portName: "",
          redirectTo: null,
          status: pendingStatus(0),
        });
        this.metrics.holdfast_lbmaps_pruned_total++;
      }
    }
    const dump = await this.#maps.dump();
    const liveServiceIds = new Set([...this.#frontends.values()].map((f) => f.serviceId));
    for (const [k, e] of dump.services) {
      const addr = `${k.address}:${k.port}/${k.protocol}`;
      if (!wanted.has(addr) || this.#frontends.get(addr)?.serviceId !== e.serviceId) {
        await this.#maps.deleteService(k);
        this.metrics.holdfast_lbmaps_pruned_total++;
      }
    }
    for (const [sid] of dump.maglev) {
      if (!liveServiceIds.has(sid)) {
        await this.#maps.deleteMaglev(sid);
        this.metrics.holdfast_lbmaps_pruned_total++;
      }
    }
    const known = new Set(this.#backendIds.values());
    for (const [id] of dump.backends) {
      if (!known.has(id) || this.#refs[id] === 0) {
        await this.#maps.deleteBackend(id);
        this.metrics.holdfast_lbmaps_pruned_total++;
        if (known.has(id)) this.#freeBackend(id);
      }
    }
  }

  /**
   * The full pass's check: compares the maps with what was written for `rows` (done frontends)
   * and returns those whose service entry, Maglev table or backends are missing or differ —
   * deleted or changed behind the reconciler's back. Lost backends are marked unwritten, so the
   * `update` that follows writes them again (see `_lbmaps_verify.ts` for what is compared).
   */
  async verify(txn: ReadTxn, rows: readonly Frontend[]): Promise<Repair<Frontend>[]> {
    if (this.#orphans.size > 0) await this.#flushOrphans();
    const dump = await this.#maps.dump();
    const services = new Map<string, ServiceEntry>();
    for (const [k, e] of dump.services) services.set(`${k.address}:${k.port}/${k.protocol}`, e);
    const tables = new Map(dump.maglev);
    const backends = new Map(dump.backends);
    const lost = new Set<number>();
    for (const [key, id] of this.#backendIds) {
      if (this.#written[id] === 0) continue;
      const b = backends.get(id);
      if (b === undefined || `${b.address}:${b.port}` !== hostPort(key)) {
        this.#written[id] = 0;
        lost.add(id);
      }
    }
    const repairs: Repair<Frontend>[] = [];
    const scratch = new Uint8Array(this.#refs.length);
    for (const fe of rows) {
      const st = this.#frontends.get(fe.address);
      if (st === undefined || st.backendIds === null) continue;
      const svc = this.#tables.services.get(txn, serviceByName(fe.serviceName));
      const want = {
        serviceId: st.serviceId,
        backendIds: st.backendIds,
        maglevSize: svc?.maglevSize || this.#defaultM,
        flowKeyMode: svc?.flowKeyMode,
      };
      const entry = services.get(fe.address), table = tables.get(st.serviceId);
      const reason = frontendDiffers(want, entry, table, lost, scratch);
      if (reason !== null) repairs.push({ row: fe, reason });
    }
    return repairs;
  }
}
