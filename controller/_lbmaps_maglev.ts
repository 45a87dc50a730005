/**
 * Maglev ID tables for the BPF reconciler: built by a {@linkcode MaglevBuilder} from backend
 * keys and weights, the backend IDs written straight into the slots, and the last one reused
 * when the next frontend has the same backends (the frontends of one service — several ports or
 * addresses — are reconciled one after the other with the same backend set, so they share one
 * build).
 *
 * @module
 */

import type { MaglevBackend, MaglevBuilder } from "../policy-as/host/maglev_input.ts";

/** Builds ID tables, keeping the last one (and one spare buffer) for reuse. */
export class MaglevTables {
  readonly #builder: MaglevBuilder;
  /** The last table built, with its keys, IDs and M. One entry only: retained memory stays one table. */
  #lastKeys: readonly MaglevBackend[] = [];
  #lastIds: readonly number[] = [];
  #lastM = 0;
  #lastTable: Uint32Array | null = null;
  /** A table buffer nothing holds, handed to the builder as `out` (two buffers alternate). */
  #spare: Uint32Array | null = null;

  constructor(builder: MaglevBuilder) {
    this.#builder = builder;
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

/**
 * A 53-bit digest of `table`'s slots and length (two 32-bit multiplicative hashes): a rebuilt
 * table with the installed one's digest is taken as equal and not written again (a chance
 * collision, ~2^-53, would leave the previous table, which names live backends only).
 */
export function tableDigest(table: Uint32Array): number {
  let a = 0x811c9dc5 ^ table.length, b = 0x9747b28c + table.length;
  for (let i = 0; i < table.length; i++) {
    const v = table[i]!;
    a = Math.imul(a ^ v, 0x01000193);
    b = Math.imul(b ^ v, 0x5bd1e995);
    b ^= b >>> 15;
  }
  return (a >>> 0) * 0x200000 + ((b >>> 0) >>> 11);
}
