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

import { isIp6, parseAddr, splitHostPort } from "../tables/address.ts";
import type { Frontend } from "../tables/frontend.ts";
import { selectBackends } from "../tables/select.ts";
import { serviceByName } from "../tables/service.ts";
import type { LBTables } from "../tables/tables.ts";
import { BackendRefs, frontendAddress, type FrontendState, IdPool } from "./_ids.ts";
import { restoredFrontends } from "./_ids.ts";
import { MaglevTables } from "./_maglev.ts";
import { aheadJobs, maglevSelection } from "./_select.ts";
import { type BPFMetrics, bpfMetrics, type LBMapsOpsOptions } from "./_options.ts";
import { type StagedInstall, StagedInstalls } from "./_staged.ts";
import { frontendDiffers, writtenFrontend } from "./_verify.ts";
import type { LBMaps, LBMapsContents, ServiceEntry } from "./lbmaps.ts";
import { MAGLEV_M_DEFAULT } from "../../../policy-as/host/abi.ts";
import { checkMaglevSize, type MaglevBackend } from "../../../policy-as/host/maglev_input.ts";
import { TsMaglevBuilder } from "../../../policy-as/host/maglev_ts.ts";
import type { BatchFailure, Operations, Repair } from "../reconciler/mod.ts";
import { pendingStatus } from "../reconciler/status.ts";
import type { ReadTxn } from "../../../lib/statedb/mod.ts";

export type { BPFMetrics, LBMapsOpsOptions } from "./_options.ts";

/** Reconciler operations for frontends against the BPF maps. */
export class LBMapsOps implements Operations<Frontend> {
  readonly #tables: LBTables;
  readonly #maps: LBMaps;
  readonly #maglev: MaglevTables;
  readonly #defaultM: number;
  readonly #serviceIds = new IdPool("service");
  readonly #backends = new BackendRefs();
  /** Frontend address → its service ID and the backend IDs its written table uses. */
  readonly #frontends = new Map<string, FrontendState>();
  /** Frontends whose Maglev table the next full pass rebuilds (`rebuildMaglevTables`). */
  #rebuild = new Set<string>();
  readonly #staged: StagedInstalls;
  /** The dump of the prune that just ran, if it changed nothing (verify's, unless it needs slots). */
  #pruneDump: LBMapsContents | null = null;
  readonly #readAllEvery: number;
  /** Prunes since the last one that read every backend ID (the first one does). */
  #prunesSinceReadAll = Infinity;
  readonly metrics: BPFMetrics = bpfMetrics();

  constructor(tables: LBTables, maps: LBMaps, options: LBMapsOpsOptions = {}) {
    this.#tables = tables;
    this.#maps = maps;
    this.#maglev = new MaglevTables(options.maglev ?? new TsMaglevBuilder(), options.maglevWorkers);
    this.#defaultM = options.maglevSize ?? MAGLEV_M_DEFAULT;
    this.#readAllEvery = Math.max(1, options.readAllBackendIdsEvery ?? 10);
    checkMaglevSize(this.#defaultM);
    const install = (st: StagedInstall) => {
      this.metrics.holdfast_lbmaps_maglev_writes_total++;
      return this.#installed(st);
    };
    this.#staged = new StagedInstalls(maps, options.maxStaged ?? 1024, install);
  }

  /** Starts a batch: updates stage their tables until `endBatch` (`maps/_staged.ts`). */
  beginBatch(): void {
    this.#staged.begin();
  }

  /** Installs the staged tables, then their service entries; returns the frontends failed. */
  async endBatch(): Promise<BatchFailure<Frontend>[]> {
    this.#maglev.endAhead();
    const failures = await this.#staged.end();
    if (this.#backends.hasOrphans) await this.#flushOrphans().catch(() => {}); // next flush
    return failures;
  }

  /** After `st`'s table is in: the old-only backends go, then the service entry names the table. */
  async #installed(st: StagedInstall): Promise<void> {
    this.#backends.release(st.oldOnly);
    const { serviceId, now, digest } = st;
    this.#frontends.set(st.row.address, { serviceId, backendIds: now, digest });
    await this.#maps.updateService(st.key, st.entry);
    this.metrics.holdfast_lbmaps_service_writes_total++;
  }

  /** Stops the Maglev workers kept between large rebuilds (`maps/_maglev.ts`); idempotent. */
  close(): void {
    this.#maglev.close();
  }

  /** The service ID of a frontend address, if allocated. */
  serviceId(frontendAddress: string): number | undefined {
    return this.#frontends.get(frontendAddress)?.serviceId;
  }

  /** The backend ID of a backend address (`IP:PORT/PROTO`), if allocated. */
  backendId(address: string): number | undefined {
    return this.#backends.id(address);
  }

  /**
   * After the Maglev builder changed (a new policy module): forgets the cached table and makes
   * the next full pass (`reconciler.triggerFullReconcile()`) rebuild every frontend's table,
   * each replaced in one map update. Returns how many frontends it marked.
   */
  rebuildMaglevTables(): number {
    this.#maglev.invalidate();
    this.#rebuild = new Set(this.#frontends.keys());
    return this.#rebuild.size;
  }

  /**
   * Restores IDs and reference counts from what the maps already hold (after a restart).
   * Call before starting the reconciler.
   */
  async restore(): Promise<{ services: number; backends: number }> {
    const dump = await this.#maps.dump();
    const restored = restoredFrontends(dump);
    this.#backends.restore(dump.backends, restored);
    for (const { address, serviceId, backendIds } of restored) {
      this.#frontends.set(address, { serviceId, backendIds, digest: null });
    }
    this.#serviceIds.restore(new Set(restored.map((f) => f.serviceId)));
    return { services: dump.services.length, backends: dump.backends.length };
  }

  #serviceState(addr: string): FrontendState {
    const st = this.#frontends.get(addr);
    if (st !== undefined) return st;
    const serviceId = this.#serviceIds.take(addr, this.#maps.capacity.services);
    const fresh: FrontendState = { serviceId, backendIds: null, digest: null };
    this.#frontends.set(addr, fresh);
    return fresh;
  }

