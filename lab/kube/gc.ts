/**
 * The test server's garbage collector for `metadata.ownerReferences`, as Kubernetes' (the
 * garbage collector controller of kube-controller-manager) behaves for the three propagation
 * policies of a delete, but at once rather than eventually:
 *
 * - **Background** (the default): the owner goes at once; then every dependent (an object with an
 *   ownerReference to the owner's uid) whose other owners are all gone is deleted, Background too
 *   (so a chain goes with it); a dependent that still has a live owner only loses the dangling
 *   reference.
 * - **Foreground**: the owner gets `deletionTimestamp` and the finalizer `foregroundDeletion`
 *   and stays visible while its dependents are deleted (Foreground too); the finalizer is removed,
 *   and the owner with it, once no dependent with `blockOwnerDeletion: true` is left (a dependent
 *   held by a finalizer of its own keeps its owner until it is gone).
 * - **Orphan**: the dependents lose their reference to the owner and stay; then the owner goes.
 *
 * Dependents are found by uid across every stored type (the real collector also matches by uid).
 * An object created with references only to owners that do not exist (an owner deleted a moment
 * before, as a controller acting on a stale cache does) is deleted at once; the real collector
 * does so after checking with the API.
 *
 * @module
 */
import { isObj, type Obj, type ResourceType, storageKey } from "./resources.ts";
import type { Registry } from "./registry.ts";

/** The finalizer of an owner waiting for its dependents (Foreground deletion). */
export const FOREGROUND_FINALIZER = "foregroundDeletion";
/** The propagation policies of a delete. */
export type PropagationPolicy = "Background" | "Foreground" | "Orphan";

/** An object found by uid: its type (the first one serving its storage) and the object. */
export interface Located {
  readonly type: ResourceType;
  readonly object: Obj;
}

function meta(o: Obj): Obj {
  return isObj(o.metadata) ? o.metadata : {};
}

/** The ownerReferences of `o` (well-formed ones only). */
export function ownerRefs(o: Obj): Obj[] {
  const refs = meta(o).ownerReferences;
  return Array.isArray(refs) ? refs.filter(isObj) : [];
}

/** Reads over every stored type, one type per storage key. */
export class OwnerIndex {
  constructor(readonly registry: Registry) {}

  #types(): ResourceType[] {
    const seen = new Set<string>();
    return this.registry.types.filter((t) => {
      const k = storageKey(t);
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    });
  }

  /** Every object with an ownerReference to `uid`. */
  dependentsOf(uid: string): Located[] {
    const out: Located[] = [];
    for (const type of this.#types()) {
      for (const object of this.registry.store.list(storageKey(type))) {
        if (ownerRefs(object).some((r) => r.uid === uid)) out.push({ type, object });
      }
    }
    return out;
  }

  /** The object whose uid is `uid`, if any is stored. */
  byUid(uid: string): Located | undefined {
    for (const type of this.#types()) {
      for (const object of this.registry.store.list(storageKey(type))) {
        if (meta(object).uid === uid) return { type, object };
      }
    }
    return undefined;
  }
}

/** Whether `object`'s delete waits for dependents that block it (Foreground). */
export function waitsForDependents(object: Obj): boolean {
  const m = meta(object);
  return m.deletionTimestamp !== undefined &&
    Array.isArray(m.finalizers) && m.finalizers.includes(FOREGROUND_FINALIZER);
}

/** Whether `dependent` blocks the Foreground deletion of the owner `uid`. */
export function blocks(dependent: Obj, uid: string): boolean {
  return ownerRefs(dependent).some((r) => r.uid === uid && r.blockOwnerDeletion === true);
}

/** `refs` without the references to `uid`. */
export function withoutOwner(o: Obj, uid: string): Obj {
  const m = { ...meta(o) };
  const rest = ownerRefs(o).filter((r) => r.uid !== uid);
  if (rest.length > 0) m.ownerReferences = rest;
  else delete m.ownerReferences;
  return { ...o, metadata: m };
}

