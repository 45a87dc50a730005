/**
 * The Maglev tables as exceptions-only flow sharing needs them (`--flow-sharing exceptions`,
 * node/lb/flows/exceptions.ts): an {@link LBMaps} that passes every call to the datapath's maps and
 * keeps a copy of the services, backends and tables it wrote, so the flow agent can ask what the
 * current table of a flow's service picks ({@link MaglevMirror.pick}, with each table's version).
 *
 * The handshake: before a service's table is replaced, {@link MaglevMirror.beforeTableChange}
 * is awaited with a picker for the next table — the flow agent publishes this node's flows the
 * next table sends elsewhere and installs stored flows it would (`FlowSyncAgent.tableChanging`) —
 * and only then does the datapath get the new table. The hook is bounded ({@link HOOK_BOUND_MS}):
 * a store that does not answer delays no table longer than that (logged).
 *
 * Only IPv4 flows are placed (the IPv6 flow hash's seed lives in the IPv6 datapath's own config):
 * an IPv6 flow's pick is unknown, so it stays shared as in mode `all`.
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
} from "./maps/lbmaps.ts";
import { flowHashClientIp, flowHashFiveTuple } from "../../policy-as/host/flow_hash.ts";
import { formatIpv4, isIpv4, parseIpv4 } from "../../lib/ipv4.ts";
import type { Logger } from "../../lib/log.ts";
import { type AnyFlowKey, type FlowBackend, isFlowKey6 } from "../bpf/flow.ts";
import { type TableChange, type TablePick, tableVersion } from "./flows/exceptions.ts";

/** Longest wait for the table-change hook before the table is installed anyway, ms. */
export const HOOK_BOUND_MS = 3_000;

/**
 * How long after a table change flows the previous table places elsewhere are still announced:
 * longer than the change takes to reach every LB node (the model's propagation, a reload).
 */
export const PREVIOUS_TABLE_MS = 10_000;

export type { TableChange };

const PROTO: Record<string, number> = { TCP: 6, UDP: 17 };

function keyOf(address: string, port: number, proto: number): string {
  return `${address}|${port}|${proto}`;
}

interface Held {
  key: ServiceKey;
  entry: ServiceEntry;
}

/** A table as installed, with the one it replaced and when. */
interface Installed {
  table: Uint32Array;
  version: number;
  previous?: Uint32Array;
  changedAt?: number;
}

/** An {@link LBMaps} that mirrors what it writes and answers Maglev picks for flow keys. */
export class MaglevMirror implements LBMaps {
  readonly #inner: LBMaps;
  readonly #seed: number;
  readonly #log: Logger;
  readonly #services = new Map<string, Held>();
  readonly #backends = new Map<number, string>();
  readonly #tables = new Map<number, Installed>();
  readonly #staged = new Map<number, Uint32Array>();
  /** Set by the flow agent once it runs; awaited before a service's table changes. */
  beforeTableChange: ((changes: readonly TableChange[]) => Promise<void>) | null = null;

  constructor(inner: LBMaps, options: { seed: number; logger: Logger }) {
    this.#inner = inner;
    this.#seed = options.seed >>> 0;
    this.#log = options.logger;
  }

  get capacity(): LBMapsCapacity {
    return this.#inner.capacity;
  }

  /** What the current table of `key`'s service picks (and its version); undefined if unknown. */
  pick(key: AnyFlowKey): TablePick | undefined {
    if (isFlowKey6(key)) return undefined;
    const held = this.#services.get(keyOf(formatIpv4(key.daddr), key.dport, key.proto));
    if (!held || held.entry.backendCount === 0) return undefined;
    const t = this.#tables.get(held.entry.serviceId);
    if (!t) return undefined;
    const backend = this.#pickIn(t.table, held.entry, key);
    if (backend === undefined) return undefined;
    if (!t.previous || performance.now() - t.changedAt! > PREVIOUS_TABLE_MS) {
      return { backend, version: t.version };
    }
    const previous = this.#pickIn(t.previous, held.entry, key) ?? null;
    return { backend, version: t.version, previous };
  }

  #pickIn(table: Uint32Array, entry: ServiceEntry, key: AnyFlowKey): FlowBackend | undefined {
    if (isFlowKey6(key) || table.length === 0) return undefined;
    const hash = entry.flowKeyMode === "client-ip"
      ? flowHashClientIp(key.saddr, this.#seed)
      : flowHashFiveTuple(key, this.#seed);
    const id = table[hash % table.length]!;
    const address = id === 0 ? undefined : this.#backends.get(id);
    return address !== undefined && isIpv4(address) ? parseIpv4(address) : undefined;
  }

  #version(table: Uint32Array): number {
    return tableVersion(table, (id) => this.#backends.get(id) ?? `#${id}`);
  }

  /** The held service using table `serviceId`, if any. */
  #serviceOf(serviceId: number): Held | undefined {
    for (const held of this.#services.values()) {
      if (held.entry.serviceId === serviceId) return held;
    }
    return undefined;
  }

