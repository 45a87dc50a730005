/**
 * Change iterators and the graveyard that keeps deleted rows until every iterator has seen
 * them.
 *
 * @module
 */

import { buildByRev, type Grave, type Graveyard } from "./_table_state.ts";
import type { Table } from "./_table.ts";
import type { ReadTxn } from "./_txn.ts";
import { Watch } from "./watch.ts";

/** A change reported by {@linkcode ChangeIterator.next}. */
export interface Change<R> {
  readonly row: R;
  readonly rev: number;
  readonly deleted: boolean;
}

/** Reports inserts/updates and deletes of a table in revision order. */
export class ChangeIterator<R> {
  readonly #table: Table<R>;
  /** Highest revision reported. */
  seen = 0;
  readonly #deleteFloor: number;
  #closed = false;

  /** @internal */
  constructor(table: Table<R>, deleteFloor: number) {
    this.#table = table;
    this.#deleteFloor = deleteFloor;
  }

  /**
   * Changes after the last call up to `txn`'s revision (at most `limit`), and a watch that fires
   * when there are more.
   */
  next(txn: ReadTxn, limit = Infinity): [Change<R>[], Watch] {
    if (this.#closed) throw new Error(`Change iterator of table "${this.#table.name}" is closed`);
    const s = txn.state(this.#table);
    const out: Change<R>[] = [];
    const from = this.seen;
    const gy = s.gy;
    let gi = s.gyStart;
    const floor = Math.max(from, this.#deleteFloor);
    while (gi < s.gyEnd && gy[gi]!.rev <= floor) gi++;
    const emitGravesBelow = (rev: number): boolean => {
      while (gi < s.gyEnd && gy[gi]!.rev < rev) {
        if (out.length >= limit) return false;
        const g = gy[gi++]!;
        out.push({ row: g.row, rev: g.rev, deleted: true });
      }
      return true;
    };
    let stopped = false;
    (s.byRev ?? buildByRev(s.primary)).scan((k, v) => {
      const rev = k as number;
      if (!emitGravesBelow(rev) || out.length >= limit) {
        stopped = true;
        return false;
      }
      out.push({ row: v, rev, deleted: false });
    }, from + 1);
    if (!stopped) emitGravesBelow(Infinity);
    if (out.length > 0) this.seen = out[out.length - 1]!.rev;
    const more = out.length >= limit;
    if (!more) this.seen = Math.max(this.seen, s.rev);
    const w = more ? Watch.fired() : this.#table.watch(txn);
    return [out, w];
  }

  /** Stops observing; the graveyard no longer keeps deletes for this iterator. */
  close(): void {
    this.#closed = true;
    this.#table._closeIterator(this);
  }
}

/** `old` with `graves` appended. */
export function appendGraves<R>(old: Graveyard<R>, graves: readonly Grave<R>[]): Graveyard<R> {
  let gy = old.gy, gyStart = old.gyStart, gyEnd = old.gyEnd;
  if (gyEnd !== gy.length) {
    // Another state appended past our end can't happen (one writer per table), but a
    // trimmed array may be shared: copy the live part to stay append-only.
    gy = gy.slice(gyStart, gyEnd);
    gyStart = 0;
    gyEnd = gy.length;
  }
  for (const g of graves) gy.push(g);
  gyEnd = gy.length;
  return { gy, gyStart, gyEnd };
}

/**
 * `s` without the graves every iterator has seen (revision ≤ `low`), or null when none can go.
 * The array is compacted once most of it is dead.
 */
export function trimGraveyard<R>(s: Graveyard<R>, low: number): Graveyard<R> | null {
  let start = s.gyStart;
  while (start < s.gyEnd && s.gy[start]!.rev <= low) start++;
  if (start === s.gyStart) return null;
  let gy = s.gy, end = s.gyEnd;
  if (start === end) {
    gy = [];
    start = 0;
    end = 0;
  } else if (start > 64 && start * 2 > end) {
    gy = gy.slice(start, end);
    end -= start;
    start = 0;
  }
  return { gy, gyStart: start, gyEnd: end };
}
