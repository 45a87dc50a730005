/**
 * The control plane's BPF-maps target (node/lb/maps/lbmaps.ts) over the real maps: services,
 * backends and Maglev tables. A Maglev table is an inner u32 array (BPF_F_INNER_MAP, so sizes may
 * differ; BPF_F_MMAPABLE, so it is filled by a memory copy, unless an older hf_maglev refuses it)
 * created whole and swapped into hf_maglev in one update, so the datapath never sees a
 * half-written table, and pinned beside the other maps so a restart reopens it by path
 * (`_maglev_tables.ts`). Staged tables (`stageMaglev`, one reconciler batch) are swapped in
 * together by `commitMaglev`: one BPF_MAP_UPDATE_BATCH, so one RCU grace period for all of them
 * instead of one per table (~11 ms each here). `dump()` reads everything back so a restarted agent
 * renumbers nothing (or, `backendIdsBelow`, only the backend IDs the reconciler can have written).
 *
 * IPv6 (docs/contracts.md "IPv6"): a key or backend whose address is IPv6 text goes to
 * hf_services6 / hf_backends6. Backend IDs are one space: an ID names an IPv4 entry (the datapath
 * reads it first) or an IPv6 one, so writing one family's entry clears the other's, and `dump`
 * returns both families' backends in one list.
 *
 * @module
 */

import type {
  BackendEntry,
  DumpOptions,
  L4Protocol,
  LBMaps,
  LBMapsCapacity,
  LBMapsContents,
  ServiceEntry,
  ServiceKey,
} from "../lb/maps/lbmaps.ts";
import type { BpfMap } from "./map.ts";
import { MaglevTableStore } from "./_maglev_tables.ts";
import {
  decodeBackendValue,
  decodeServiceKey,
  decodeServiceValue,
  encodeBackendValue,
  encodeServiceKey,
  encodeServiceValue,
  readU32,
  u32,
} from "./structs.ts";
import {
  decodeBackendValue6,
  decodeServiceKey6,
  encodeBackendValue6,
  encodeServiceKey6,
  SIZES6,
} from "./structs6.ts";
import { PROTO, SVC_F_CLIENT_IP, SVC_F_DRAINING } from "./consts.ts";

/** The maps this target writes. */
export interface LBMapsHandles {
  readonly services: BpfMap;
  readonly backends: BpfMap;
  readonly maglev: BpfMap;
  /** hf_services6 and hf_backends6; absent: IPv6 keys and backends are refused. */
  readonly services6?: BpfMap;
  readonly backends6?: BpfMap;
}

const ZERO4 = new Uint8Array(8), ZERO6 = new Uint8Array(SIZES6.backend_value6);

function isV6(address: string): boolean {
  return address.includes(":");
}

/** IDs index arrays in the datapath (bpf/consts.h): 1 ≤ id < capacity. */
function checkId(kind: "service" | "backend", id: number, capacity: number): void {
  if (!Number.isInteger(id) || id < 1 || id >= capacity) {
    throw new RangeError(
      `Cannot use ${kind} ID ${id}: the datapath indexes ${kind}s by ID in an array of ${capacity} (IDs 1..${
        capacity - 1
      }, allocated densely)`,
    );
  }
}

function protoNumber(p: L4Protocol): number {
  return p === "TCP" ? PROTO.TCP : PROTO.UDP;
}

function protoName(n: number): L4Protocol {
  if (n === PROTO.TCP) return "TCP";
  if (n === PROTO.UDP) return "UDP";
  throw new RangeError(
    `Cannot name protocol ${n} of a service key: only TCP (6) and UDP (17) are used`,
  );
}

/** {@linkcode LBMaps} over the LB object's maps. Every method is idempotent. */
export class BpfLBMaps implements LBMaps, Disposable {
  readonly #m: LBMapsHandles;
  readonly #tables: MaglevTableStore;
  /** The maps' sizes as loaded (`Datapath.open` `maxServices`, `maxBackends`). */
  readonly capacity: LBMapsCapacity;

