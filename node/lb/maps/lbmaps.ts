/**
 * The narrow interface between the control plane and the datapath's BPF maps.
 *
 * The reconciler in `controller/` writes through it; `node/bpf/lbmaps_bpf.ts` implements it over
 * the real pinned maps and `node/lb/maps/memory.ts` in memory for unit tests. Shapes mirror
 * `bpf/structs.h`: a service is found by (VIP, port, protocol); it names a Maglev table of
 * backend IDs; a backend ID resolves to the address the packet is encapsulated to. Addresses are
 * IPv4 (dotted quad) or IPv6 (RFC 5952 text): a target keeps each family in its own maps
 * (`hf_services6`, `hf_backends6`) but one service-ID and one backend-ID space, so a Maglev table
 * (backend IDs only) serves either family (docs/contracts.md "IPv6").
 *
 * Contract, per frontend: backends first, then the Maglev table, then the service entry — so the
 * datapath never sees a service whose table points at a backend that is not there yet. Deletion
 * goes the other way round. Every method is idempotent. A staged table (`stageMaglev`) counts as
 * written only once `commitMaglev` installed it: the service entry naming it comes after.
 *
 * @module
 */

/** L4 protocols as they appear in the IPv4 and IPv6 headers. */
export type L4Protocol = "TCP" | "UDP";

/** Key of the services map: the frontend as packets address it. */
export interface ServiceKey {
  /** Frontend (LB) address: dotted-quad IPv4 (`10.0.100.1`) or RFC 5952 IPv6 (`2001:db8::1`). */
  readonly address: string;
  readonly port: number;
  readonly protocol: L4Protocol;
}

/** How flows of a service are keyed: per connection, or per client address (affinity). */
export type FlowKeyMode = "five-tuple" | "client-ip";

/** Value of the services map. */
export interface ServiceEntry {
  /** Stable ID of the service; also the key of its Maglev table. 1..capacity.services-1. */
  readonly serviceId: number;
  /** Number of active backends behind it; 0 means the datapath drops new flows. */
  readonly backendCount: number;
  readonly flowKeyMode: FlowKeyMode;
  /** Maglev table size M (prime) the table was built with. */
  readonly maglevSize: number;
  /** True: no new TCP connection (a SYN without a flow is dropped); see `Service.draining`. */
  readonly draining?: boolean;
}

/** Value of the backends map: where packets of a flow are encapsulated to. */
export interface BackendEntry {
  /** Address of the backend (pod) that decapsulates: IPv4 or RFC 5952 IPv6, as in ServiceKey. */
  readonly address: string;
  readonly port: number;
}

/** Everything a target holds, for restoring IDs after a restart and for `maps/dump`. */
export interface LBMapsContents {
  readonly services: ReadonlyArray<readonly [ServiceKey, ServiceEntry]>;
  readonly backends: ReadonlyArray<readonly [number, BackendEntry]>;
  /** Service ID → Maglev table (length M, each slot a backend ID; 0 = unset). */
  readonly maglev: ReadonlyArray<readonly [number, Uint32Array]>;
}

/** Options of {@linkcode LBMaps.dump}. */
export interface DumpOptions {
  /** Read the Maglev tables' slots (default true); false lists only which tables exist. */
  readonly tables?: boolean;
  /**
   * Read only backend IDs below this (default: all of them). The reconciler's cheap dump inside a
   * policy swap: it knows every ID it allocated is below it; a stray entry above is left to the
   * next periodic full pass. A target may still return them all.
   */
  readonly backendIdsBelow?: number;
}

/**
 * How many services and backends the maps hold: the sizes of the arrays indexed by ID, so IDs run
 * 1..size-1 (0 is never used). The datapath's are set at load (`--max-services`,
 * `--max-backends`); the reconciler allocates IDs within them.
 */
export interface LBMapsCapacity {
  readonly services: number;
  readonly backends: number;
}

/** The BPF-maps target. Implementations must make every call idempotent. */
export interface LBMaps {
  /** The ID space of this target; IDs at or above it are refused. */
  readonly capacity: LBMapsCapacity;
  updateBackend(id: number, backend: BackendEntry): Promise<void>;
  deleteBackend(id: number): Promise<void>;
  /** Copies `table` before returning: the caller reuses the buffer for the next table. */
  updateMaglev(serviceId: number, table: Uint32Array): Promise<void>;
  deleteMaglev(serviceId: number): Promise<void>;
  /**
   * Optional, with {@linkcode LBMaps.commitMaglev}: builds `serviceId`'s new table whole (copied
   * before returning) but leaves the installed one in service until the commit. For a target
   * whose installs are costly one at a time (the BPF maps wait an RCU grace period per update of
   * a map of maps; one batch waits once). Staging an ID again replaces its staged table;
   * `deleteMaglev` drops it; `dump` sees installed tables only.
   */
  stageMaglev?(serviceId: number, table: Uint32Array): Promise<void>;
  /**
   * Installs every staged table, each swapped in whole (no reader sees a half-written one), in as
   * few map updates as the target can. Resolves with the service IDs whose install failed, each
   * with its error (their previous table stays); every other staged table is installed.
   */
  commitMaglev?(): Promise<ReadonlyMap<number, Error>>;
  updateService(key: ServiceKey, entry: ServiceEntry): Promise<void>;
  deleteService(key: ServiceKey): Promise<void>;
  /**
   * Reads back everything; used at start to restore IDs so a restart renumbers nothing. With
   * `tables: false` the Maglev tables are not read: `maglev` lists the service IDs that have one,
   * each with an empty array (a target may still return them whole).
   */
  dump(options?: DumpOptions): Promise<LBMapsContents>;
}