/** The propagation policy a delete asked for (400 text for anything else). */
export function readPolicy(value: unknown): PropagationPolicy | string {
  const p = String(value ?? "Background");
  if (p === "Background" || p === "Foreground" || p === "Orphan") return p;
  return `propagationPolicy "${p}" is not one of Background, Foreground, Orphan`;
}

/** What the collector needs of the REST layer (lab/kube/rest.ts). */
export interface GcRest {
  patch(
    type: ResourceType,
    ns: string,
    name: string,
    patchType: "merge",
    body: unknown,
    opts: { manager: string },
  ): unknown;
  delete(
    type: ResourceType,
    ns: string,
    name: string,
    options?: { propagationPolicy?: PropagationPolicy },
  ): unknown;
}

const GC = { manager: "generic-garbage-collector" };

/** The collector: called by the REST layer around deletes (see the module doc). */
export class GarbageCollector {
  readonly #index: OwnerIndex;

  constructor(readonly registry: Registry, readonly rest: GcRest) {
    this.#index = new OwnerIndex(registry);
  }

  #where(l: Located): [string, string] {
    const m = meta(l.object);
    return [l.type.namespaced ? String(m.namespace ?? "") : "", String(m.name)];
  }

  /** Orphan: the dependents of `uid` lose their reference to it. */
  orphan(uid: string): void {
    for (const d of this.#index.dependentsOf(uid)) {
      const refs = ownerRefs(withoutOwner(d.object, uid));
      this.rest.patch(d.type, ...this.#where(d), "merge", {
        metadata: { ownerReferences: refs.length > 0 ? refs : null },
      }, GC);
    }
  }

  /** Foreground: deletes the dependents of `uid` (Foreground), then releases it if none blocks. */
  foreground(uid: string): void {
    this.#collect(uid, "Foreground");
    this.#settle(uid);
  }

  /**
   * After a create: an object whose owner references all name owners that do not exist (their
   * uid is stored nowhere, e.g. an owner deleted just before) is deleted, as the real collector
   * deletes dependents whose owners are all absent.
   */
  created(type: ResourceType, object: Obj): void {
    const refs = ownerRefs(object);
    if (refs.length === 0 || refs.some((r) => this.#index.byUid(String(r.uid)))) return;
    this.rest.delete(type, ...this.#where({ type, object }), { propagationPolicy: "Background" });
  }

  /** After an object is gone: its dependents are collected, a waiting owner may be released. */
  removed(gone: Obj): void {
    const uid = String(meta(gone).uid ?? "");
    if (uid) this.#collect(uid, "Background");
    for (const r of ownerRefs(gone)) this.#settle(String(r.uid));
  }

  /** Deletes the dependents of `uid` that have no other live owner; others lose the reference. */
  #collect(uid: string, policy: PropagationPolicy): void {
    for (const d of this.#index.dependentsOf(uid)) {
      const others = ownerRefs(d.object).filter((r) => r.uid !== uid);
      const live = others.filter((r) => {
        const owner = this.#index.byUid(String(r.uid));
        return owner !== undefined && meta(owner.object).deletionTimestamp === undefined;
      });
      const [ns, name] = this.#where(d);
      if (live.length > 0) {
        this.rest.patch(d.type, ns, name, "merge", { metadata: { ownerReferences: live } }, GC);
      } else if (meta(d.object).deletionTimestamp === undefined) {
        this.rest.delete(d.type, ns, name, { propagationPolicy: policy });
      }
    }
  }

  /** Releases the Foreground deletion of `uid` once no dependent blocks it. */
  #settle(uid: string): void {
    const owner = this.#index.byUid(uid);
    if (!owner || !waitsForDependents(owner.object)) return;
    if (this.#index.dependentsOf(uid).some((d) => blocks(d.object, uid))) return;
    const finalizers = (meta(owner.object).finalizers as string[]).filter((f) =>
      f !== FOREGROUND_FINALIZER
    );
    this.rest.patch(owner.type, ...this.#where(owner), "merge", {
      metadata: { finalizers: finalizers.length > 0 ? finalizers : null },
    }, GC);
  }
}
