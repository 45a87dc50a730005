/**
 * A persistent (immutable, structurally shared) B+tree: the storage under every table index.
 *
 * Readers hold a root and never take a lock: nothing reachable from a published root is ever
 * mutated. Writers edit through a {@linkcode BTreeEditor} that owns a fresh token; a node whose
 * `o` is that token was created by this edit and may be changed in place (a "transient"), any
 * other node is copied first. So a write transaction with many inserts copies each touched node
 * once, and the published tree shares every untouched node with the previous one.
 *
 * Entries are (key, value, aux) triples sorted by a comparator over (key, value): unique indexes
 * compare keys only; non-unique indexes break ties by the value's primary key, so a key may map
 * to many values without building composite key strings (which would cost memory per row).
 * `aux` is an optional parallel number array (the primary index keeps row revisions in it).
 *
 * @module
 */

/** Index keys: strings (addresses, names) or small integers (revisions). */
export type Key = string | number;

/** Orders (key, value) pairs; a `value` of `undefined` sorts before every value of that key. */
export type Compare<V> = (ak: Key, av: V | undefined, bk: Key, bv: V | undefined) => number;

/** Maximum entries per node. 32 keeps copy-on-write cheap while the tree stays shallow. */
const MAX = 32;
/** A node with fewer entries than this after a delete is merged with a neighbour if it fits. */
const MIN = 8;

interface Leaf<V> {
  o: object;
  k: Key[];
  v: V[];
  a: number[] | null;
  c: null;
}
interface Inner<V> {
  o: object;
  /** Separators: `k[i]`/`v[i]` is a lower bound of child `i + 1`. */
  k: Key[];
  v: V[];
  a: null;
  c: Node<V>[];
}
type Node<V> = Leaf<V> | Inner<V>;

/** Compares keys of the same kind; strings by code unit, numbers numerically. */
export function compareKeys(a: Key, b: Key): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Comparator for unique indexes: keys only. */
export function uniqueCompare<V>(ak: Key, _av: V | undefined, bk: Key, _bv: V | undefined): number {
  return compareKeys(ak, bk);
}

/** Comparator for non-unique indexes: key, then the value's tiebreak (its primary key). */
export function nonUniqueCompare<V>(tiebreak: (v: V) => Key): Compare<V> {
  return (ak, av, bk, bv) => {
    const c = compareKeys(ak, bk);
    if (c !== 0) return c;
    if (av === undefined) return bv === undefined ? 0 : -1;
    if (bv === undefined) return 1;
    return compareKeys(tiebreak(av), tiebreak(bv));
  };
}

const FROZEN = Object.freeze({});

/** An immutable B+tree. Create with {@linkcode BTree.empty}, change with {@linkcode BTree.edit}. */
export class BTree<V> {
  /** @internal */
  readonly root: Node<V>;
  /** Number of entries. */
  readonly size: number;
  /** The comparator entries are sorted by. */
  readonly cmp: Compare<V>;
  /** Whether entries carry an `aux` number. */
  readonly hasAux: boolean;

  /** @internal */
  constructor(root: Node<V>, size: number, cmp: Compare<V>, hasAux: boolean) {
    this.root = root;
    this.size = size;
    this.cmp = cmp;
    this.hasAux = hasAux;
  }

  /** An empty tree ordered by `cmp`; `aux` says whether entries carry a number beside the value. */
  static empty<V>(cmp: Compare<V>, options: { aux?: boolean } = {}): BTree<V> {
    const aux = options.aux ?? false;
    const leaf: Leaf<V> = { o: FROZEN, k: [], v: [], a: aux ? [] : null, c: null };
    return new BTree(leaf, 0, cmp, aux);
  }

  /** Starts an edit; the returned editor mutates only nodes it created. */
  edit(): BTreeEditor<V> {
    return new BTreeEditor(this);
  }

