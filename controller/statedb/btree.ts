/**
 * A persistent (immutable, structurally shared) B+tree: the storage under every table index.
 *
 * Readers hold a root and never take a lock: nothing reachable from a published root is ever
 * mutated. Writers edit through a {@linkcode BTreeEditor} that owns a fresh token; a node whose
 * `o` is that token was created by this edit and may be changed in place (a "transient"), any
 * other node is copied first. So a write transaction with many inserts copies each touched node
 * once, and the published tree shares every untouched node with the previous one.
 *
 * Entries are (key, value) pairs, plus per entry:
 * - in non-unique trees a tiebreak key `t` (the row's primary key), stored beside the key so
 *   one key may hold many values, ordered by tiebreak, without building composite key strings
 *   and without calling back into row code while comparing;
 * - optionally an `aux` number (the primary index keeps row revisions there).
 *
 * Keys of one tree are all strings or all numbers; they compare with `<`.
 *
 * @module
 */

/** Index keys: strings (addresses, names) or small integers (revisions). */
export type Key = string | number;

/** Maximum entries per node. 32 keeps copy-on-write cheap while the tree stays shallow. */
const MAX = 32;
/** A node with fewer entries than this after a delete is merged with a neighbour if it fits. */
const MIN = 8;

interface Node<V> {
  o: object;
  /** Leaf: entry keys. Inner: separators, `k[i]` a lower bound of child `i + 1`. */
  k: Key[];
  /** Tiebreaks of `k` (non-unique trees), else null. */
  t: Key[] | null;
  /** Leaf values (inner: unused, empty). */
  v: V[];
  /** Leaf aux numbers, if the tree has them. */
  a: number[] | null;
  /** Children (inner nodes), null for leaves. */
  c: Node<V>[] | null;
}

/** Compares keys of the same kind; strings by code unit, numbers numerically. */
export function compareKeys(a: Key, b: Key): number {
  return a === b ? 0 : a < b ? -1 : 1;
}

const FROZEN = Object.freeze({});
/** The (unused) value array of every inner node. Never written. */
// deno-lint-ignore no-explicit-any
const NO_VALUES: any[] = [];

/** Sign of (entry i) − (probe key, probe tiebreak); an undefined tiebreak is below all. */
function cmpAt(ks: Key[], ts: Key[] | null, i: number, key: Key, tb: Key | undefined): number {
  const k = ks[i]!;
  if (k < key) return -1;
  if (k > key) return 1;
  if (ts === null) return 0;
  if (tb === undefined) return 1;
  const t = ts[i]!;
  return t < tb ? -1 : t > tb ? 1 : 0;
}

// The search loops come in a string and a number flavour: a comparison site that only ever sees
// one type compiles to a direct string or integer compare instead of V8's generic `<`.

function lowerStr(ks: string[], ts: Key[] | null, key: string, tb: Key | undefined): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const k = ks[mid]!;
    if (
      k < key ||
      (k === key && ts !== null && tb !== undefined && (ts[mid] as string) < (tb as string))
    ) {
      lo = mid + 1;
    } else hi = mid;
  }
  return lo;
}