  /** Runs the hook for the tables about to replace existing ones (bounded, never throws). */
  async #before(tables: ReadonlyMap<number, Uint32Array>): Promise<void> {
    const hook = this.beforeTableChange;
    if (!hook) return;
    const changes: TableChange[] = [];
    for (const [sid, table] of tables) {
      const held = this.#serviceOf(sid);
      const cur = this.#tables.get(sid);
      // A new service: no flow was placed by an older table here. IPv6: not placed (shared).
      if (!held || !cur || !isIpv4(held.key.address)) continue;
      const version = this.#version(table);
      if (version === cur.version) continue;
      const entry = held.entry;
      changes.push({
        service: held.key,
        version,
        next: (key) => this.#pickIn(table, entry, key),
      });
    }
    if (changes.length === 0) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const bound = new Promise<"late">((r) => timer = setTimeout(() => r("late"), HOOK_BOUND_MS));
    try {
      const r = await Promise.race([hook(changes).then(() => "done" as const), bound]);
      if (r === "late") {
        this.#log.warn("table change: flow handshake not done in time, installing the table", {
          services: changes.length,
          waited_ms: HOOK_BOUND_MS,
        });
      }
    } catch (err) {
      this.#log.warn("table change: flow handshake failed, installing the table", { err });
    } finally {
      clearTimeout(timer);
    }
  }

  #hold(serviceId: number, table: Uint32Array, initial = false): void {
    const cur = this.#tables.get(serviceId);
    const version = this.#version(table);
    const next: Installed = { table: table.slice(), version };
    if (!initial && cur && cur.version !== version) {
      next.previous = cur.table;
      next.changedAt = performance.now();
    } else if (cur?.previous) {
      next.previous = cur.previous;
      next.changedAt = cur.changedAt!;
    }
    this.#tables.set(serviceId, next);
  }

  async updateBackend(id: number, backend: BackendEntry): Promise<void> {
    await this.#inner.updateBackend(id, backend);
    this.#backends.set(id, backend.address);
  }

  async deleteBackend(id: number): Promise<void> {
    await this.#inner.deleteBackend(id);
    this.#backends.delete(id);
  }

  async updateMaglev(serviceId: number, table: Uint32Array): Promise<void> {
    await this.#before(new Map([[serviceId, table]]));
    await this.#inner.updateMaglev(serviceId, table);
    this.#hold(serviceId, table);
  }

  async deleteMaglev(serviceId: number): Promise<void> {
    this.#staged.delete(serviceId);
    await this.#inner.deleteMaglev(serviceId);
    this.#tables.delete(serviceId);
  }

  async stageMaglev(serviceId: number, table: Uint32Array): Promise<void> {
    if (!this.#inner.stageMaglev) return await this.updateMaglev(serviceId, table);
    await this.#inner.stageMaglev(serviceId, table);
    this.#staged.set(serviceId, table.slice());
  }

  async commitMaglev(): Promise<ReadonlyMap<number, Error>> {
    const staged = new Map(this.#staged);
    this.#staged.clear();
    if (!this.#inner.commitMaglev) return new Map();
    await this.#before(staged);
    const failed = await this.#inner.commitMaglev();
    for (const [sid, table] of staged) if (!failed.has(sid)) this.#hold(sid, table);
    return failed;
  }

  async updateService(key: ServiceKey, entry: ServiceEntry): Promise<void> {
    await this.#inner.updateService(key, entry);
    const proto = PROTO[key.protocol] ?? 0;
    this.#services.set(keyOf(key.address, key.port, proto), { key, entry });
  }

  async deleteService(key: ServiceKey): Promise<void> {
    await this.#inner.deleteService(key);
    this.#services.delete(keyOf(key.address, key.port, PROTO[key.protocol] ?? 0));
  }

  async dump(options?: DumpOptions): Promise<LBMapsContents> {
    const c = await this.#inner.dump(options);
    // What the maps held before this process wrote anything (an agent restart): mirrored too.
    for (const [key, entry] of c.services) {
      const proto = PROTO[key.protocol] ?? 0;
      const k = keyOf(key.address, key.port, proto);
      if (!this.#services.has(k)) this.#services.set(k, { key, entry });
    }
    for (const [id, b] of c.backends) {
      if (!this.#backends.has(id)) this.#backends.set(id, b.address);
    }
    for (const [sid, table] of c.maglev) {
      if (table.length > 0 && !this.#tables.has(sid)) this.#hold(sid, table, true);
    }
    return c;
  }
}