  /** Finds the entry equal to (key, value) (value omitted for unique trees). */
  find(key: Key, value?: V): { value: V; aux: number } | undefined {
    const leaf = findLeaf(this.root, key, value, this.cmp);
    const i = lowerIndex(leaf.k, leaf.v, leaf.k.length, key, value, this.cmp);
    if (i < leaf.k.length && this.cmp(key, value, leaf.k[i]!, leaf.v[i]) === 0) {
      return { value: leaf.v[i]!, aux: leaf.a ? leaf.a[i]! : 0 };
    }
    return undefined;
  }

  /** The value stored under `key` in a unique tree. */
  get(key: Key): V | undefined {
    const leaf = findLeaf(this.root, key, undefined, this.cmp);
    const i = lowerIndex(leaf.k, leaf.v, leaf.k.length, key, undefined, this.cmp);
    if (i < leaf.k.length && compareKeys(leaf.k[i]!, key) === 0) return leaf.v[i];
    return undefined;
  }

  /**
   * Calls `fn(key, value, aux)` for entries from the first one ≥ (key, value) onwards (from the
   * start when `key` is undefined) until `fn` returns `false`.
   */
  scan(fn: (k: Key, v: V, a: number) => boolean | void, from?: Key, value?: V): void {
    const stack: { n: Inner<V>; i: number }[] = [];
    let node = this.root;
    while (node.c !== null) {
      const i = from === undefined ? 0 : upperIndex(node.k, node.v, from, value, this.cmp);
      stack.push({ n: node, i });
      node = node.c[i]!;
    }
    let leaf: Leaf<V> = node;
    let i = from === undefined ? 0 : lowerIndex(leaf.k, leaf.v, leaf.k.length, from, value, this.cmp);
    for (;;) {
      const k = leaf.k, v = leaf.v, a = leaf.a;
      for (; i < k.length; i++) {
        if (fn(k[i]!, v[i]!, a ? a[i]! : 0) === false) return;
      }
      // Climb to the next subtree to the right.
      let top = stack[stack.length - 1];
      while (top !== undefined && top.i + 1 >= top.n.c.length) {
        stack.pop();
        top = stack[stack.length - 1];
      }
      if (top === undefined) return;
      top.i++;
      let n: Node<V> = top.n.c[top.i]!;
      while (n.c !== null) {
        stack.push({ n, i: 0 });
        n = n.c[0]!;
      }
      leaf = n;
      i = 0;
    }
  }

  /** Values in order (allocates an array; for tests and small tables). */
  values(): V[] {
    const out: V[] = [];
    this.scan((_k, v) => {
      out.push(v);
    });
    return out;
  }
}

/** A mutable view over a tree; {@linkcode BTreeEditor.done} publishes the result. */
export class BTreeEditor<V> {
  #root: Node<V>;
  #size: number;
  readonly #cmp: Compare<V>;
  readonly #aux: boolean;
  #tok: object = {};
  #finished = false;

  constructor(tree: BTree<V>) {
    this.#root = tree.root;
    this.#size = tree.size;
    this.#cmp = tree.cmp;
    this.#aux = tree.hasAux;
  }

  /** Current number of entries. */
  get size(): number {
    return this.#size;
  }

