/**
 * The agent's bounded outage queue: flows waiting to be written to the store, deduplicated by
 * flow, with a hard cap. When full, the oldest entry is dropped and counted — memory stays
 * bounded however long Redis is away, and pushing never waits.
 *
 * @module
 */

/** A bounded, deduplicating FIFO keyed by string ID. */
export class BoundedQueue<T> {
  #items = new Map<string, T>();
  #dropped = 0;

  constructor(readonly capacity: number) {
    if (!(capacity >= 1)) throw new RangeError(`Cannot create queue: capacity ${capacity} < 1`);
  }

  /** Entries waiting. */
  get size(): number {
    return this.#items.size;
  }

  /** Entries dropped for lack of room since creation. */
  get dropped(): number {
    return this.#dropped;
  }

  /**
   * Adds (or replaces, keeping its place) the entry `id`. Returns the number of entries dropped
   * to make room (0 or 1).
   */
  push(id: string, item: T): number {
    if (this.#items.has(id)) {
      this.#items.set(id, item);
      return 0;
    }
    this.#items.set(id, item);
    if (this.#items.size <= this.capacity) return 0;
    const oldest = this.#items.keys().next().value as string;
    this.#items.delete(oldest);
    this.#dropped++;
    return 1;
  }

  /** Puts taken entries back (after a failed write) unless newer ones replaced them. */
  requeue(entries: Iterable<[string, T]>): number {
    let dropped = 0;
    for (const [id, item] of entries) if (!this.#items.has(id)) dropped += this.push(id, item);
    return dropped;
  }

  /** Removes and returns up to `max` of the oldest entries. */
  take(max: number): [string, T][] {
    const out: [string, T][] = [];
    for (const entry of this.#items) {
      if (out.length >= max) break;
      out.push(entry);
    }
    for (const [id] of out) this.#items.delete(id);
    return out;
  }

  /** Whether `id` is waiting. */
  has(id: string): boolean {
    return this.#items.has(id);
  }
}