  #flushOrphans(): Promise<void> {
    return this.#backends.flushOrphans(async (id) => {
      await this.#maps.deleteBackend(id);
      this.metrics.holdfast_lbmaps_backend_deletes_total++;
    });
  }

  /**
   * The backend IDs and Maglev keys of `fe`'s selection (IDs allocated as needed; on failure
   * the ones just allocated are given back).
   */
  #selection(txn: ReadTxn, fe: Frontend, v6: boolean): { ids: number[]; keys: MaglevBackend[] } {
    const { keys, addresses } = maglevSelection(selectBackends(txn, this.#tables, fe));
    // An IPv4 client's flow holds a 4-byte backend (docs/contracts.md "IPv6"): refused whole.
    const v6Backend = v6 ? undefined : addresses.find((a) => a.startsWith("["));
    if (v6Backend !== undefined) {
      throw new Error(
        `Cannot reconcile IPv4 frontend "${fe.address}": backend "${v6Backend}" is IPv6 ` +
          `(an IPv4 frontend needs IPv4 backends; give the service an IPv6 frontend for them)`,
      );
    }
    const capacity = this.#maps.capacity.backends;
    const ids = new Array<number>(addresses.length);
    let n = 0;
    try {
      for (; n < addresses.length; n++) ids[n] = this.#backends.acquire(addresses[n]!, capacity);
    } catch (e) {
      // Out of backend IDs: the ones just allocated (nothing holds or wrote them) go back.
      this.#backends.discard(ids.slice(0, n));
      throw e;
    }
    return { ids, keys };
  }

  /**
   * Writes the backends of `ids` not written yet: all issued together, then awaited. Null when
   * every one is written already (nothing to wait for: no promise, no turn of the event loop).
   */
  #writeBackends(ids: readonly number[], keys: readonly MaglevBackend[]): Promise<void> | null {
    let writes: Promise<void>[] | null = null, writeIds: number[] | null = null;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (this.#backends.isWritten(id)) continue;
      const { ip, port } = splitHostPort(keys[i]!.key);
      (writes ??= []).push(this.#maps.updateBackend(id, { address: ip, port }));
      (writeIds ??= []).push(id);
    }
    return writes === null ? null : this.#awaitBackendWrites(writes, writeIds!);
  }

  async #awaitBackendWrites(writes: Promise<void>[], writeIds: number[]): Promise<void> {
    // Each write that lands is marked written, whether or not another one failed.
    let failure: unknown = undefined, failed = false;
    for (let i = 0; i < writes.length; i++) {
      try {
        await writes[i];
        this.#backends.markWritten(writeIds[i]!);
        this.metrics.holdfast_lbmaps_backend_writes_total++;
      } catch (e) {
        if (!failed) failure = e;
        failed = true;
      }
    }
    if (failed) throw failure;
  }

  /** Writes backends → Maglev table → service entry for `fe` (a batch stages from the table). */
  async update(txn: ReadTxn, fe: Frontend): Promise<void> {
    this.#pruneDump = null;
    if (this.#staged.has(fe.address)) await this.#staged.commit(); // its staged one goes first
    if (this.#backends.hasOrphans) await this.#flushOrphans();
    const svc = this.#tables.services.get(txn, serviceByName(fe.serviceName));
    if (svc === undefined) {
      throw new Error(
        `Cannot reconcile frontend "${fe.address}": service "${fe.serviceName}" is not in the table`,
      );
    }
    const addr = parseAddr(fe.address);
    const m = svc.maglevSize || this.#defaultM;
    const prev = this.#serviceState(fe.address);
    const serviceId = prev.serviceId;
    const { ids, keys } = this.#selection(txn, fe, isIp6(addr.ip));
    // References first: from here until the update succeeds this frontend holds old ∪ new, so
    // nothing it wrote or may still name is deleted under it, whatever step fails. The Maglev
    // table is live as soon as it is written (the service entry only names its ID; staged in a
    // batch: once committed), so the old-only backends are released right after that write.
    const now = ids.slice().sort((a, b) => a - b);
    const { oldOnly, union } = this.#backends.hold(now, prev.backendIds ?? []);
    // The installed table is in flux until the write succeeds (then `#installed` sets it).
    this.#frontends.set(fe.address, { serviceId, backendIds: union, digest: null });
    // Backends are independent of each other; the table that names them comes after all of them.
    const written = this.#writeBackends(ids, keys);
    if (written !== null) await written;
    let built;
    try {
      const b = this.#maglev.tableFor(fe.address, keys, ids, m);
      built = b instanceof Promise ? await b : b;
    } catch (e) {
      throw new Error(
        `Cannot reconcile frontend "${fe.address}" of service "${svc.name}": ${
          (e as Error).message
        }`,
        { cause: e },
      );
    }
    if (built.reused) this.metrics.holdfast_lbmaps_maglev_reused_total++;
    if (built.ahead) this.metrics.holdfast_lbmaps_maglev_built_ahead_total++;
    const key = { address: addr.ip, port: addr.port, protocol: addr.protocol };
    const entry = {
      serviceId,
      backendCount: ids.length,
      flowKeyMode: svc.flowKeyMode,
      maglevSize: m,
      ...(svc.draining ? { draining: true } : {}),
    };
    const digest = built.digest;
    const st: StagedInstall = { row: fe, serviceId, oldOnly, now, key, entry, digest };
    if (digest === prev.digest) {
      this.metrics.holdfast_lbmaps_maglev_unchanged_total++; // the installed one is this table
    } else if (this.#staged.batching) return await this.#staged.stage(st, built.table);
    else {
      await this.#maps.updateMaglev(serviceId, built.table);
      this.metrics.holdfast_lbmaps_maglev_writes_total++;
    }
    await this.#installed(st);
    if (this.#backends.hasOrphans) await this.#flushOrphans();
  }

  /** Deletes service entry → Maglev table → unreferenced backends of `fe`. */
  async delete(_txn: ReadTxn, fe: Frontend): Promise<void> {
    this.#pruneDump = null;
    if (this.#staged.has(fe.address)) await this.#staged.commit();
    await this.#flushOrphans();
    const addr = parseAddr(fe.address);
    await this.#maps.deleteService({ address: addr.ip, port: addr.port, protocol: addr.protocol });
    this.metrics.holdfast_lbmaps_service_deletes_total++;
    const st = this.#frontends.get(fe.address);
    if (st !== undefined) await this.#maps.deleteMaglev(st.serviceId);
    this.#frontends.delete(fe.address);
    if (st !== undefined) {
      this.#serviceIds.give(st.serviceId);
      if (st.backendIds !== null) this.#backends.release(st.backendIds);
    }
    await this.#flushOrphans();
  }

  /** Removes from the maps every service, table and backend that no frontend accounts for. */
  async prune(_txn: ReadTxn, rows: readonly Frontend[]): Promise<void> {
    await this.#staged.commit(); // what it reads back must include the staged tables
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
    // Which tables exist, not their slots. Only the backend IDs ever allocated are read, except
    // on every Nth pass (`readAllBackendIdsEvery`; never inside a swap, which rebuilds every
    // table): a stray entry above them names nothing and waits for that pass. Reading all
    // 65,536 of both families cost every agent ~20 ms of CPU per periodic pass.
    const readAll = this.#rebuild.size === 0 && this.#prunesSinceReadAll >= this.#readAllEvery;
    this.#prunesSinceReadAll = readAll ? 1 : this.#prunesSinceReadAll + 1;
    const below = readAll ? undefined : this.#backends.idLimit;
    const dump = await this.#maps.dump({ tables: false, backendIdsBelow: below });
    const pruned = this.metrics.holdfast_lbmaps_pruned_total;
    const liveServiceIds = new Set([...this.#frontends.values()].map((f) => f.serviceId));
    for (const [k, e] of dump.services) {
      const addr = frontendAddress(k);
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
    const known = this.#backends.knownIds();
    for (const [id] of dump.backends) {
      if (!known.has(id) || !this.#backends.isReferenced(id)) {
        await this.#maps.deleteBackend(id);
        this.metrics.holdfast_lbmaps_pruned_total++;
        if (known.has(id)) this.#backends.free(id);
      }
    }
    // Nothing removed: what verify reads next, if it needs no table slots, is this again.
    this.#pruneDump = this.metrics.holdfast_lbmaps_pruned_total === pruned ? dump : null;
  }

  /**
   * The full pass's check: compares the maps with what was written for `rows` (done frontends)
   * and returns those whose service entry, Maglev table or backends are missing or differ —
   * deleted or changed behind the reconciler's back. Lost backends are marked unwritten, so the
   * `update` that follows writes them again (see `maps/_verify.ts` for what is compared).
   * Reads nothing when no row is done yet, and no table when every row's is rebuilt anyway.
   */
  async verify(txn: ReadTxn, rows: readonly Frontend[]): Promise<Repair<Frontend>[]> {
    const rebuild = this.#rebuild, pruned = this.#pruneDump;
    this.#rebuild = new Set();
    this.#pruneDump = null;
    await this.#staged.commit();
    const orphans = this.#backends.hasOrphans;
    if (orphans) await this.#flushOrphans();
    // Nothing done to compare (the pass right after a cold start: its rows are still pending).
    if (rows.length === 0) return [];
    // A policy swap rebuilds every table: reading them all first (~2 ms each) would be waste.
    const tables = rows.some((fe) => !rebuild.has(fe.address));
    // Only the IDs ever allocated matter here (what `lost` compares); the prune before it read
    // every ID (in a periodic pass, all 65,536 of each family: ~20 ms a dump).
    const dump = !tables && !orphans && pruned
      ? pruned
      : await this.#maps.dump({ tables, backendIdsBelow: this.#backends.idLimit });
    const services = new Map<string, ServiceEntry>();
    for (const [k, e] of dump.services) services.set(frontendAddress(k), e);
    const installed = new Map(dump.maglev);
    const lost = this.#backends.forgetLost(new Map(dump.backends));
    const repairs: Repair<Frontend>[] = [];
    const scratch = new Uint8Array(this.#backends.slots);
    for (const fe of rows) {
      const st = this.#frontends.get(fe.address);
      if (st === undefined || st.backendIds === null) continue;
      const svc = this.#tables.services.get(txn, serviceByName(fe.serviceName));
      const want = writtenFrontend(st.serviceId, st.backendIds, svc, this.#defaultM);
      const entry = services.get(fe.address), table = installed.get(st.serviceId);
      const reason = rebuild.has(fe.address)
        ? "Maglev builder changed (policy module)"
        : frontendDiffers(want, entry, table, lost, scratch);
      if (reason === null) continue;
      repairs.push({ row: fe, reason });
      // Its table differs or is gone: the update must write it even if it builds the same one.
      if (!rebuild.has(fe.address) || table === undefined) {
        this.#frontends.set(fe.address, { ...st, digest: null });
      }
    }
    if (rebuild.size > 0) {
      const idOf = (address: string) => this.#backends.id(address);
      this.#maglev.buildAhead(aheadJobs(txn, this.#tables, repairs, idOf, this.#defaultM));
    }
    return repairs;
  }
}