  /**
   * Wraps the maps (see `Datapath.maps`). Maglev tables are pinned under `tablesDir` (see
   * `_maglev_tables.ts`); null keeps them unpinned, held by this instance's descriptors.
   */
  constructor(maps: LBMapsHandles, tablesDir: string | null = null) {
    this.#m = maps;
    this.#tables = new MaglevTableStore(maps.maglev, tablesDir);
    // a service needs a hf_services entry and a hf_maglev slot (indexed by its ID)
    this.capacity = {
      services: Math.min(maps.services.maxEntries, maps.maglev.maxEntries),
      backends: maps.backends.maxEntries,
    };
  }

  #v6(name: "services6" | "backends6", what: string): BpfMap {
    const m = this.#m[name];
    if (m === undefined) {
      throw new Error(`Cannot write IPv6 ${what}: this target has no hf_${name} map`);
    }
    return m;
  }

  updateBackend(id: number, backend: BackendEntry): Promise<void> {
    checkId("backend", id, this.#m.backends.maxEntries);
    if (backend.address === "0.0.0.0" || /^[:0]*$/.test(backend.address)) {
      throw new RangeError(
        `Cannot store backend ${id} with address "${backend.address}": 0 means "no backend"`,
      );
    }
    const key = u32(id);
    if (isV6(backend.address)) {
      const m6 = this.#v6("backends6", `backend ${id} "${backend.address}"`);
      // The IPv4 entry is read first: cleared before the IPv6 one is named.
      this.#m.backends.update(key, ZERO4);
      m6.update(key, encodeBackendValue6(backend.address, backend.port));
    } else {
      this.#m.backends.update(key, encodeBackendValue(backend.address, backend.port));
      this.#m.backends6?.update(key, ZERO6);
    }
    return Promise.resolve();
  }

  deleteBackend(id: number): Promise<void> {
    checkId("backend", id, this.#m.backends.maxEntries);
    // an array entry cannot be deleted: address 0 is "no such backend"
    this.#m.backends.update(u32(id), ZERO4);
    this.#m.backends6?.update(u32(id), ZERO6);
    return Promise.resolve();
  }

  updateMaglev(serviceId: number, table: Uint32Array): Promise<void> {
    checkId("service", serviceId, this.#m.maglev.maxEntries);
    if (table.length === 0) {
      throw new RangeError(`Cannot store an empty Maglev table for service ${serviceId}`);
    }
    this.#tables.write(serviceId, table);
    return Promise.resolve();
  }

  /** Builds the table whole; `commitMaglev` swaps it in (`MaglevTableStore.stage`). */
  stageMaglev(serviceId: number, table: Uint32Array): Promise<void> {
    checkId("service", serviceId, this.#m.maglev.maxEntries);
    if (table.length === 0) {
      throw new RangeError(`Cannot store an empty Maglev table for service ${serviceId}`);
    }
    this.#tables.stage(serviceId, table);
    return Promise.resolve();
  }

  /** Swaps the staged tables into hf_maglev, one batch update per 1,024 (see `stageMaglev`). */
  commitMaglev(): Promise<ReadonlyMap<number, Error>> {
    return Promise.resolve(this.#tables.commit());
  }

  deleteMaglev(serviceId: number): Promise<void> {
    this.#tables.delete(serviceId);
    return Promise.resolve();
  }

  #serviceKey(key: ServiceKey): [BpfMap, Uint8Array] {
    const proto = protoNumber(key.protocol);
    if (!isV6(key.address)) {
      return [this.#m.services, encodeServiceKey(key.address, key.port, proto)];
    }
    const m6 = this.#v6("services6", `frontend "${key.address}"`);
    return [m6, encodeServiceKey6(key.address, key.port, proto)];
  }

  updateService(key: ServiceKey, entry: ServiceEntry): Promise<void> {
    checkId("service", entry.serviceId, this.#m.maglev.maxEntries);
    const [map, k] = this.#serviceKey(key);
    map.update(
      k,
      encodeServiceValue({
        serviceId: entry.serviceId,
        backendCount: entry.backendCount,
        flags: (entry.flowKeyMode === "client-ip" ? SVC_F_CLIENT_IP : 0) |
          (entry.draining ? SVC_F_DRAINING : 0),
        maglevSize: entry.maglevSize,
      }),
    );
    return Promise.resolve();
  }

  deleteService(key: ServiceKey): Promise<void> {
    if (isV6(key.address) && this.#m.services6 === undefined) return Promise.resolve();
    const [map, k] = this.#serviceKey(key);
    map.delete(k);
    return Promise.resolve();
  }

  dump(options: DumpOptions = {}): Promise<LBMapsContents> {
    const services: Array<readonly [ServiceKey, ServiceEntry]> = [];
    const readServices = (svc: BpfMap, decodeKey: typeof decodeServiceKey) => {
      const ks = svc.keySize, vs = svc.valueSize;
      const read = svc.lookupBatch(4096); // a hash map: one batch read instead of 2 syscalls each
      for (let i = 0; i < read.count; i++) {
        const sk = decodeKey(read.keys.subarray(i * ks, (i + 1) * ks));
        const sv = decodeServiceValue(read.values.subarray(i * vs, (i + 1) * vs));
        services.push([
          { address: sk.address, port: sk.port, protocol: protoName(sk.proto) },
          {
            serviceId: sv.serviceId,
            backendCount: sv.backendCount,
            flowKeyMode: sv.flags & SVC_F_CLIENT_IP ? "client-ip" : "five-tuple",
            maglevSize: sv.maglevSize,
            ...(sv.flags & SVC_F_DRAINING ? { draining: true } : {}),
          },
        ]);
      }
    };
    readServices(this.#m.services, decodeServiceKey);
    if (this.#m.services6) readServices(this.#m.services6, decodeServiceKey6);
    const backends: Array<readonly [number, BackendEntry]> = [];
    const below = Math.max(
      1,
      Math.min(options.backendIdsBelow ?? Infinity, this.#m.backends.maxEntries),
    );
    {
      // An array: batch reads of IDs 0..below-1; entries with address 0 are unset IDs, skipped
      // before decoding (the kernel's copy of each slot is most of what remains: ~0.1 µs each).
      const { keys, values, count } = this.#m.backends.lookupBatch(Math.min(16384, below), below);
      for (let i = 0, o = 0; i < count; i++, o += 8) {
        if ((values[o]! | values[o + 1]! | values[o + 2]! | values[o + 3]!) === 0) continue;
        const id = readU32(keys, i * 4);
        if (id < below) backends.push([id, decodeBackendValue(values.subarray(o, o + 8))]);
      }
    }
    if (this.#m.backends6) this.#dumpBackends6(this.#m.backends6, below, backends);
    // ascending by service ID; unreadable tables are left out: the reconciler writes them again
    const maglev = options.tables ?? true
      ? this.#tables.readAll().tables
      : this.#tables.serviceIds().map((id) => [id, new Uint32Array()] as const);
    services.sort((a, b) => a[1].serviceId - b[1].serviceId);
    backends.sort((a, b) => a[0] - b[0]);
    return Promise.resolve({ services, backends, maglev });
  }

  /** Adds the IPv6 backends below `below` whose ID holds no IPv4 entry (read first). */
  #dumpBackends6(m: BpfMap, below: number, out: Array<readonly [number, BackendEntry]>): void {
    const v4 = new Set(out.map(([id]) => id));
    const vs = SIZES6.backend_value6;
    const { keys, values, count } = m.lookupBatch(Math.min(16384, below), below);
    // The address is tested four bytes at a time (all 65,536 slots in a periodic full pass).
    const words = values.byteOffset % 4 === 0
      ? new Uint32Array(values.buffer, values.byteOffset, values.byteLength >>> 2)
      : new Uint32Array(values.slice().buffer);
    for (let i = 0, o = 0, w = 0; i < count; i++, o += vs, w += vs >>> 2) {
      if ((words[w]! | words[w + 1]! | words[w + 2]! | words[w + 3]!) === 0) continue;
      const id = readU32(keys, i * 4);
      if (id >= below || v4.has(id)) continue;
      out.push([id, decodeBackendValue6(values, o)]);
    }
  }

  /** Closes the table descriptors held without a pin directory. */
  [Symbol.dispose](): void {
    this.#tables[Symbol.dispose]();
  }
}
