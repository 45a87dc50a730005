/**
 * The agent's bounded outage queue: flows waiting to be written to the store, with a hard cap.
 * When full, the oldest entry is dropped and counted — memory stays bounded however long Redis
 * is away, and pushing never waits. Entries are kept in chunks so that push, take and drop are
 * O(1) per entry without per-entry bookkeeping (this sits on the new-flow path).
 *
 * @module
 */

/** A bounded FIFO that drops its oldest entries when full. */
export class BoundedQueue<T> {
  #chunks: T[][] = [];
  #head = 0; // index of the first live entry in #chunks[0]
  #size = 0;
  #dropped = 0;
  readonly #chunkSize: number;

  constructor(readonly capacity: number, options: { chunkSize?: number } = {}) {
    if (!(capacity >= 1)) throw new RangeError(`Cannot create queue: capacity ${capacity} < 1`);
    this.#chunkSize = options.chunkSize ?? 1024;
  }

  /** Entries waiting. */
  get size(): number {
    return this.#size;
  }

  /** Entries dropped for lack of room since creation. */
  get dropped(): number {
    return this.#dropped;
  }

  /** Appends `item`. Returns the number of entries dropped to make room (0 or 1). */
  push(item: T): number {
    let last = this.#chunks[this.#chunks.length - 1];
    if (!last || last.length >= this.#chunkSize) this.#chunks.push(last = []);
    last.push(item);
    this.#size++;
    if (this.#size <= this.capacity) return 0;
    this.#dropOldest(this.#size - this.capacity);
    return 1;
  }

  #dropOldest(n: number): void {
    while (n > 0 && this.#size > 0) {
      const first = this.#chunks[0]!;
      const k = Math.min(n, first.length - this.#head);
      this.#head += k;
      this.#size -= k;
      this.#dropped += k;
      n -= k;
      if (this.#head >= first.length) {
        this.#chunks.shift();
        this.#head = 0;
      }
    }
  }

  /**
   * Puts entries back at the front (after a failed write), oldest first. If that exceeds the
   * capacity, the oldest are dropped. Returns how many were dropped.
   */
  requeue(items: readonly T[]): number {
    if (items.length === 0) return 0;
    const first = this.#chunks[0];
    if (first && this.#head > 0) {
      this.#chunks[0] = first.slice(this.#head);
      this.#head = 0;
    }
    this.#chunks.unshift([...items]);
    this.#size += items.length;
    const over = Math.max(0, this.#size - this.capacity);
    this.#dropOldest(over);
    return over;
  }

  /** Removes and returns up to `max` of the oldest entries. */
  take(max: number): T[] {
    const out: T[] = [];
    while (out.length < max && this.#size > 0) {
      const first = this.#chunks[0]!;
      const end = Math.min(first.length, this.#head + (max - out.length));
      for (let i = this.#head; i < end; i++) out.push(first[i]!);
      this.#size -= end - this.#head;
      this.#head = end;
      if (this.#head >= first.length) {
        this.#chunks.shift();
        this.#head = 0;
      }
    }
    return out;
  }
}
