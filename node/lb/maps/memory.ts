/**
 * In-memory {@linkcode LBMaps} for unit tests, script tests and benchmarks, plus a wrapper that
 * injects faults. The real maps are `node/bpf/lbmaps_bpf.ts`.
 *
 * The memory maps also check the datapath's ordering invariant on every call: a service entry
 * must name a Maglev table that exists and whose backend IDs all exist; a backend still named
 * by a table must not be deleted. Breaches are recorded in `violations`.
 *
 * @module
 */

import type {
  BackendEntry,
  DumpOptions,
  LBMaps,
  LBMapsCapacity,
  LBMapsContents,
  ServiceEntry,
  ServiceKey,
} from "./lbmaps.ts";

/** Capacity of memory maps unless one is given: an ID space no test exhausts (2^24). */
const UNBOUNDED: LBMapsCapacity = { services: 1 << 24, backends: 1 << 24 };

function keyString(k: ServiceKey): string {
  // join: one flat string (a template literal would be a rope, re-flattened on every hash).
  // An IPv6 address in brackets: the frontend rows' form (`[2001:db8::1]:80/TCP`).
  if (k.address.includes(":")) return ["[", k.address, "]:", k.port, "/", k.protocol].join("");
  return [k.address, ":", k.port, "/", k.protocol].join("");
}

/** BPF maps held in JavaScript Maps. */
export class MemoryLBMaps implements LBMaps {
  readonly services = new Map<string, [ServiceKey, ServiceEntry]>();
  readonly backends = new Map<number, BackendEntry>();
  readonly maglev = new Map<number, Uint32Array>();
  /** Ordering-invariant breaches seen (should stay empty). */
  readonly violations: string[] = [];
  /** Calls made, by method name. */
  readonly calls: Record<string, number> = {};
  readonly capacity: LBMapsCapacity;
  readonly #check: boolean;

  /**
   * `checkInvariants: false` skips the ordering checks (benchmarks). `capacity` bounds IDs as the
   * datapath's array sizes do (default 2^24 each): an ID at or above it is refused.
   */
  constructor(
    options: { checkInvariants?: boolean; capacity?: Partial<LBMapsCapacity> } = {},
  ) {
    this.#check = options.checkInvariants ?? true;
    this.capacity = { ...UNBOUNDED, ...options.capacity };
  }

  #checkId(kind: "service" | "backend", id: number): Promise<void> | null {
    const size = kind === "service" ? this.capacity.services : this.capacity.backends;
    if (Number.isInteger(id) && id > 0 && id < size) return null;
    return Promise.reject(
      new RangeError(`Invalid ${kind} ID ${id}: the maps hold IDs 1..${size - 1}`),
    );
  }

  #count(name: string): void {
    this.calls[name] = (this.calls[name] ?? 0) + 1;
  }

  updateBackend(id: number, backend: BackendEntry): Promise<void> {
    this.#count("updateBackend");
    const bad = this.#checkId("backend", id);
    if (bad) return bad;
    this.backends.set(id, { address: backend.address, port: backend.port });
    return Promise.resolve();
  }

  deleteBackend(id: number): Promise<void> {
    this.#count("deleteBackend");
    if (this.#check) {
      for (const [sid, t] of this.maglev) {
        if (t.includes(id)) {
          this.violations.push(
            `backend ${id} deleted while Maglev table of service ${sid} uses it`,
          );
          break;
        }
      }
    }
    this.backends.delete(id);
    return Promise.resolve();
  }

  updateMaglev(serviceId: number, table: Uint32Array): Promise<void> {
    this.#count("updateMaglev");
    const bad = this.#checkId("service", serviceId);
    if (bad) return bad;
    if (this.#check) {
      for (const id of new Set(table)) {
        if (id !== 0 && !this.backends.has(id)) {
          this.violations.push(`Maglev table of service ${serviceId} names missing backend ${id}`);
          break;
        }
      }
    }
    this.maglev.set(serviceId, table.slice());
    return Promise.resolve();
  }

  deleteMaglev(serviceId: number): Promise<void> {
    this.#count("deleteMaglev");
    for (const [, [k, e]] of this.#check ? this.services : []) {
      if (e.serviceId === serviceId) {
        this.violations.push(
          `Maglev table ${serviceId} deleted while service ${keyString(k)} uses it`,
        );
        break;
      }
    }
    this.maglev.delete(serviceId);
    return Promise.resolve();
  }

  updateService(key: ServiceKey, entry: ServiceEntry): Promise<void> {
    this.#count("updateService");
    const t = this.maglev.get(entry.serviceId);
    if (!this.#check) {
      // no ordering checks
    } else if (t === undefined) {
      this.violations.push(
        `service ${keyString(key)} written before its Maglev table ${entry.serviceId}`,
      );
    } else if (t.length !== entry.maglevSize) {
      this.violations.push(
        `service ${keyString(key)}: maglevSize ${entry.maglevSize} != table length ${t.length}`,
      );
    }
    this.services.set(keyString(key), [
      { address: key.address, port: key.port, protocol: key.protocol },
      {
        serviceId: entry.serviceId,
        backendCount: entry.backendCount,
        flowKeyMode: entry.flowKeyMode,
        maglevSize: entry.maglevSize,
        ...(entry.draining ? { draining: true } : {}),
      },
    ]);
    return Promise.resolve();
  }

  deleteService(key: ServiceKey): Promise<void> {
    this.#count("deleteService");
    this.services.delete(keyString(key));
    return Promise.resolve();
  }

  dump(options: DumpOptions = {}): Promise<LBMapsContents> {
    this.#count("dump");
    const tables = options.tables ?? true;
    return Promise.resolve({
      services: [...this.services.values()].map(([k, e]) => [{ ...k }, { ...e }] as const),
      backends: [...this.backends].map(([id, b]) => [id, { ...b }] as const),
      maglev: [...this.maglev].map(([id, t]) =>
        [id, tables ? t.slice() : new Uint32Array()] as const
      ),
    });
  }

  /** Empties every map (for retained-memory measurements). */
  clear(): void {
    this.services.clear();
    this.backends.clear();
    this.maglev.clear();
  }
}

