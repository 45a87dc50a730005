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
 * This file is the read side; the editor is in `_btree_editor.ts`, nodes in `_btree_node.ts`,
 * key search in `_btree_search.ts`.
 *
 * @example
 * ```ts
 * import { BTree } from "./btree.ts";
 * const ed = BTree.empty<string>().edit();
 * ed.set("b", "B");
 * ed.set("a", "A");
 * const tree = ed.done();
 * console.assert(tree.get("a") === "A" && tree.values().join() === "A,B");
 * ```
 *
 * @module
 */

import { BTreeEditor } from "./_btree_editor.ts";
import { descend, emptyLeaf, findLeaf, FROZEN, nextLeaf, type Node } from "./_btree_node.ts";
import { type Key, lowerIndex } from "./_btree_search.ts";

export { BTreeEditor } from "./_btree_editor.ts";
export { compareKeys, type Key } from "./_btree_search.ts";

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
    return new BTree(emptyLeaf<V>(FROZEN, multi, aux), 0, multi, aux);
  }

  /** Starts an edit; the returned editor mutates only nodes it created. */
  edit(): BTreeEditor<V> {
    return new BTreeEditor(this);
  }

  /** The value of the entry (key, tiebreak) (tiebreak omitted: the first of `key`). */
  get(key: Key, tb?: Key): V | undefined {
    // The descent stops before every entry of `key`; in a non-unique tree they may begin in
    // the next leaf, which `collect` walks on to.
    if (tb === undefined && this.multi) return this.collect(key, [], 1)[0];
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
    let leaf: Node<V> | null = descend(this.root, from, tb, stack, idx);
    let i = from === undefined ? 0 : lowerIndex(leaf.k, leaf.t, from, tb);
    // Bounded: each turn moves to the next leaf, and there are finitely many.
    while (leaf !== null) {
      const k = leaf.k, v = leaf.v, a = leaf.a;
      for (; i < k.length; i++) {
        if (fn(k[i]!, v[i]!, a === null ? 0 : a[i]!) === false) return;
      }
      leaf = nextLeaf(stack, idx);
      i = 0;
    }
  }

  /**
   * Appends to `out` the values of every entry whose key equals `key` (all tiebreaks, in
   * order), at most `limit` of them; the closure-free twin of `scan` for the commonest query.
   */
  collect(key: Key, out: V[], limit = Infinity): V[] {
    // Most queries end inside the leaf they start in: walk it with no descent stack, and
    // descend again with one only when the matches run on to the leaf's end (a stack per call
    // was ~2.8 KB allocated per service in bench:control-plane).
    const first = findLeaf(this.root, key, undefined);
    const k0 = first.k, v0 = first.v, start = out.length;
    for (let j = lowerIndex(k0, first.t, key, undefined); j < k0.length; j++) {
      if (k0[j] !== key || out.length >= limit) return out;
      out.push(v0[j]!);
    }
    if (out.length >= limit) return out;
    return this.#collectFrom(key, out, limit, out.length - start);
  }

  /** `collect` across leaves, skipping the `skip` matches already in `out`. */
  #collectFrom(key: Key, out: V[], limit: number, skip: number): V[] {
    const stack: Node<V>[] = [];
    const idx: number[] = [];
    let leaf: Node<V> | null = descend(this.root, key, undefined, stack, idx);
    let i = lowerIndex(leaf.k, leaf.t, key, undefined);
    while (leaf !== null) {
      const k = leaf.k, v = leaf.v;
      for (; i < k.length; i++) {
        if (k[i] !== key || out.length >= limit) return out;
        if (skip > 0) skip--;
        else out.push(v[i]!);
      }
      leaf = nextLeaf(stack, idx);
      i = 0;
    }
    return out;
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
