/**
 * Which resource types are served: the built-in table plus one type per served version of each
 * stored CustomResourceDefinition, kept in step with the CRDs in the store (a CRD created
 * through the API is served at once; deleting it deletes its objects).
 *
 * @module
 */
import {
  BUILTIN_TYPES,
  CRD_GROUP,
  isObj,
  type Obj,
  type ResourceType,
  storageKey,
  typesFromCrd,
} from "./resources.ts";
import type { Store } from "./store.ts";
import { strategicListKey } from "./patch.ts";
import type { ListKeys } from "./apply.ts";

/** The storage key of CustomResourceDefinitions. */
export const CRD_RESOURCE = `${CRD_GROUP}/customresourcedefinitions`;

/** The served types, built-in and custom. */
export class Registry {
  readonly store: Store;
  #custom: ResourceType[] = [];

  constructor(store: Store) {
    this.store = store;
    store.subscribe((e) => {
      if (e.resource !== CRD_RESOURCE) return;
      this.#rebuild();
      if (e.type === "DELETED") this.#dropObjects(e.object);
    });
    this.#rebuild();
  }

  /** Every served type: built-ins first, then custom types sorted by group. */
  get types(): readonly ResourceType[] {
    return [...BUILTIN_TYPES, ...this.#custom];
  }

  /** The type served at group/version/plural, or undefined. */
  find(group: string, version: string, plural: string): ResourceType | undefined {
    return this.types.find((t) =>
      t.group === group && t.version === version && t.plural === plural
    );
  }

  /** Groups with their versions, in discovery order (core group excluded). */
  groups(): { name: string; versions: string[] }[] {
    const out: { name: string; versions: string[] }[] = [];
    for (const t of this.types) {
      if (t.group === "") continue;
      let g = out.find((x) => x.name === t.group);
      if (!g) out.push(g = { name: t.group, versions: [] });
      if (!g.versions.includes(t.version)) g.versions.push(t.version);
    }
    return out;
  }

  #rebuild(): void {
    const custom: ResourceType[] = [];
    for (const crd of this.store.list(CRD_RESOURCE)) {
      try {
        custom.push(...typesFromCrd(crd));
      } catch {
        // A CRD the server could not serve was refused at admission; nothing to serve here.
      }
    }
    this.#custom = custom.sort((a, b) => a.group.localeCompare(b.group));
  }

  #dropObjects(crd: Obj): void {
    const spec = (crd.spec ?? {}) as Obj;
    const names = (spec.names ?? {}) as Obj;
    const key = `${spec.group}/${names.plural}`;
    for (const obj of this.store.list(key)) {
      const meta = obj.metadata as Obj;
      this.store.remove(key, String(meta.namespace ?? ""), String(meta.name));
    }
  }
}

/** Built-in maps that server-side apply treats as one value (`x-kubernetes-map-type: atomic`). */
const BUILTIN_ATOMIC_MAPS = [
  /^spec\.selector$/,
  /(^|\.)nodeSelector$/,
  /(^|\.)(labelSelector|namespaceSelector)$/,
];

/** How lists and maps of a type merge under server-side apply. */
export function listKeysFor(type: ResourceType): ListKeys {
  if (!type.custom) {
    return (path) => {
      const key = strategicListKey(type.kind, path);
      if (key === "$set") return "set";
      const joined = path.join(".");
      if (type.kind === "Service" && joined === "spec.ports") return ["port", "protocol"];
      if (BUILTIN_ATOMIC_MAPS.some((re) => re.test(joined))) return "atomic";
      return key === undefined ? undefined : [key];
    };
  }
  return (path) => {
    let s: unknown = type.schema;
    for (const name of path) {
      if (!isObj(s)) return undefined;
      if (s.type === "array") s = s.items;
      if (!isObj(s)) return undefined;
      s = isObj(s.properties)
        ? s.properties[name]
        : isObj(s.additionalProperties)
        ? s.additionalProperties
        : undefined;
    }
    if (!isObj(s)) return undefined;
    if (s["x-kubernetes-map-type"] === "atomic") return "atomic";
    if (s["x-kubernetes-list-type"] === "set") return "set";
    if (s["x-kubernetes-list-type"] === "map") {
      return (s["x-kubernetes-list-map-keys"] ?? []) as string[];
    }
    return undefined;
  };
}

/** Storage key of a type (re-exported for the server). */
export { storageKey };