/**
 * {@linkcode MemoryLBMaps} that stage Maglev tables as the BPF maps do (`stageMaglev`,
 * `commitMaglev`): a staged table is invisible — to `dump`, `maglev` and the ordering checks —
 * until a commit installs it. `failCommit` holds service IDs whose install commits refuse.
 */
export class StagedMemoryLBMaps extends MemoryLBMaps {
  /** Tables staged and not committed yet, by service ID. */
  readonly staged = new Map<number, Uint32Array>();
  /** Service IDs whose install every commit fails (fault injection). */
  readonly failCommit = new Set<number>();
  /** Per commit, how many tables it installed. */
  readonly commits: number[] = [];

  stageMaglev(serviceId: number, table: Uint32Array): Promise<void> {
    this.calls.stageMaglev = (this.calls.stageMaglev ?? 0) + 1;
    if (!Number.isInteger(serviceId) || serviceId <= 0 || serviceId >= this.capacity.services) {
      return Promise.reject(new RangeError(`Invalid service ID ${serviceId}`));
    }
    this.staged.set(serviceId, table.slice());
    return Promise.resolve();
  }

  async commitMaglev(): Promise<ReadonlyMap<number, Error>> {
    const failed = new Map<number, Error>();
    let installed = 0;
    for (const [sid, table] of this.staged) {
      if (this.failCommit.has(sid)) {
        failed.set(sid, new InjectedFault(`Injected fault: install of Maglev table ${sid} failed`));
        continue;
      }
      await this.updateMaglev(sid, table);
      installed++;
    }
    this.staged.clear();
    this.commits.push(installed);
    return failed;
  }

  override deleteMaglev(serviceId: number): Promise<void> {
    this.staged.delete(serviceId);
    return super.deleteMaglev(serviceId);
  }
}

/** Thrown by {@linkcode FaultyLBMaps} for an injected failure. */
export class InjectedFault extends Error {
  override name = "InjectedFault";
}

/**
 * Wraps an {@linkcode LBMaps} and fails a share of calls before they reach it. `failRate` may be
 * changed at any time (the fault-injection switch); `dump` never fails.
 */
export class FaultyLBMaps implements LBMaps {
  readonly inner: LBMaps;
  /** Share of calls to fail, 0..1. */
  failRate: number;
  /** Number of failures injected so far. */
  injected = 0;
  /** The inner target's. */
  readonly capacity: LBMapsCapacity;
  /** Present when the inner target stages tables; both fail like the other calls. */
  readonly stageMaglev?: (serviceId: number, table: Uint32Array) => Promise<void>;
  readonly commitMaglev?: () => Promise<ReadonlyMap<number, Error>>;
  readonly #rand: () => number;

  constructor(inner: LBMaps, options: { failRate?: number; seed?: number } = {}) {
    this.inner = inner;
    this.capacity = inner.capacity;
    this.failRate = options.failRate ?? 0;
    let s = (options.seed ?? 1) >>> 0;
    this.#rand = () => {
      s = (s + 0x6d2b79f5) >>> 0;
      let t = s;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const { stageMaglev, commitMaglev } = inner;
    if (stageMaglev === undefined || commitMaglev === undefined) return;
    this.stageMaglev = (serviceId, table) =>
      this.#faulty(`stageMaglev(${serviceId})`, () => stageMaglev.call(inner, serviceId, table));
    this.commitMaglev = () => {
      let failed: ReadonlyMap<number, Error> = new Map();
      return this.#faulty("commitMaglev", async () => {
        failed = await commitMaglev.call(inner);
      }).then(() => failed);
    };
  }

  /** Runs `op` on the inner target unless this call is picked to fail (then rejects). */
  #faulty(what: string, op: () => Promise<void>): Promise<void> {
    if (this.failRate > 0 && this.#rand() < this.failRate) {
      this.injected++;
      return Promise.reject(new InjectedFault(`Injected fault: ${what} failed`));
    }
    return op();
  }

  updateBackend(id: number, backend: BackendEntry): Promise<void> {
    return this.#faulty(`updateBackend(${id})`, () => this.inner.updateBackend(id, backend));
  }
  deleteBackend(id: number): Promise<void> {
    return this.#faulty(`deleteBackend(${id})`, () => this.inner.deleteBackend(id));
  }
  updateMaglev(serviceId: number, table: Uint32Array): Promise<void> {
    return this.#faulty(
      `updateMaglev(${serviceId})`,
      () => this.inner.updateMaglev(serviceId, table),
    );
  }
  deleteMaglev(serviceId: number): Promise<void> {
    return this.#faulty(`deleteMaglev(${serviceId})`, () => this.inner.deleteMaglev(serviceId));
  }
  updateService(key: ServiceKey, entry: ServiceEntry): Promise<void> {
    return this.#faulty(
      `updateService(${keyString(key)})`,
      () => this.inner.updateService(key, entry),
    );
  }
  deleteService(key: ServiceKey): Promise<void> {
    return this.#faulty(`deleteService(${keyString(key)})`, () => this.inner.deleteService(key));
  }
  dump(options?: DumpOptions): Promise<LBMapsContents> {
    return this.inner.dump(options);
  }
}
