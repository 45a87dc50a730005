/**
 * The BPF reconciler's ID bookkeeping: service and backend IDs allocated within the maps'
 * capacity (free lists, restored from a `dump()` after a restart), and the reference counts of
 * backends shared by several frontends, with the "written" flag of each.
 *
 * @module
 */

import { hostPort, joinHostPort } from "../tables/address.ts";
import type { BackendEntry, LBMapsContents, ServiceKey } from "./lbmaps.ts";

/** `IP:PORT/PROTO` of a services-map key: the frontend address rows use. */
export function frontendAddress(key: ServiceKey): string {
  return `${joinHostPort(key.address, key.port)}/${key.protocol}`;
}

/**
 * The frontends a `dump()` holds, each with its service ID and the distinct backend IDs its Maglev
 * table names that the backends map holds (ascending): what `LBMapsOps.restore` starts from.
 */
export function restoredFrontends(
  dump: LBMapsContents,
): Array<RestoredFrontend & { address: string; serviceId: number }> {
  const present = new Set(dump.backends.map(([id]) => id));
  const tables = new Map(dump.maglev);
  return dump.services.map(([key, entry]) => ({
    address: frontendAddress(key),
    protocol: key.protocol,
    serviceId: entry.serviceId,
    backendIds: [...new Set(tables.get(entry.serviceId) ?? [])]
      .filter((id) => id !== 0 && present.has(id))
      .sort((a, b) => a - b),
  }));
}

/** IDs 1..capacity-1 of one kind, lowest released ID reused first. */
export class IdPool {
  readonly #kind: "service" | "backend";
  #free: number[] = [];
  #next = 1;

  constructor(kind: "service" | "backend") {
    this.#kind = kind;
  }

  /** A free ID below `capacity`; throws a RangeError naming `owner` and the limit if none. */
  take(owner: string, capacity: number): number {
    // Released IDs at or above capacity are dropped: the maps were reloaded smaller.
    for (let id = this.#free.pop(); id !== undefined; id = this.#free.pop()) {
      if (id < capacity) return id;
    }
    if (this.#next < capacity) return this.#next++;
    const kind = this.#kind;
    throw new RangeError(
      `Cannot allocate ${kind} ID for "${owner}": the datapath holds ${capacity} ${kind}s ` +
        `(--max-${kind}s), IDs 1..${capacity - 1} are in use`,
    );
  }

  /** Every ID taken (or restored from the maps) so far is below this. */
  get limit(): number {
    return this.#next;
  }

  /** Gives back an ID nothing holds any more. */
  give(id: number): void {
    this.#free.push(id);
  }

  /** Resets to the IDs found in the maps: those below the highest one that are not used are free. */
  restore(used: ReadonlySet<number>): void {
    let highest = 0;
    for (const id of used) highest = Math.max(highest, id);
    this.#next = highest + 1;
    this.#free = [];
    for (let id = this.#next - 1; id >= 1; id--) {
      if (!used.has(id)) this.#free.push(id);
    }
  }
}

/** A restored frontend: what the maps name for it. */
export interface RestoredFrontend {
  readonly protocol: string;
  /** Distinct backend IDs its Maglev table names (present in the backends map), ascending. */
  readonly backendIds: readonly number[];
}

/**
 * Backends by address (`IP:PORT/PROTO`, the row's own string: no copy kept) with their IDs;
 * reference counts and "written" flags by ID in typed arrays, so a backend costs one Map entry.
 * An unreferenced backend becomes an orphan until its delete from the maps succeeds.
 */
export class BackendRefs {
  readonly #pool = new IdPool("backend");
  readonly #ids = new Map<string, number>();
  /** ID → address (sparse). */
  readonly #keyById: (string | undefined)[] = [];
  #refs = new Int32Array(1024);
  #written = new Uint8Array(1024);
  /** Unreferenced backends whose delete failed or is due. */
  readonly #orphans = new Set<number>();

  /** The ID of a backend address, if allocated. */
  id(key: string): number | undefined {
    return this.#ids.get(key);
  }

  /** Every known backend as address and ID. */
  entries(): IterableIterator<[string, number]> {
    return this.#ids.entries();
  }

