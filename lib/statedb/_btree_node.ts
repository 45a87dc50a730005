/**
 * B+tree nodes: their layout, the small-array edits an owned node takes in place, copying and
 * merging nodes, and walking from the root to a leaf and on from leaf to leaf.
 *
 * @module
 */

import { type Key, upperIndex } from "./_btree_search.ts";

/** Maximum entries per node. 32 keeps copy-on-write cheap while the tree stays shallow. */
export const MAX = 32;
/** A node with fewer entries than this after a delete is merged with a neighbour if it fits. */
export const MIN = 8;

/** One node. `o` is the owner token: only the edit holding it may change the node in place. */
export interface Node<V> {
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

/** The owner token of published empty trees: no edit holds it. */
export const FROZEN: object = Object.freeze({});
/** The (unused) value array of every inner node. Never written. */
// deno-lint-ignore no-explicit-any
export const NO_VALUES: any[] = [];

/** `arr.splice(i, 0, x)` without the builtin's overhead (small arrays). */
export function insertAt<T>(arr: T[], i: number, x: T): void {
  let j = arr.length;
  arr.push(x);
  for (; j > i; j--) arr[j] = arr[j - 1]!;
  arr[i] = x;
}

/** A copy of `arr` with `x` inserted at `i`, allocated at its exact size. */
export function insertCopy<T>(arr: T[], i: number, x: T): T[] {
  const n = arr.length;
  const out = new Array<T>(n + 1);
  for (let j = 0; j < i; j++) out[j] = arr[j]!;
  out[i] = x;
  for (let j = i; j < n; j++) out[j + 1] = arr[j]!;
  return out;
}

/** `arr.splice(i, 1)` for small arrays. */
export function removeAt<T>(arr: T[], i: number): void {
  const n = arr.length - 1;
  for (let j = i; j < n; j++) arr[j] = arr[j + 1]!;
  arr.length = n;
}

/** An empty leaf owned by `o`. */
export function emptyLeaf<V>(o: object, multi: boolean, aux: boolean): Node<V> {
  return { o, k: [], t: multi ? [] : null, v: [], a: aux ? [] : null, c: null };
}

/** A copy of `n` owned by `o`, for changing in place (children are shared, not copied). */
export function copyNode<V>(n: Node<V>, o: object): Node<V> {
  return {
    o,
    k: n.k.slice(),
    t: n.t === null ? null : n.t.slice(),
    v: n.c === null ? n.v.slice() : n.v,
    a: n.a === null ? null : n.a.slice(),
    c: n.c === null ? null : n.c.slice(),
  };
}

/** Entries of a leaf, children of an inner node. */
export function nodeLength<V>(x: Node<V>): number {
  return x.c === null ? x.k.length : x.c.length;
}

/**
 * `left` and `right` (neighbours of the same kind) as one node owned by `o`; inner nodes take
 * their parent's separator (`sepK`, `sepT`) between them.
 */
export function mergeNodes<V>(
  left: Node<V>,
  right: Node<V>,
  sepK: Key,
  sepT: Key | undefined,
  o: object,
): Node<V> {
  if (left.c === null) {
    return {
      o,
      k: left.k.concat(right.k),
      t: left.t === null ? null : left.t.concat(right.t!),
      v: left.v.concat(right.v),
      a: left.a === null ? null : left.a.concat(right.a!),
      c: null,
    };
  }
  return {
    o,
    k: left.k.concat([sepK], right.k),
    t: left.t === null ? null : left.t.concat([sepT!], right.t!),
    v: NO_VALUES,
    a: null,
    c: left.c.concat(right.c!),
  };
}

/**
 * Walks from `root` to the leaf that may hold (key, tb), or to the first leaf when `key` is
 * undefined, pushing the inner nodes passed and the child taken in each onto `stack` and `idx`.
 */
export function descend<V>(
  root: Node<V>,
  key: Key | undefined,
  tb: Key | undefined,
  stack: Node<V>[],
  idx: number[],
): Node<V> {
  let node = root;
  while (node.c !== null) {
    const i = key === undefined ? 0 : upperIndex(node.k, node.t, key, tb);
    stack.push(node);
    idx.push(i);
    node = node.c[i]!;
  }
  return node;
}

/** The leaf after the one `stack`/`idx` lead to (the path moves on to it), or null at the end. */
export function nextLeaf<V>(stack: Node<V>[], idx: number[]): Node<V> | null {
  let d = stack.length - 1;
  while (d >= 0 && idx[d]! + 1 >= stack[d]!.c!.length) d--;
  if (d < 0) return null;
  stack.length = d + 1;
  idx.length = d + 1;
  idx[d]!++;
  let n = stack[d]!.c![idx[d]!]!;
  while (n.c !== null) {
    stack.push(n);
    idx.push(0);
    n = n.c[0]!;
  }
  return n;
}

/** The leaf that may hold (key, tb). */
export function findLeaf<V>(root: Node<V>, key: Key, tb: Key | undefined): Node<V> {
  let n = root;
  while (n.c !== null) n = n.c[upperIndex(n.k, n.t, key, tb)]!;
  return n;
}
