/**
 * The object store: every object by type, namespace and name; one global resourceVersion that
 * each write bumps; a bounded history of watch events, so a watch can start from a recent
 * resourceVersion and one older than the history gets `410 Gone` as from a compacted etcd.
 *
 * @module
 */
import type { Obj } from "./resources.ts";

/** A watch event type as the API streams it. */
export type EventType = "ADDED" | "MODIFIED" | "DELETED";

/** One recorded change. */
export interface StoreEvent {
  readonly type: EventType;
  /** The object after the change (for DELETED: as it was, with the deletion's resourceVersion). */
  readonly object: Obj;
  /** The object before the change (MODIFIED, DELETED). */
  readonly previous?: Obj;
  /** Storage key of the object's type (`group/plural`). */
  readonly resource: string;
  readonly rv: number;
}

/** Options for {@linkcode Store}. */
export interface StoreOptions {
  /** Events kept for watches from an old resourceVersion (default 1,000). */
  readonly historyLimit?: number;
  /** First resourceVersion minus one (default 1000, so versions look like a real cluster's). */
  readonly initialRv?: number;
}

function objectKey(obj: Obj): string {
  const meta = (obj.metadata ?? {}) as Obj;
  return `${meta.namespace ?? ""}/${meta.name}`;
}

/**
 * A deep copy of a JSON value (objects, arrays, primitives): a plain recursive copy, ~8× faster
 * than `structuredClone` on Service-sized objects. Every list, get and write copies, and the
 * benchmarks run this server in the process they measure.
 */
export function clone<T>(value: T): T {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map(clone) as T;
  const src = value as Record<string, unknown>, out: Record<string, unknown> = {};
  for (const k in src) out[k] = clone(src[k]); // JSON objects: no inherited enumerable keys
  return out as T;
}

/** In-memory objects, resourceVersions and the watch history. */
export class Store {
  #rv: number;
  #compactedRv: number;
  readonly #historyLimit: number;
  readonly #objects = new Map<string, Map<string, Obj>>();
  readonly #history: StoreEvent[] = [];
  readonly #listeners = new Set<(event: StoreEvent) => void>();

  constructor(options: StoreOptions = {}) {
    this.#rv = options.initialRv ?? 1000;
    this.#compactedRv = this.#rv;
    this.#historyLimit = options.historyLimit ?? 1000;
  }

  /** The newest resourceVersion. */
  get resourceVersion(): number {
    return this.#rv;
  }

  /** Watches from a resourceVersion below this one get 410 Gone. */
  get compactedResourceVersion(): number {
    return this.#compactedRv;
  }

  /** The object, or undefined (a copy: changing it changes nothing stored). */
  get(resource: string, namespace: string, name: string): Obj | undefined {
    const obj = this.#objects.get(resource)?.get(`${namespace}/${name}`);
    return obj ? clone(obj) : undefined;
  }

  /** Objects of a type, in one namespace or all (`undefined`), sorted by namespace and name. */
  list(resource: string, namespace?: string): Obj[] {
    const all = this.#objects.get(resource);
    if (!all) return [];
    const keys = [...all.keys()].filter((k) =>
      namespace === undefined || k.startsWith(`${namespace}/`)
    );
    return keys.sort().map((k) => clone(all.get(k)!));
  }

  /** Number of objects of a type. */
  count(resource: string): number {
    return this.#objects.get(resource)?.size ?? 0;
  }

  /**
   * Stores `obj` (ADDED when new, else MODIFIED), stamping the next resourceVersion into it;
   * returns the stored copy.
   */
  write(resource: string, obj: Obj): Obj {
    let objects = this.#objects.get(resource);
    if (!objects) this.#objects.set(resource, objects = new Map());
    const key = objectKey(obj);
    const previous = objects.get(key);
    const rv = ++this.#rv;
    const stored = clone(obj);
    (stored.metadata as Obj).resourceVersion = String(rv);
    objects.set(key, stored);
    this.#record({ type: previous ? "MODIFIED" : "ADDED", object: stored, previous, resource, rv });
    return clone(stored);
  }

  /** Removes the object; returns it as deleted (with the deletion's resourceVersion). */
  remove(resource: string, namespace: string, name: string): Obj | undefined {
    const objects = this.#objects.get(resource);
    const key = `${namespace}/${name}`;
    const previous = objects?.get(key);
    if (!objects || !previous) return undefined;
    objects.delete(key);
    const rv = ++this.#rv;
    const gone = clone(previous);
    (gone.metadata as Obj).resourceVersion = String(rv);
    this.#record({ type: "DELETED", object: gone, previous, resource, rv });
    return clone(gone);
  }

  /** Events after `rv`, or undefined when the history no longer reaches back that far. */
  eventsSince(rv: number): StoreEvent[] | undefined {
    if (rv < this.#compactedRv) return undefined;
    return this.#history.filter((e) => e.rv > rv);
  }

  /** Calls `listener` with every later event; returns the unsubscribe function. */
  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Drops all history (as if etcd compacted now): watches from older versions get 410. */
  compact(): void {
    this.#history.length = 0;
    this.#compactedRv = this.#rv;
  }

  #record(event: StoreEvent): void {
    this.#history.push(event);
    while (this.#history.length > this.#historyLimit) {
      this.#compactedRv = this.#history.shift()!.rv;
    }
    for (const listener of [...this.#listeners]) listener(event);
  }
}
