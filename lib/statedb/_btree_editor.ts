/**
 * The B+tree editor: inserts and deletes on transient copies of the nodes they touch, and
 * publishes the result as a new {@linkcode BTree}.
 *
 * @module
 */

import { BTree } from "./btree.ts";
import {
  copyNode,
  emptyLeaf,
  insertAt,
  insertCopy,
  MAX,
  mergeNodes,
  MIN,
  NO_VALUES,
  type Node,
  nodeLength,
  removeAt,
} from "./_btree_node.ts";
import { cmpAt, type Key, lowerIndex, upperIndex } from "./_btree_search.ts";

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

  /** Starts editing `tree` (which stays unchanged). */
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
    let root = r ?? emptyLeaf<V>(this.#tok, this.#multi, this.#aux);
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

  #own(n: Node<V>): Node<V> {
    return n.o === this.#tok ? n : copyNode(n, this.#tok);
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
    if (nodeLength(r) < MIN && n.c!.length > 1) this.#merge(n, ci);
    return n;
  }

  /** Merges child `ci` of `n` with a neighbour when both fit into one node. */
  #merge(n: Node<V>, ci: number): void {
    const c = n.c!;
    const li = ci > 0 ? ci - 1 : ci;
    const left = c[li]!, right = c[li + 1]!;
    if (nodeLength(left) + nodeLength(right) > MAX) return;
    const sepT = n.t === null ? undefined : n.t[li];
    c.splice(li, 2, mergeNodes(left, right, n.k[li]!, sepT, this.#tok));
    n.k.splice(li, 1);
    if (n.t !== null) n.t.splice(li, 1);
  }
}