function lowerNum(ks: number[], key: number): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ks[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function upperStr(ks: string[], ts: Key[] | null, key: string, tb: Key | undefined): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const k = ks[mid]!;
    // entry ≤ probe
    if (
      k < key ||
      (k === key && (ts === null || (tb !== undefined && (ts[mid] as string) <= (tb as string))))
    ) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function upperNum(ks: number[], key: number): number {
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ks[mid]! <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index whose entry is ≥ the probe. */
function lowerIndex(ks: Key[], ts: Key[] | null, key: Key, tb: Key | undefined): number {
  if (typeof key === "string") return lowerStr(ks as string[], ts, key, tb);
  if (ts === null) return lowerNum(ks as number[], key);
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cmpAt(ks, ts, mid, key, tb) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Number of separators ≤ the probe: the child that may hold it. */
function upperIndex(ks: Key[], ts: Key[] | null, key: Key, tb: Key | undefined): number {
  if (typeof key === "string") return upperStr(ks as string[], ts, key, tb);
  if (ts === null) return upperNum(ks as number[], key);
  let lo = 0, hi = ks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cmpAt(ks, ts, mid, key, tb) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** `arr.splice(i, 0, x)` without the builtin's overhead (small arrays). */
function insertAt<T>(arr: T[], i: number, x: T): void {
  let j = arr.length;
  arr.push(x);
  for (; j > i; j--) arr[j] = arr[j - 1]!;
  arr[i] = x;
}

/** A copy of `arr` with `x` inserted at `i`, allocated at its exact size. */
function insertCopy<T>(arr: T[], i: number, x: T): T[] {
  const n = arr.length;
  const out = new Array<T>(n + 1);
  for (let j = 0; j < i; j++) out[j] = arr[j]!;
  out[i] = x;
  for (let j = i; j < n; j++) out[j + 1] = arr[j]!;
  return out;
}

/** `arr.splice(i, 1)` for small arrays. */
function removeAt<T>(arr: T[], i: number): void {
  const n = arr.length - 1;
  for (let j = i; j < n; j++) arr[j] = arr[j + 1]!;
  arr.length = n;
}

function findLeaf<V>(root: Node<V>, key: Key, tb: Key | undefined): Node<V> {
  let n = root;
  while (n.c !== null) n = n.c[upperIndex(n.k, n.t, key, tb)]!;
  return n;
}

/** An immutable B+tree. Create with {@linkcode BTree.empty}, change with {@linkcode BTree.edit}. */
export class BTree<V> {
  /** @internal */
  readonly root: Node<V>;
  /** Number of entries. */
  readonly size: number;
  /** Whether entries carry a tiebreak (non-unique index). */
  readonly multi: boolean;
  /** Whether entries carry an `aux` number. */
  readonly hasAux: boolean;

  /** @internal */
  constructor(root: Node<V>, size: number, multi: boolean, hasAux: boolean) {
    this.root = root;
    this.size = size;
    this.multi = multi;
    this.hasAux = hasAux;
  }

  /**
   * An empty tree. `unique: false` makes a non-unique tree whose entries carry a tiebreak;
   * `aux` gives entries a number beside the value.
   */
  static empty<V>(options: { unique?: boolean; aux?: boolean } = {}): BTree<V> {
    const aux = options.aux ?? false, multi = options.unique === false;
    const leaf: Node<V> = {
      o: FROZEN,
      k: [],
      t: multi ? [] : null,
      v: [],
      a: aux ? [] : null,
      c: null,
    };
    return new BTree(leaf, 0, multi, aux);
  }

  /** Starts an edit; the returned editor mutates only nodes it created. */
  edit(): BTreeEditor<V> {
    return new BTreeEditor(this);
  }

  /** The value of the entry (key, tiebreak) (tiebreak omitted: the first of `key`). */
  get(key: Key, tb?: Key): V | undefined {
    const leaf = findLeaf(this.root, key, tb);
    const i = lowerIndex(leaf.k, leaf.t, key, tb);
    if (
      i < leaf.k.length && leaf.k[i] === key &&
      (tb === undefined || leaf.t === null || leaf.t[i] === tb)
    ) {
      return leaf.v[i];
    }
    return undefined;
  }

  /** The aux number of the entry `key` (unique trees), or -1 if absent. */
  getAux(key: Key): number {
    const leaf = findLeaf(this.root, key, undefined);
    const i = lowerIndex(leaf.k, leaf.t, key, undefined);
    if (i < leaf.k.length && leaf.k[i] === key) return leaf.a === null ? 0 : leaf.a[i]!;
    return -1;
  }

  /**
   * Calls `fn(key, value, aux)` for entries from the first one ≥ (from, tb) onwards (from the
   * start when `from` is undefined) until `fn` returns `false`.
   */
  scan(fn: (k: Key, v: V, a: number) => boolean | void, from?: Key, tb?: Key): void {
    const stack: Node<V>[] = [];
    const idx: number[] = [];
    let node = this.root;
    while (node.c !== null) {
      const i = from === undefined ? 0 : upperIndex(node.k, node.t, from, tb);
      stack.push(node);
      idx.push(i);
      node = node.c[i]!;
    }
    let leaf = node;
    let i = from === undefined ? 0 : lowerIndex(leaf.k, leaf.t, from, tb);
    for (;;) {
      const k = leaf.k, v = leaf.v, a = leaf.a;
      for (; i < k.length; i++) {
        if (fn(k[i]!, v[i]!, a === null ? 0 : a[i]!) === false) return;
      }
      let d = stack.length - 1;
      while (d >= 0 && idx[d]! + 1 >= stack[d]!.c!.length) d--;
      if (d < 0) return;
      stack.length = d + 1;
      idx.length = d + 1;
      idx[d]!++;
      let n = stack[d]!.c![idx[d]!]!;
      while (n.c !== null) {
        stack.push(n);
        idx.push(0);
        n = n.c[0]!;
      }
      leaf = n;
      i = 0;
    }
  }

  /**
   * Appends to `out` the values of every entry whose key equals `key` (all tiebreaks, in
   * order), at most `limit` of them; the closure-free twin of `scan` for the commonest query.
   */
  collect(key: Key, out: V[], limit = Infinity): V[] {
    let node = this.root;
    const stack: Node<V>[] = [];
    const idx: number[] = [];
    while (node.c !== null) {
      const i = upperIndex(node.k, node.t, key, undefined);
      stack.push(node);
      idx.push(i);
      node = node.c[i]!;
    }
    let i = lowerIndex(node.k, node.t, key, undefined);
    for (;;) {
      const k = node.k, v = node.v;
      for (; i < k.length; i++) {
        if (k[i] !== key || out.length >= limit) return out;
        out.push(v[i]!);
      }
      let d = stack.length - 1;
      while (d >= 0 && idx[d]! + 1 >= stack[d]!.c!.length) d--;
      if (d < 0) return out;
      stack.length = d + 1;
      idx.length = d + 1;
      idx[d]!++;
      let n = stack[d]!.c![idx[d]!]!;
      while (n.c !== null) {
        stack.push(n);
        idx.push(0);
        n = n.c[0]!;
      }
      node = n;
      i = 0;
    }
  }

  /** Values in order (allocates an array). */
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
  readonly #multi: boolean;
  readonly #aux: boolean;
  #tok: object = {};
  #finished = false;
  /** Aux number of the entry the last `set` replaced or `delete` removed. */
  oldAux = 0;
  #old: V | undefined = undefined;
  #found = false;
  /** Owned nodes that grew in place; their arrays are trimmed to size when published. */
  readonly #slack = new Set<Node<V>>();
  /** The last `view()`, valid while no `set`/`delete` happened since (reads in a write txn). */
  #view: BTree<V> | null = null;
  /**
   * The leaf the last `set` wrote (owned by this edit, so linked into the current tree until a
   * delete, which may merge it away, clears this). A key strictly between its first and last
   * entries belongs there: clustered inserts (one service's backends) skip the descent.
   */
  #finger: Node<V> | null = null;

  constructor(tree: BTree<V>) {
    this.#root = tree.root;
    this.#size = tree.size;
    this.#multi = tree.multi;
    this.#aux = tree.hasAux;
  }

  /** Current number of entries. */
  get size(): number {
    return this.#size;
  }

  /** A read-only snapshot of the current state (later edits will not change it). */
  snapshot(): BTree<V> {
    const t = new BTree(this.#root, this.#size, this.#multi, this.#aux);
    // A fresh owner: nodes created so far are now shared with the snapshot and copied on write.
    this.#tok = {};
    return t;
  }

  /**
   * The current state for reading inside the edit, without copying. Valid only until the next
   * `set`/`delete`: do not write while scanning it.
   */
  view(): BTree<V> {
    const v = this.#view;
    if (v !== null && v.root === this.#root && v.size === this.#size) return v;
    return this.#view = new BTree(this.#root, this.#size, this.#multi, this.#aux);
  }

  /** Inserts or replaces (key, tiebreak); returns the value replaced, if any (aux in `oldAux`). */
  set(key: Key, value: V, aux = 0, tb?: Key): V | undefined {
    if (this.#finished) throw new Error("BTreeEditor used after done()");
    if (this.#multi && tb === undefined) {
      throw new Error("Non-unique BTree entries need a tiebreak");
    }
    this.#found = false;
    this.#old = undefined;
    const f = this.#finger;
    if (f !== null && f.o === this.#tok && f.k.length < MAX) {
      const ks = f.k, ts = f.t, last = ks.length - 1;
      if (last > 0 && cmpAt(ks, ts, 0, key, tb) < 0 && cmpAt(ks, ts, last, key, tb) > 0) {
        const i = lowerIndex(ks, ts, key, tb);
        if (cmpAt(ks, ts, i, key, tb) === 0) {
          const old = f.v[i];
          if (f.a !== null) {
            this.oldAux = f.a[i]!;
            f.a[i] = aux;
          }
          f.v[i] = value;
          return old;
        }
        insertAt(ks, i, key);
        if (ts !== null) insertAt(ts, i, tb!);
        insertAt(f.v, i, value);
        if (f.a !== null) insertAt(f.a, i, aux);
        this.#slack.add(f);
        this.#size++;
        return undefined;
      }
    }
    const r = this.#insert(this.#root, key, value, aux, tb);
    if (Array.isArray(r)) {
      const [left, sepK, sepT, right] = r;
      this.#root = {
        o: this.#tok,
        k: [sepK],
        t: this.#multi ? [sepT!] : null,
        v: NO_VALUES,
        a: null,
        c: [left, right],
      };
    } else this.#root = r;
    if (!this.#found) this.#size++;
    return this.#old;
  }

  /** Removes the entry (key, tiebreak); returns the removed value, if any (aux in `oldAux`). */
  delete(key: Key, tb?: Key): V | undefined {
    if (this.#finished) throw new Error("BTreeEditor used after done()");
    this.#found = false;
    this.#old = undefined;
    this.#finger = null;
    const r = this.#remove(this.#root, key, tb);
    if (!this.#found) return undefined;
    let root = r ?? this.#emptyLeaf();
    while (root.c !== null && root.c.length === 1) root = root.c[0]!;
    this.#root = root;
    this.#size--;
    return this.#old;
  }

  /** Publishes the edited tree; the editor must not be used afterwards. */
  done(): BTree<V> {
    this.#finished = true;
    // Nodes that grew in place carry array slack (V8 grows capacity by ~1.5×); published nodes
    // live long, so give those exact-size arrays. Nodes copied once are exact already.
    for (const n of this.#slack) {
      n.k = n.k.slice();
      if (n.t !== null) n.t = n.t.slice();
      if (n.c === null) n.v = n.v.slice();
      else n.c = n.c.slice();
      if (n.a !== null) n.a = n.a.slice();
    }
    this.#slack.clear();
    return new BTree(this.#root, this.#size, this.#multi, this.#aux);
  }

  #emptyLeaf(): Node<V> {
    return {
      o: this.#tok,
      k: [],
      t: this.#multi ? [] : null,
      v: [],
      a: this.#aux ? [] : null,
      c: null,
    };
  }

  #own(n: Node<V>): Node<V> {
    if (n.o === this.#tok) return n;
    return {
      o: this.#tok,
      k: n.k.slice(),
      t: n.t === null ? null : n.t.slice(),
      v: n.c === null ? n.v.slice() : n.v,
      a: n.a === null ? null : n.a.slice(),
      c: n.c === null ? null : n.c.slice(),
    };
  }

  /**
   * Inserts below `node`; returns the node for the parent's slot (the same one, or a copy), or
   * a split [left, separator key, separator tiebreak, right].
   */
  #insert(
    node: Node<V>,
    key: Key,
    value: V,
    aux: number,
    tb: Key | undefined,
  ): Node<V> | [Node<V>, Key, Key | undefined, Node<V>] {
    if (node.c === null) {
      const i = lowerIndex(node.k, node.t, key, tb);
      if (i < node.k.length && cmpAt(node.k, node.t, i, key, tb) === 0) {
        this.#found = true;
        this.#old = node.v[i];
        if (node.a !== null) this.oldAux = node.a[i]!;
        const n = this.#own(node);
        n.v[i] = value;
        n.k[i] = key;
        if (n.a !== null) n.a[i] = aux;
        this.#finger = n;
        return n;
      }
      let n: Node<V>;
      if (node.o === this.#tok) {
        n = node;
        insertAt(n.k, i, key);
        if (n.t !== null) insertAt(n.t, i, tb!);
        insertAt(n.v, i, value);
        if (n.a !== null) insertAt(n.a, i, aux);
        this.#slack.add(n);
      } else {
        // First touch in this edit: copy with the entry in place, exact size.
        n = {
          o: this.#tok,
          k: insertCopy(node.k, i, key),
          t: node.t === null ? null : insertCopy(node.t, i, tb!),
          v: insertCopy(node.v, i, value),
          a: node.a === null ? null : insertCopy(node.a, i, aux),
          c: null,
        };
      }
      this.#finger = n;
      if (n.k.length <= MAX) return n;
      // Appending (ascending keys such as revisions): keep the left node full.
      const h = i === n.k.length - 1 ? MAX : n.k.length >> 1;
      const right: Node<V> = {
        o: this.#tok,
        k: n.k.slice(h),
        t: n.t === null ? null : n.t.slice(h),
        v: n.v.slice(h),
        a: n.a === null ? null : n.a.slice(h),
        c: null,
      };
      n.k.length = h;
      if (n.t !== null) n.t.length = h;
      n.v.length = h;
      if (n.a !== null) n.a.length = h;
      this.#slack.add(n);
      return [n, right.k[0]!, right.t === null ? undefined : right.t[0], right];
    }
    const ci = upperIndex(node.k, node.t, key, tb);
    const r = this.#insert(node.c[ci]!, key, value, aux, tb);
    if (!Array.isArray(r)) {
      if (r === node.c[ci]) return node;
      const n = this.#own(node);
      n.c![ci] = r;
      return n;
    }
    const [left, sepK, sepT, right] = r;
    const n = this.#own(node);
    const c = n.c!;
    c[ci] = left;
    insertAt(c, ci + 1, right);
    insertAt(n.k, ci, sepK);
    if (n.t !== null) insertAt(n.t, ci, sepT!);
    this.#slack.add(n);
    if (c.length <= MAX) return n;
    // Split an inner node: the middle separator moves up (the last one when appending).
    const h = ci + 2 === c.length ? MAX : c.length >> 1;
    const upK = n.k[h - 1]!, upT = n.t === null ? undefined : n.t[h - 1];
    const rightN: Node<V> = {
      o: this.#tok,
      k: n.k.slice(h),
      t: n.t === null ? null : n.t.slice(h),
      v: NO_VALUES,
      a: null,
      c: c.slice(h),
    };
    n.k.length = h - 1;
    if (n.t !== null) n.t.length = h - 1;
    c.length = h;
    return [n, upK, upT, rightN];
  }

  /** `node` is owned by the caller's path (copied on the way down only when something changes). */
  #remove(node: Node<V>, key: Key, tb: Key | undefined): Node<V> | null {
    if (node.c === null) {
      const i = lowerIndex(node.k, node.t, key, tb);
      if (i >= node.k.length || cmpAt(node.k, node.t, i, key, tb) !== 0) return node;
      this.#found = true;
      this.#old = node.v[i];
      if (node.a !== null) this.oldAux = node.a[i]!;
      if (node.k.length === 1) return null;
      const n = this.#own(node);
      removeAt(n.k, i);
      if (n.t !== null) removeAt(n.t, i);
      removeAt(n.v, i);
      if (n.a !== null) removeAt(n.a, i);
      return n;
    }
    const ci = upperIndex(node.k, node.t, key, tb);
    const r = this.#remove(node.c[ci]!, key, tb);
    if (!this.#found) return node;
    const n = this.#own(node);
    if (r === null) {
      n.c!.splice(ci, 1);
      if (n.c!.length === 0) return null;
      // Drop the separator that bounded the removed child (or the next one for child 0).
      const si = ci === 0 ? 0 : ci - 1;
      n.k.splice(si, 1);
      if (n.t !== null) n.t.splice(si, 1);
      return n;
    }
    n.c![ci] = r;
    if ((r.c === null ? r.k.length : r.c.length) < MIN && n.c!.length > 1) this.#merge(n, ci);
    return n;
  }

  /** Merges child `ci` of `n` with a neighbour when both fit into one node. */
  #merge(n: Node<V>, ci: number): void {
    const c = n.c!;
    const li = ci > 0 ? ci - 1 : ci;
    const left = c[li]!, right = c[li + 1]!;
    const len = (x: Node<V>) => (x.c === null ? x.k.length : x.c.length);
    if (len(left) + len(right) > MAX) return;
    let merged: Node<V>;
    if (left.c === null) {
      merged = {
        o: this.#tok,
        k: left.k.concat(right.k),
        t: left.t === null ? null : left.t.concat(right.t!),
        v: left.v.concat(right.v),
        a: left.a === null ? null : left.a.concat(right.a!),
        c: null,
      };
    } else {
      merged = {
        o: this.#tok,
        k: left.k.concat([n.k[li]!], right.k),
        t: left.t === null ? null : left.t.concat([n.t![li]!], right.t!),
        v: NO_VALUES,
        a: null,
        c: left.c.concat(right.c!),
      };
    }
    c.splice(li, 2, merged);
    n.k.splice(li, 1);
    if (n.t !== null) n.t.splice(li, 1);
  }
}
