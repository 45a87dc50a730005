/**
 * What each verb does to an object, as the real API server does it: names and namespaces
 * checked, uid/creationTimestamp/generation set, resourceVersion preconditions (409), status
 * subresources split from the main resource, custom objects pruned/defaulted/validated against
 * their CRD schema (422 with field paths), finalizers honoured on delete, managedFields kept.
 *
 * @module
 */
import {
  apiVersionOf,
  canonical,
  isObj,
  type Obj,
  readAs,
  type ResourceType,
  storageKey,
  unchanged,
  writeAs,
} from "./resources.ts";
import type { Registry } from "./registry.ts";
import { clone } from "./store.ts";
import { CRD_RESOURCE, listKeysFor } from "./registry.ts";
import { admitObject } from "./admission.ts";
import { recordUpdate, serverSideApply, type Writer } from "./apply.ts";
import { jsonPatch, mergePatch, strategicMerge } from "./patch.ts";
import { applyDefaults } from "./defaults.ts";
import { FOREGROUND_FINALIZER, GarbageCollector, type PropagationPolicy } from "./gc.ts";
import { ServiceAllocator } from "./service_alloc.ts";
import { prepareServiceUpdate } from "./service_strategy.ts";
import {
  alreadyExists,
  ApiError,
  badRequest,
  checkPreconditions,
  conflict,
  notFound,
  unsupportedMediaType,
} from "./status.ts";

/** Options every write takes. */
export interface WriteOptions {
  /** `fieldManager` (or the client's user agent). */
  readonly manager: string;
  /** `dryRun=All`: check everything, store nothing. */
  readonly dryRun?: boolean;
  /** `fieldValidation`: `Strict` refuses unknown fields, `Warn` (default) and `Ignore` prune them. */
  readonly fieldValidation?: string;
  /** Write the `/status` subresource. */
  readonly subresource?: "status";
  /** The body carries managedFields already computed by server-side apply. */
  readonly applied?: boolean;
}

/** The Content-Types of `PATCH`. */
export const PATCH_TYPES = [
  "application/json-patch+json",
  "application/merge-patch+json",
  "application/apply-patch+yaml",
  "application/strategic-merge-patch+json",
] as const;

/** The patch formats `PATCH` accepts, by Content-Type. */
export type PatchType = "merge" | "json" | "strategic" | "apply";

/** A written object and the warnings to return in `Warning` headers. */
export interface WriteResult {
  readonly object: Obj;
  readonly warnings: string[];
  /** True when the object was created (201). */
  readonly created: boolean;
}

function meta(obj: Obj): Obj {
  return (obj.metadata ??= {}) as Obj;
}

