/**
 * A hash table from an IPv4 5-tuple to a small integer, in typed arrays (open addressing, linear
 * probing, backward-shift deletion). The sync receiver remembers every entry it injected — often
 * 100,000s — and looks each one up on every resync: a JS Map keyed by strings cost a string, a
 * hash and a probe per entry (0.5–1 µs measured); this is a few array reads.
 *
 * A tuple is (src, dst, ports = sport << 16 | dport, proto), all u32/u8.
 *
 * @module
 */

const MIN_CAPACITY = 1024;

function hash(src: number, dst: number, ports: number, proto: number): number {
  let h = Math.imul(src ^ Math.imul(dst, 0x9e3779b1), 0x85ebca6b);
  h ^= Math.imul(ports ^ (proto << 24), 0xc2b2ae35);
  h ^= h >>> 15;
  h = Math.imul(h, 0x27d4eb2f);
  return (h ^ (h >>> 13)) >>> 0;
}

/** 5-tuple → non-negative integer. */
export class TupleTable {
  #keys: Uint32Array;
  #values: Int32Array;
  #mask: number;
  #size = 0;

  /** An empty table sized for about `expected` tuples. */
  constructor(expected = 0) {
    let cap = MIN_CAPACITY;
    while (cap < expected * 2) cap *= 2;
    this.#keys = new Uint32Array(cap * 4);
    this.#values = new Int32Array(cap);
    this.#mask = cap - 1;
  }

  /** Tuples held. */
  get size(): number {
    return this.#size;
  }

  #find(src: number, dst: number, ports: number, proto: number): number {
    const keys = this.#keys, tag = (proto | 0x100) >>> 0;
    for (let i = hash(src, dst, ports, proto) & this.#mask;; i = (i + 1) & this.#mask) {
      const k = i * 4;
      if (keys[k + 3] === 0) return ~i; // empty: not found, insert here
      if (keys[k] === src && keys[k + 1] === dst && keys[k + 2] === ports && keys[k + 3] === tag) {
        return i;
      }
    }
  }

  /** The value of the tuple, or -1. */
  get(src: number, dst: number, ports: number, proto: number): number {
    const i = this.#find(src >>> 0, dst >>> 0, ports >>> 0, proto);
    return i >= 0 ? this.#values[i]! : -1;
  }

  /**
   * Sets the tuple's value (≥ 0); returns the previous value or -1 when it was absent. An absent
   * tuple is not added when `insert` is false.
   */
  put(
    src: number,
    dst: number,
    ports: number,
    proto: number,
    value: number,
    insert = true,
  ): number {
    src >>>= 0, dst >>>= 0, ports >>>= 0;
    const i = this.#find(src, dst, ports, proto);
    if (i >= 0) {
      const old = this.#values[i]!;
      this.#values[i] = value;
      return old;
    }
    if (!insert) return -1;
    const slot = ~i, k = slot * 4;
    this.#keys[k] = src;
    this.#keys[k + 1] = dst;
    this.#keys[k + 2] = ports;
    this.#keys[k + 3] = (proto | 0x100) >>> 0;
    this.#values[slot] = value;
    if (++this.#size * 2 > this.#mask + 1) this.#grow();
    return -1;
  }

  /** Removes the tuple; false when it was absent. */
  delete(src: number, dst: number, ports: number, proto: number): boolean {
    let i = this.#find(src >>> 0, dst >>> 0, ports >>> 0, proto);
    if (i < 0) return false;
    const keys = this.#keys, values = this.#values, mask = this.#mask;
    // Backward-shift: move later members of the probe run into the hole so lookups stay correct.
    for (let j = (i + 1) & mask;; j = (j + 1) & mask) {
      const kj = j * 4;
      if (keys[kj + 3] === 0) break;
      const home = hash(keys[kj]!, keys[kj + 1]!, keys[kj + 2]!, keys[kj + 3]! & 0xff) & mask;
      // j's entry may move to i unless its home lies cyclically in (i, j].
      const between = i <= j ? home > i && home <= j : home > i || home <= j;
      if (between) continue;
      keys.copyWithin(i * 4, kj, kj + 4);
      values[i] = values[j]!;
      i = j;
    }
    keys.fill(0, i * 4, i * 4 + 4);
    values[i] = 0;
    this.#size--;
    return true;
  }

  /** Calls `fn` for every tuple (do not modify the table meanwhile). */
  forEach(
    fn: (src: number, dst: number, ports: number, proto: number, value: number) => void,
  ): void {
    const keys = this.#keys, values = this.#values;
    for (let i = 0; i <= this.#mask; i++) {
      const k = i * 4;
      if (keys[k + 3] !== 0) {
        fn(keys[k]!, keys[k + 1]!, keys[k + 2]!, keys[k + 3]! & 0xff, values[i]!);
      }
    }
  }

  #grow(): void {
    const oldKeys = this.#keys, oldValues = this.#values;
    const cap = (this.#mask + 1) * 2;
    this.#keys = new Uint32Array(cap * 4);
    this.#values = new Int32Array(cap);
    this.#mask = cap - 1;
    this.#size = 0;
    for (let i = 0; i < oldValues.length; i++) {
      const k = i * 4;
      if (oldKeys[k + 3] === 0) continue;
      this.put(
        oldKeys[k]!,
        oldKeys[k + 1]!,
        oldKeys[k + 2]!,
        oldKeys[k + 3]! & 0xff,
        oldValues[i]!,
      );
    }
  }
}
