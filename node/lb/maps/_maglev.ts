/**
 * Maglev ID tables for the BPF reconciler: built by a {@linkcode MaglevBuilder} from backend
 * keys and weights, the backend IDs written straight into the slots, and the last one reused
 * when the next frontend has the same backends (the frontends of one service — several ports or
 * addresses — are reconciled one after the other with the same backend set, so they share one
 * build).
 *
 * @module
 */

import { log } from "../../../lib/log.ts";
import type { MaglevBackend, MaglevBuilder } from "../../../policy-as/host/maglev_input.ts";
import { tableDigest } from "./_digest.ts";
import { type AheadJob, MaglevWorkers } from "./_maglev_workers.ts";

export { tableDigest };

/** Fewest tables a pass must rebuild for them to be built ahead on workers. */
export const MIN_AHEAD = 32;

/**
 * How long workers stay up after a pass that used them, for the next large rebuild: starting two
 * costs the reconciler's thread ~17 ms (`new Worker` blocks), so consecutive swaps start them once.
 * A live Worker keeps the process running: `close()` (the control plane's `stop`) ends them now.
 */
export const WORKERS_IDLE_MS = 30_000;

/**
 * Workers for a large rebuild by default: one per CPU, at least 1, at most 2. Measured here (2
 * CPUs shared with other work, swaps of 1,000 tables, runs alternated): at load 1.6–2, tables
 * unchanged 333–365 ms with 2 workers against 431–561 with 1, every table refilled 527–631 ms
 * against 508–764; at load ~5 (other processes hold the CPUs) the reconciler's thread, which
 * installs the tables, waits longer to run beside 2 workers: refilled median 670 ms against 523.
 */
export function defaultMaglevWorkers(): number {
  return Math.max(1, Math.min(2, navigator.hardwareConcurrency || 1));
}

/** A table for a frontend: its slots (backend IDs), whether it is the previous one, its digest. */
export interface BuiltTable {
  readonly table: Uint32Array;
  readonly reused: boolean;
  /** Built on a worker (`buildAhead`). */
  readonly ahead: boolean;
  /** `tableDigest(table)`. */
  readonly digest: number;
}

/**
 * Builds ID tables, keeping the last one (and one spare buffer) for reuse; a pass that rebuilds
 * many (`buildAhead`) has them built ahead on workers (`_maglev_workers.ts`).
 */
export class MaglevTables {
  readonly #builder: MaglevBuilder;
  readonly #workerCount: number;
  #workers: MaglevWorkers | null = null;
  /** Stops idle workers ({@linkcode WORKERS_IDLE_MS} after the last pass that used them). */
  #idle: ReturnType<typeof setTimeout> | undefined;
  /** The pass building ahead now: its tables, how many came from workers, when it started. */
  #pass: { tables: number; ahead: number; started: number } | null = null;
  #lastDigest = 0;
  /** The last table built, with its keys, IDs and M. One entry only: retained memory stays one table. */
  #lastKeys: readonly MaglevBackend[] = [];
  #lastIds: readonly number[] = [];
  #lastM = 0;
  #lastTable: Uint32Array | null = null;
  /** A table buffer nothing holds, handed to the builder as `out` (two buffers alternate). */
  #spare: Uint32Array | null = null;

  /** `workers`: how many build ahead (0: never; default {@linkcode defaultMaglevWorkers}). */
  constructor(builder: MaglevBuilder, workers?: number) {
    this.#builder = builder;
    this.#workerCount = workers ?? defaultMaglevWorkers();
  }