  /** The IDs of every known backend. */
  knownIds(): Set<number> {
    return new Set(this.#ids.values());
  }

  /** Every backend ID allocated, written or restored so far is below this. */
  get idLimit(): number {
    return this.#pool.limit;
  }

  /** One more than the highest ID slot in use (the size of a scratch array indexed by ID). */
  get slots(): number {
    return this.#refs.length;
  }

  /** The ID of `key`, allocating one (unreferenced, unwritten) below `capacity` if it has none. */
  acquire(key: string, capacity: number): number {
    let id = this.#ids.get(key);
    if (id !== undefined) return id;
    id = this.#pool.take(key, capacity);
    this.#grow(id);
    this.#refs[id] = 0;
    this.#written[id] = 0;
    this.#ids.set(key, id);
    this.#keyById[id] = key;
    return id;
  }

  /** Gives back those of `ids` that nothing holds or wrote (allocated by a failed update). */
  discard(ids: readonly number[]): void {
    for (const id of ids) {
      if (this.#refs[id] === 0 && this.#written[id] === 0) this.free(id);
    }
  }

  isWritten(id: number): boolean {
    return this.#written[id] !== 0;
  }

  markWritten(id: number): void {
    this.#written[id] = 1;
  }

  isReferenced(id: number): boolean {
    return this.#refs[id] !== 0;
  }

  /**
   * Takes a reference on each of `now` (ascending) not in `before` (ascending) and returns the
   * IDs only `before` has and the union of both, ascending.
   */
  hold(
    now: readonly number[],
    before: readonly number[],
  ): { oldOnly: number[]; union: number[] } {
    const oldOnly: number[] = [], union: number[] = [];
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
    return { oldOnly, union };
  }

  /** Drops a reference on each of `ids`; those left unreferenced become orphans. */
  release(ids: readonly number[]): void {
    for (const id of ids) {
      if (--this.#refs[id]! === 0) this.#orphans.add(id);
    }
  }

  get hasOrphans(): boolean {
    return this.#orphans.size > 0;
  }

  /**
   * Deletes (through `deleteBackend`) and frees every orphan still unreferenced; one whose delete
   * throws stays an orphan, and the error propagates.
   */
  async flushOrphans(deleteBackend: (id: number) => Promise<void>): Promise<void> {
    if (this.#orphans.size === 0) return;
    for (const id of [...this.#orphans]) {
      if (this.#refs[id] !== 0) {
        this.#orphans.delete(id);
        continue;
      }
      if (this.#written[id] !== 0) await deleteBackend(id);
      this.#orphans.delete(id);
      this.free(id);
    }
  }

  /** Forgets an unreferenced backend and gives its ID back (no-op if referenced). */
  free(id: number): void {
    if (this.#refs[id] !== 0) return;
    const k = this.#keyById[id];
    if (k !== undefined && this.#ids.get(k) === id) this.#ids.delete(k);
    this.#keyById[id] = undefined;
    this.#written[id] = 0;
    this.#pool.give(id);
  }

  /**
   * Marks unwritten every written backend the maps (`found`, by ID) no longer hold as written
   * (missing, or another address); returns their IDs.
   */
  forgetLost(found: ReadonlyMap<number, BackendEntry>): Set<number> {
    const lost = new Set<number>();
    for (const [key, id] of this.#ids) {
      if (this.#written[id] === 0) continue;
      const b = found.get(id);
      if (b === undefined || joinHostPort(b.address, b.port) !== hostPort(key)) {
        this.#written[id] = 0;
        lost.add(id);
      }
    }
    return lost;
  }

  /**
   * Restores from the maps' backends (all written) and the frontends naming them (one reference
   * each). Call on a fresh instance.
   */
  restore(
    entries: ReadonlyArray<readonly [number, BackendEntry]>,
    frontends: Iterable<RestoredFrontend>,
  ): void {
    const byId = new Map(entries);
    // The maps know backends by IP:PORT; the protocol is that of the first service naming it.
    const name = (id: number, protocol: string) => {
      if (this.#keyById[id] !== undefined) return;
      const b = byId.get(id)!;
      this.#keyById[id] = `${joinHostPort(b.address, b.port)}/${protocol}`;
      this.#ids.set(this.#keyById[id]!, id);
    };
    for (const [id] of entries) {
      this.#grow(id);
      this.#written[id] = 1;
      this.#refs[id] = 0;
    }
    for (const fe of frontends) {
      for (const id of fe.backendIds) {
        this.#refs[id]!++;
        name(id, fe.protocol);
      }
    }
    // Unreferenced: kept under an assumed protocol until prune removes it.
    for (const [id] of entries) name(id, "TCP");
    this.#pool.restore(new Set(byId.keys()));
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
}

/** What the reconciler holds for one frontend it wrote. */
export interface FrontendState {
  readonly serviceId: number;
  /** Distinct backend IDs its written Maglev table uses, ascending; null: nothing written yet. */
  readonly backendIds: readonly number[] | null;
  /** `tableDigest` of its installed table; null: not known (write the next one whatever it is). */
  readonly digest: number | null;
}