  /** A read-only snapshot of the current state (later edits will not change it). */
  snapshot(): BTree<V> {
    // Handing out the root means no node reachable from it may be mutated again.
    const t = new BTree(this.#root, this.#size, this.#cmp, this.#aux);
    this.#retire();
    return t;
  }

  /**
   * The current state for reading inside the edit, without copying. Valid only until the next
   * `set`/`delete`: do not write while scanning it.
   */
  view(): BTree<V> {
    return new BTree(this.#root, this.#size, this.#cmp, this.#aux);
  }

  /** Inserts or replaces (key, value); returns the value replaced, if any. */
  set(key: Key, value: V, aux = 0): V | undefined {
    this.#check();
    const out: { old: V | undefined } = { old: undefined };
    const r = this.#insert(this.#root, key, value, aux, out);
    if (Array.isArray(r)) {
      const [left, sepK, sepV, right] = r;
      this.#root = { o: this.#tok, k: [sepK], v: [sepV], a: null, c: [left, right] };
    } else {
      this.#root = r;
    }
    if (out.old === undefined) this.#size++;
    return out.old;
  }

  /** Removes the entry equal to (key, value); returns the removed value, if any. */
  delete(key: Key, value?: V): V | undefined {
    this.#check();
    const out: { old: V | undefined } = { old: undefined };
    const r = this.#remove(this.#root, key, value, out);
    if (out.old === undefined) return undefined;
    let root = r ?? this.#emptyLeaf();
    while (root.c !== null && root.c.length === 1) root = root.c[0]!;
    this.#root = root;
    this.#size--;
    return out.old;
  }

  /** Publishes the edited tree; the editor must not be used afterwards. */
  done(): BTree<V> {
    const t = new BTree(this.#root, this.#size, this.#cmp, this.#aux);
    this.#finished = true;
    return t;
  }

  #retire(): void {
    // A fresh owner: nodes created so far are now shared with a snapshot and are copied on write.
    this.#tok = {};
  }

  #check(): void {
    if (this.#finished) throw new Error("BTreeEditor used after done()");
  }

  #emptyLeaf(): Leaf<V> {
    return { o: this.#tok, k: [], v: [], a: this.#aux ? [] : null, c: null };
  }

  #own<N extends Node<V>>(n: N): N {
    if (n.o === this.#tok) return n;
    return {
      o: this.#tok,
      k: n.k.slice(),
      v: n.v.slice(),
      a: n.a === null ? null : n.a.slice(),
      c: n.c === null ? null : n.c.slice(),
    } as N;
  }

  #insert(
    node: Node<V>,
    key: Key,
    value: V,
    aux: number,
    out: { old: V | undefined },
  ): Node<V> | [Node<V>, Key, V, Node<V>] {
    const cmp = this.#cmp;
    if (node.c === null) {
      const len = node.k.length;
      const i = lowerIndex(node.k, node.v, len, key, value, cmp);
      if (i < len && cmp(key, value, node.k[i]!, node.v[i]) === 0) {
        out.old = node.v[i];
        const n = this.#own(node);
        n.k[i] = key;
        n.v[i] = value;
        if (n.a !== null) n.a[i] = aux;
        return n;
      }
      let n: Leaf<V>;
      if (node.o === this.#tok) {
        n = node;
        n.k.splice(i, 0, key);
        n.v.splice(i, 0, value);
        if (n.a !== null) n.a.splice(i, 0, aux);
      } else {
        // Copy with the new entry in place: exact-size arrays, no splice over-allocation.
        n = {
          o: this.#tok,
          k: insertCopy(node.k, i, key),
          v: insertCopy(node.v, i, value),
          a: node.a === null ? null : insertCopy(node.a, i, aux),
          c: null,
        };
      }
      if (n.k.length <= MAX) return n;
      const h = n.k.length >> 1;
      const right: Leaf<V> = {
        o: this.#tok,
        k: n.k.slice(h),
        v: n.v.slice(h),
        a: n.a === null ? null : n.a.slice(h),
        c: null,
      };
      const left: Leaf<V> = {
        o: this.#tok,
        k: n.k.slice(0, h),
        v: n.v.slice(0, h),
        a: n.a === null ? null : n.a.slice(0, h),
        c: null,
      };
      return [left, right.k[0]!, right.v[0]!, right];
    }
    const ci = upperIndex(node.k, node.v, key, value, cmp);
    const r = this.#insert(node.c[ci]!, key, value, aux, out);
    if (!Array.isArray(r)) {
      if (r === node.c[ci]) return node;
      const n = this.#own(node);
      n.c[ci] = r;
      return n;
    }
    const [left, sepK, sepV, right] = r;
    const n = this.#own(node);
    n.c[ci] = left;
    n.c.splice(ci + 1, 0, right);
    n.k.splice(ci, 0, sepK);
    n.v.splice(ci, 0, sepV);
    if (n.c.length <= MAX) return n;
    // Split an inner node: the middle separator moves up.
    const h = n.c.length >> 1;
    const upK = n.k[h - 1]!, upV = n.v[h - 1]!;
    const rightN: Inner<V> = { o: this.#tok, k: n.k.slice(h), v: n.v.slice(h), a: null, c: n.c.slice(h) };
    const leftN: Inner<V> = {
      o: this.#tok,
      k: n.k.slice(0, h - 1),
      v: n.v.slice(0, h - 1),
      a: null,
      c: n.c.slice(0, h),
    };
    return [leftN, upK, upV, rightN];
  }

  /** Returns the new node, `null` if it became empty, or the same node if nothing was found. */
  #remove(node: Node<V>, key: Key, value: V | undefined, out: { old: V | undefined }): Node<V> | null {
    const cmp = this.#cmp;
    if (node.c === null) {
      const len = node.k.length;
      const i = lowerIndex(node.k, node.v, len, key, value, cmp);
      if (i >= len || cmp(key, value, node.k[i]!, node.v[i]) !== 0) return node;
      out.old = node.v[i];
      if (len === 1) return null;
      const n = this.#own(node);
      n.k.splice(i, 1);
      n.v.splice(i, 1);
      if (n.a !== null) n.a.splice(i, 1);
      return n;
    }
    const ci = upperIndex(node.k, node.v, key, value, cmp);
    const child = node.c[ci]!;
    const r = this.#remove(child, key, value, out);
    if (out.old === undefined) return node;
    const n = this.#own(node);
    if (r === null) {
      n.c.splice(ci, 1);
      if (n.c.length === 0) return null;
      // Drop the separator that bounded the removed child (or the next one for child 0).
      const si = ci === 0 ? 0 : ci - 1;
      n.k.splice(si, 1);
      n.v.splice(si, 1);
      return n;
    }
    n.c[ci] = r;
    if (nodeLen(r) < MIN && n.c.length > 1) this.#merge(n, ci);
    return n;
  }

  /** Merges child `ci` of `n` with a neighbour when both fit into one node. */
  #merge(n: Inner<V>, ci: number): void {
    const li = ci > 0 ? ci - 1 : ci;
    const left = n.c[li]!, right = n.c[li + 1]!;
    if (nodeLen(left) + nodeLen(right) > MAX) return;
    let merged: Node<V>;
    if (left.c === null && right.c === null) {
      merged = {
        o: this.#tok,
        k: left.k.concat(right.k),
        v: left.v.concat(right.v),
        a: left.a === null ? null : left.a.concat(right.a!),
        c: null,
      };
    } else {
      const l = left as Inner<V>, r = right as Inner<V>;
      merged = {
        o: this.#tok,
        k: l.k.concat([n.k[li]!], r.k),
        v: l.v.concat([n.v[li]!], r.v),
        a: null,
        c: l.c.concat(r.c),
      };
    }
    n.c.splice(li, 2, merged);
    n.k.splice(li, 1);
    n.v.splice(li, 1);
  }
}

function nodeLen<V>(n: Node<V>): number {
  return n.c === null ? n.k.length : n.c.length;
}

function insertCopy<T>(arr: T[], i: number, x: T): T[] {
  const len = arr.length;
  const out = new Array<T>(len + 1);
  for (let j = 0; j < i; j++) out[j] = arr[j]!;
  out[i] = x;
  for (let j = i; j < len; j++) out[j + 1] = arr[j]!;
  return out;
}

/** First index whose entry is ≥ (key, value). */
function lowerIndex<V>(
  ks: Key[],
  vs: V[],
  len: number,
  key: Key,
  value: V | undefined,
  cmp: Compare<V>,
): number {
  let lo = 0, hi = len;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cmp(ks[mid]!, vs[mid], key, value) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Number of separators ≤ (key, value): the child that may hold it. */
function upperIndex<V>(ks: Key[], vs: V[], key: Key, value: V | undefined, cmp: Compare<V>): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cmp(ks[mid]!, vs[mid], key, value) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function findLeaf<V>(root: Node<V>, key: Key, value: V | undefined, cmp: Compare<V>): Leaf<V> {
  let n = root;
  while (n.c !== null) n = n.c[upperIndex(n.k, n.v, key, value, cmp)]!;
  return n;
}