  /**
   * Starts building `jobs` ahead, in the order `tableFor` will ask for them, when they are at
   * least {@linkcode MIN_AHEAD}, workers are allowed, and the builder fills with a WASM module
   * (`MaglevBuilder.fillModule`). Returns whether it did.
   */
  buildAhead(jobs: readonly AheadJob[]): boolean {
    const module = this.#builder.fillModule?.();
    if (module === undefined || this.#workerCount === 0 || jobs.length < MIN_AHEAD) return false;
    clearTimeout(this.#idle);
    const workers = this.#workers ??= new MaglevWorkers(this.#workerCount);
    try {
      workers.start(module, jobs);
      this.#pass = { tables: jobs.length, ahead: 0, started: performance.now() };
      return true;
    } catch (err) {
      // No worker (none may start here, or the module cannot be posted): all on this thread.
      workers.close();
      log.warn("Maglev tables not built on workers", {
        component: "bpf",
        tables: jobs.length,
        err,
      });
      return false;
    }
  }

  /**
   * Ends a pass: what was built ahead and not taken is dropped; the workers stop once idle for
   * {@linkcode WORKERS_IDLE_MS}.
   */
  endAhead(): void {
    this.#workers?.clear();
    const pass = this.#pass;
    if (pass === null) return;
    this.#pass = null;
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => this.close(), WORKERS_IDLE_MS);
    log.info("Maglev tables of a rebuild built ahead", {
      component: "bpf",
      tables: pass.tables,
      built_on_workers: pass.ahead,
      workers: this.#workerCount,
      ms: Math.round(performance.now() - pass.started),
    });
  }

  /** Tables of the pass a worker has started building so far (0 without workers). */
  get aheadStarted(): number {
    return this.#workers?.started ?? 0;
  }

  /** Stops the workers now (they start again with the next `buildAhead`). */
  close(): void {
    clearTimeout(this.#idle);
    this.#idle = undefined;
    this.#workers?.close();
  }

  /**
   * {@linkcode table} for the frontend at `address`, with its digest: the table built ahead for
   * it if there is one for these keys, IDs and M by the serving module, else built here.
   */
  tableFor(
    address: string,
    keys: readonly MaglevBackend[],
    ids: readonly number[],
    m: number,
  ): BuiltTable | Promise<BuiltTable> {
    const ahead = this.#workers?.take(address, keys, ids, m, this.#builder.fillModule?.()?.digest);
    // Nothing built ahead for it (no pass on workers): built here, no promise.
    if (!ahead) return this.#builtHere(keys, ids, m);
    return ahead.then((got) => {
      if (got === null) return this.#builtHere(keys, ids, m);
      if (this.#pass !== null) this.#pass.ahead++;
      this.#lastTable = got.table;
      this.#lastKeys = keys;
      this.#lastIds = ids;
      this.#lastM = m;
      this.#lastDigest = got.digest;
      return { table: got.table, reused: false, ahead: true, digest: got.digest };
    });
  }

  #builtHere(keys: readonly MaglevBackend[], ids: readonly number[], m: number): BuiltTable {
    const built = this.table(keys, ids, m);
    if (!built.reused) this.#lastDigest = tableDigest(built.table);
    return { table: built.table, reused: built.reused, ahead: false, digest: this.#lastDigest };
  }

  /** Forgets the last table (a new builder module: the next table must be built again). */
  invalidate(): void {
    this.#lastTable = null;
    this.#lastKeys = [];
    this.#lastIds = [];
  }

  /**
   * The table of size `m` whose slots name `ids[i]` for backend `keys[i]`; `reused` if it is the
   * previous one (never mutated after it was returned, so it can be written again as it is).
   * The caller writes it before asking for the next one: the maps copy it, so the buffer is
   * recycled two calls later. Throws the builder's error, or an Error if it returns the wrong size.
   */
  table(
    keys: readonly MaglevBackend[],
    ids: readonly number[],
    m: number,
  ): { table: Uint32Array; reused: boolean } {
    if (this.#matchesLast(keys, ids, m)) return { table: this.#lastTable!, reused: true };
    const spare = this.#spare !== null && this.#spare.length === m ? this.#spare : undefined;
    const table = this.#builder.build(keys, m, spare, ids); // slots hold the IDs directly
    if (table.length !== m) {
      throw new Error(`Maglev builder returned ${table.length} slots, expected ${m}`);
    }
    if (table === spare || this.#spare === null) this.#spare = this.#lastTable;
    this.#lastTable = table;
    this.#lastKeys = keys;
    this.#lastIds = ids;
    this.#lastM = m;
    return { table, reused: false };
  }

  #matchesLast(keys: readonly MaglevBackend[], ids: readonly number[], m: number): boolean {
    const last = this.#lastKeys, lastIds = this.#lastIds;
    if (this.#lastTable === null || m !== this.#lastM || keys.length !== last.length) return false;
    for (let i = 0; i < keys.length; i++) {
      if (
        keys[i]!.key !== last[i]!.key || keys[i]!.weight !== last[i]!.weight ||
        ids[i] !== lastIds[i]
      ) return false;
    }
    return true;
  }
}