function timestamp(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

const isService = (t: ResourceType) => t.group === "" && t.kind === "Service";

function withoutMetaAndStatus(obj: Obj): string {
  const { metadata: _m, status: _s, ...rest } = obj;
  return JSON.stringify(rest);
}

/** REST semantics over the registry's store. */
export class Rest {
  readonly registry: Registry;
  readonly #alloc: ServiceAllocator;
  readonly #gc: GarbageCollector;

  constructor(registry: Registry) {
    this.registry = registry;
    this.#alloc = new ServiceAllocator(registry.store);
    this.#gc = new GarbageCollector(registry, this);
  }

  /** Admission, then (Services) what the allocator refuses: node ports and cluster IPs in use. */
  #admit(type: ResourceType, obj: Obj, opts: WriteOptions, previous?: Obj) {
    const checked = admitObject(type, obj, opts, previous);
    if (isService(type)) this.#alloc.assertFree(checked.obj);
    return checked;
  }

  #subject(type: ResourceType, name?: string) {
    return { plural: type.plural, group: type.group, name };
  }

  #read(type: ResourceType, ns: string, name: string): Obj | undefined {
    const obj = this.registry.store.get(storageKey(type), ns, name);
    return obj && readAs(type, obj);
  }

  #write(type: ResourceType, obj: Obj): Obj {
    return readAs(type, this.registry.store.write(storageKey(type), writeAs(type, obj)));
  }

  /** The stored object or a 404. */
  get(type: ResourceType, ns: string, name: string): Obj {
    const obj = this.#read(type, ns, name);
    if (!obj) throw notFound(this.#subject(type, name));
    obj.apiVersion = apiVersionOf(type);
    return obj;
  }

  #checkBody(type: ResourceType, ns: string, body: unknown, name?: string): Obj {
    if (!isObj(body)) throw badRequest(`the request body is not a JSON object for ${type.plural}`);
    const obj = clone(body);
    const want = apiVersionOf(type);
    if (obj.apiVersion !== undefined && obj.apiVersion !== want) {
      throw badRequest(
        `the API version in the data (${obj.apiVersion}) does not match the expected API version (${want})`,
      );
    }
    if (obj.kind !== undefined && obj.kind !== type.kind) {
      throw badRequest(
        `the kind in the data (${obj.kind}) does not match the expected kind (${type.kind})`,
      );
    }
    obj.apiVersion = want;
    obj.kind = type.kind;
    const m = meta(obj);
    if (type.namespaced) {
      if (m.namespace !== undefined && m.namespace !== "" && m.namespace !== ns) {
        throw badRequest(
          "the namespace of the provided object does not match the namespace sent on the request",
        );
      }
      m.namespace = ns;
    } else delete m.namespace;
    if (name !== undefined && m.name !== undefined && m.name !== name) {
      throw badRequest(
        `the name of the object (${m.name}) does not match the name on the URL (${name})`,
      );
    }
    if (name !== undefined) m.name ??= name;
    return obj;
  }

  #namespaceExists(type: ResourceType, ns: string): void {
    if (!type.namespaced) return;
    if (!this.registry.store.get("/namespaces", "", ns)) {
      throw notFound({ plural: "namespaces", group: "", name: ns });
    }
  }

  /** POST: creates the object (409 when it exists, 404 when its namespace does not). */
  create(type: ResourceType, ns: string, body: unknown, opts: WriteOptions): WriteResult {
    let obj = this.#checkBody(type, ns, body);
    const m = meta(obj);
    if (!m.name && typeof m.generateName === "string") {
      m.name = `${m.generateName}${crypto.randomUUID().replace(/-/g, "").slice(0, 5)}`;
    }
    this.#namespaceExists(type, ns);
    const name = String(m.name ?? "");
    if (name && this.registry.store.get(storageKey(type), type.namespaced ? ns : "", name)) {
      throw alreadyExists(this.#subject(type, name));
    }
    if (m.resourceVersion !== undefined && m.resourceVersion !== "") {
      // What the real server's storage answers, too.
      throw new ApiError(
        500,
        "InternalError",
        "Internal error occurred: resourceVersion should not be set on objects to be created",
      );
    }
    for (const k of ["uid", "deletionTimestamp"]) delete m[k];
    if (!opts.applied) delete m.managedFields;
    if (type.status && type.kind !== "Node") delete obj.status;
    m.uid = crypto.randomUUID();
    m.creationTimestamp = timestamp();
    if (type.generation) m.generation = 1;
    applyDefaults(type, obj, undefined, this.#alloc);
    const checked = this.#admit(type, obj, opts);
    obj = checked.obj;
    if (!opts.applied) recordUpdate(undefined, obj, this.#writer(type, opts), listKeysFor(type));
    if (opts.dryRun) return { object: obj, warnings: checked.warnings, created: true };
    const object = this.#write(type, obj);
    this.#gc.created(type, object); // owners that do not exist: collected at once (gc.ts)
    return { object, warnings: checked.warnings, created: true };
  }

  #writer(type: ResourceType, opts: WriteOptions): Writer {
    return {
      manager: opts.manager,
      operation: "Update",
      apiVersion: apiVersionOf(type),
      subresource: opts.subresource,
    };
  }

  /** PUT: replaces the object (409 on a stale resourceVersion, 404 when it does not exist). */
  update(
    type: ResourceType,
    ns: string,
    name: string,
    body: unknown,
    opts: WriteOptions,
  ): WriteResult {
    const current = this.get(type, ns, name);
    let obj = this.#checkBody(type, ns, body, name);
    const m = meta(obj);
    const cm = meta(current);
    if (
      m.resourceVersion !== undefined && m.resourceVersion !== "" &&
      m.resourceVersion !== cm.resourceVersion
    ) {
      throw conflict(
        this.#subject(type, name),
        "the object has been modified; please apply your changes to the latest version and try again",
      );
    }
    if (m.uid !== undefined && m.uid !== cm.uid) {
      throw conflict(
        this.#subject(type, name),
        `Precondition failed: UID in precondition: ${m.uid}, UID in object meta: ${cm.uid}`,
      );
    }
    let supplied: unknown[] | undefined;
    if (opts.subresource === "status") {
      const status = obj.status;
      obj = clone(current);
      if (status === undefined) delete obj.status;
      else obj.status = status;
    } else {
      for (const k of ["uid", "creationTimestamp", "deletionTimestamp", "generation"]) {
        if (cm[k] === undefined) delete m[k];
        else m[k] = cm[k];
      }
      const mine = m.managedFields;
      if (
        !opts.applied && Array.isArray(mine) && mine.length > 0 &&
        canonical(mine) !== canonical(cm.managedFields ?? [])
      ) {
        supplied = mine;
      }
      if (!opts.applied) m.managedFields = cm.managedFields;
      if (type.status) {
        if (current.status === undefined) delete obj.status;
        else obj.status = current.status;
      }
      if (type.generation && withoutMetaAndStatus(obj) !== withoutMetaAndStatus(current)) {
        m.generation = Number(cm.generation ?? 0) + 1;
      }
    }
    if (isService(type) && opts.subresource !== "status") prepareServiceUpdate(obj, current);
    applyDefaults(type, obj, current, this.#alloc);
    const checked = this.#admit(type, obj, opts, current);
    obj = checked.obj;
    if (opts.subresource === "status" && opts.applied) meta(obj).managedFields = m.managedFields;
    if (!opts.applied) {
      recordUpdate(current, obj, this.#writer(type, opts), listKeysFor(type), supplied);
    }
    const om = meta(obj);
    const finalizers = (om.finalizers ?? []) as unknown[];
    if (opts.dryRun) return { object: obj, warnings: checked.warnings, created: false };
    if (unchanged(current, obj)) {
      return { object: current, warnings: checked.warnings, created: false };
    }
    if (om.deletionTimestamp && finalizers.length === 0) {
      this.#write(type, obj);
      return {
        object: this.#removeNow(type, ns, name)!,
        warnings: checked.warnings,
        created: false,
      };
    }
    return {
      object: this.#write(type, obj),
      warnings: checked.warnings,
      created: false,
    };
  }

  /** PATCH: merge, JSON or strategic merge patch of the current object, then as PUT. */
  patch(
    type: ResourceType,
    ns: string,
    name: string,
    patchType: Exclude<PatchType, "apply">,
    body: unknown,
    opts: WriteOptions,
  ): WriteResult {
    const current = this.get(type, ns, name);
    let next: unknown;
    if (patchType === "merge") next = mergePatch(current, body);
    else if (patchType === "json") next = jsonPatch(current, body);
    else if (type.custom) {
      throw unsupportedMediaType(
        "application/strategic-merge-patch+json",
        PATCH_TYPES.filter((t) => !t.includes("strategic")),
      );
    } else next = strategicMerge(type.kind, current, body);
    return this.update(type, ns, name, next, opts);
  }

  /** Server-side apply (`application/apply-patch+yaml`): creates or merges, per field manager. */
  apply(
    type: ResourceType,
    ns: string,
    name: string,
    body: unknown,
    opts: WriteOptions & { force: boolean },
  ): WriteResult {
    if (!isObj(body) || !body.apiVersion || !body.kind) {
      throw badRequest("apiVersion and kind are required in a server-side apply configuration");
    }
    const applied = this.#checkBody(type, ns, body, name);
    const current = this.#read(type, type.namespaced ? ns : "", name);
    if (!current && opts.subresource === "status") throw notFound(this.#subject(type, name));
    const writer: Writer = {
      manager: opts.manager,
      operation: "Apply",
      apiVersion: apiVersionOf(type),
      subresource: opts.subresource,
    };
    const merged = serverSideApply(current, applied, writer, {
      listKeys: listKeysFor(type),
      force: opts.force,
      subresource: opts.subresource,
    });
    const next = { ...opts, applied: true };
    if (!current) return this.create(type, ns, merged, next);
    meta(merged).resourceVersion = meta(current).resourceVersion;
    return this.update(type, ns, name, merged, next);
  }

  #removeNow(type: ResourceType, ns: string, name: string): Obj | undefined {
    if (type.group === "" && type.plural === "namespaces") {
      for (const t of this.registry.types) {
        if (!t.namespaced) continue;
        for (const o of this.registry.store.list(storageKey(t), name)) {
          this.registry.store.remove(storageKey(t), name, String((o.metadata as Obj).name));
        }
      }
    }
    const gone = this.registry.store.remove(storageKey(type), type.namespaced ? ns : "", name);
    if (gone) this.#gc.removed(gone);
    return gone && readAs(type, gone);
  }

  /**
   * DELETE: removes the object now, or, when it has finalizers, marks it deleting
   * (`deletionTimestamp`) until an update removes the last one. `preconditions` as in
   * DeleteOptions (uid, resourceVersion); dependents by `propagationPolicy` (gc.ts).
   */
  delete(
    type: ResourceType,
    ns: string,
    name: string,
    options: { dryRun?: boolean; preconditions?: Obj; propagationPolicy?: PropagationPolicy } = {},
  ): { object: Obj; pending: boolean } {
    const current = this.get(type, ns, name);
    const cm = meta(current);
    checkPreconditions(this.#subject(type, name), options.preconditions ?? {}, cm);
    if (options.dryRun) return { object: current, pending: false };
    const policy = options.propagationPolicy, uid = String(cm.uid);
    if (policy === "Orphan" && !cm.deletionTimestamp) this.#gc.orphan(uid);
    if (policy === "Foreground" && !cm.deletionTimestamp) {
      cm.finalizers = [...((cm.finalizers ?? []) as string[]), FOREGROUND_FINALIZER];
    }
    if (((cm.finalizers ?? []) as unknown[]).length > 0) {
      if (cm.deletionTimestamp) return { object: current, pending: true };
      cm.deletionTimestamp = timestamp();
      cm.deletionGracePeriodSeconds = 0;
      if (type.generation) cm.generation = Number(cm.generation ?? 0) + 1;
      const object = this.#write(type, current);
      if (policy === "Foreground") this.#gc.foreground(uid);
      const after = this.#read(type, ns, name);
      return after ? { object: after, pending: true } : { object, pending: false };
    }
    return { object: this.#removeNow(type, ns, name) ?? current, pending: false };
  }
}

/** Re-exported for the server: the store key of CRDs. */
export { ApiError, CRD_RESOURCE };
