/**
 * The three patch formats of `PATCH`: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and
 * strategic merge patch for the built-in list fields kubectl and Holdfast touch (containers by
 * name, Service ports by port, conditions by type, ...), with the `$patch`, `$retainKeys`,
 * `$setElementOrder/` and `$deleteFromPrimitiveList/` directives kubectl sends. A directive this
 * server does not know is a 400.
 *
 * @module
 */
import { isObj, type Obj } from "./resources.ts";
import { ApiError, badRequest } from "./status.ts";
import { clone } from "./store.ts";

/** Applies an RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObj(patch)) return clone(patch);
  const out: Obj = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function invalidPatch(message: string): ApiError {
  return new ApiError(
    422,
    "Invalid",
    `the server rejected our request due to an error in our request: ${message}`,
  );
}

function pointer(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/")) throw invalidPatch(`JSON pointer "${path}" does not start with "/"`);
  return path.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function parentOf(doc: unknown, segs: string[], path: string): [Obj | unknown[], string] {
  let cur: unknown = doc;
  for (const s of segs.slice(0, -1)) {
    cur = Array.isArray(cur) ? cur[Number(s)] : isObj(cur) ? cur[s] : undefined;
    if (cur === undefined) throw invalidPatch(`path "${path}" does not exist`);
  }
  if (!isObj(cur) && !Array.isArray(cur)) throw invalidPatch(`path "${path}" has no parent object`);
  return [cur, segs[segs.length - 1]!];
}

function index(list: unknown[], seg: string, path: string, forAdd: boolean): number {
  if (forAdd && seg === "-") return list.length;
  if (!/^\d+$/.test(seg)) throw invalidPatch(`"${seg}" is not an array index in "${path}"`);
  const i = Number(seg);
  if (i > list.length || (!forAdd && i === list.length)) {
    throw invalidPatch(`index ${i} out of range in "${path}"`);
  }
  return i;
}

function getAt(doc: unknown, path: string): unknown {
  let cur: unknown = doc;
  for (const s of pointer(path)) {
    cur = Array.isArray(cur) ? cur[index(cur, s, path, false)] : isObj(cur) ? cur[s] : undefined;
    if (cur === undefined) throw invalidPatch(`path "${path}" does not exist`);
  }
  return cur;
}

function removeAt(doc: unknown, path: string): unknown {
  const [parent, last] = parentOf(doc, pointer(path), path);
  if (Array.isArray(parent)) return parent.splice(index(parent, last, path, false), 1)[0];
  if (!Object.hasOwn(parent, last)) throw invalidPatch(`path "${path}" does not exist`);
  const old = parent[last];
  delete parent[last];
  return old;
}

function addAt(doc: unknown, path: string, value: unknown, replace: boolean): unknown {
  const segs = pointer(path);
  if (segs.length === 0) return structuredClone(value);
  const [parent, last] = parentOf(doc, segs, path);
  if (Array.isArray(parent)) {
    const i = index(parent, last, path, !replace);
    parent.splice(i, replace ? 1 : 0, structuredClone(value));
  } else {
    if (replace && !Object.hasOwn(parent, last)) {
      throw invalidPatch(`path "${path}" does not exist`);
    }
    parent[last] = structuredClone(value);
  }
  return doc;
}

/** Applies an RFC 6902 JSON patch (add, remove, replace, move, copy, test). */
export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw badRequest("json patch must be a list of operations");
  let doc = structuredClone(target);
  for (const raw of ops) {
    if (!isObj(raw) || typeof raw.path !== "string") {
      throw invalidPatch(`operation ${JSON.stringify(raw)} has no path`);
    }
    const path = raw.path;
    switch (raw.op) {
      case "add":
        doc = addAt(doc, path, raw.value, false);
        break;
      case "replace":
        doc = addAt(doc, path, raw.value, true);
        break;
      case "remove":
        removeAt(doc, path);
        break;
      case "move":
      case "copy": {
        const from = String(raw.from ?? "");
        const value = raw.op === "move" ? removeAt(doc, from) : structuredClone(getAt(doc, from));
        doc = addAt(doc, path, value, false);
        break;
      }
      case "test":
        if (JSON.stringify(getAt(doc, path)) !== JSON.stringify(raw.value)) {
          throw invalidPatch(`test failed: value at "${path}" is not ${JSON.stringify(raw.value)}`);
        }
        break;
      default:
        throw invalidPatch(`unsupported JSON patch operation "${String(raw.op)}"`);
    }
  }
  return doc;
}

/**
 * The strategic-merge key of the list at `path` (field names from the root, list indexes left
 * out), `"$set"` for a primitive list merged as a set, or undefined for a list that is replaced.
 */
export function strategicListKey(kind: string, path: readonly string[]): string | undefined {
  const field = path[path.length - 1] ?? "";
  const joined = path.join(".");
  if (field === "ports") {
    if (kind === "Service" && joined === "spec.ports") return "port";
    if (path[path.length - 2] === "containers" || path[path.length - 2] === "initContainers") {
      return "containerPort";
    }
    return undefined;
  }
  if (joined === "metadata.finalizers") return "$set";
  if (joined === "metadata.ownerReferences") return "uid";
  if (kind === "Node" && joined === "status.addresses") return "type";
  return {
    containers: "name",
    initContainers: "name",
    ephemeralContainers: "name",
    env: "name",
    volumes: "name",
    volumeMounts: "mountPath",
    volumeDevices: "devicePath",
    imagePullSecrets: "name",
    hostAliases: "ip",
    conditions: "type",
  }[field];
}

const ORDER = "$setElementOrder/";
const DELETE_PRIMITIVE = "$deleteFromPrimitiveList/";

function sameKey(a: unknown, b: unknown, key: string): boolean {
  return isObj(a) && isObj(b) && a[key] === b[key] && a[key] !== undefined;
}

function mergeList(
  kind: string,
  path: string[],
  current: unknown,
  patch: unknown[],
  order?: unknown[],
): unknown[] {
  const key = strategicListKey(kind, path);
  if (patch.some((e) => isObj(e) && e.$patch === "replace")) {
    return patch.filter((e) => !(isObj(e) && e.$patch === "replace"));
  }
  if (key === undefined || !Array.isArray(current)) {
    return patch.filter((e) => !(isObj(e) && e.$patch === "delete"));
  }
  let out = [...current];
  if (key === "$set") {
    for (const v of patch) {
      if (!out.some((c) => JSON.stringify(c) === JSON.stringify(v))) out.push(v);
    }
  } else {
    for (const item of patch) {
      if (!isObj(item) || item[key] === undefined) {
        throw badRequest(
          `strategic merge patch: an item of "${path.join(".")}" has no merge key "${key}"`,
        );
      }
      const at = out.findIndex((c) => sameKey(c, item, key));
      if (item.$patch === "delete") {
        if (at >= 0) out.splice(at, 1);
      } else if (at >= 0) out[at] = strategicMerge(kind, out[at], item, path);
      else out.push(strategicMerge(kind, {}, item, path));
    }
  }
  if (order) {
    const rank = (e: unknown) => {
      const i = order.findIndex((o) => key === "$set" ? o === e : sameKey(o, e, key));
      return i < 0 ? order.length : i;
    };
    out = out.map((e, i) => [e, i] as const).sort((a, b) => rank(a[0]) - rank(b[0]) || a[1] - b[1])
      .map((p) => p[0]);
  }
  return out;
}

/** Applies a strategic merge patch to a built-in object of `kind`. */
export function strategicMerge(
  kind: string,
  target: unknown,
  patch: unknown,
  path: string[] = [],
): unknown {
  if (!isObj(patch)) return clone(patch);
  if (patch.$patch === "delete") return undefined;
  const replace = patch.$patch === "replace";
  let out: Obj = isObj(target) && !replace ? { ...target } : {};
  const orders: Record<string, unknown[]> = {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith(ORDER)) orders[k.slice(ORDER.length)] = v as unknown[];
  }
  for (const [k, v] of Object.entries(patch)) {
    if (k === "$patch") {
      if (v !== "replace" && v !== "merge" && v !== "delete") {
        throw badRequest(`strategic merge patch: unknown $patch "${v}"`);
      }
      continue;
    }
    if (k.startsWith(ORDER) || k === "$retainKeys") continue;
    if (k.startsWith(DELETE_PRIMITIVE)) {
      const field = k.slice(DELETE_PRIMITIVE.length);
      const drop = (v ?? []) as unknown[];
      if (Array.isArray(out[field])) {
        out[field] = (out[field] as unknown[]).filter((e) => !drop.includes(e));
      }
      continue;
    }
    if (k.startsWith("$")) {
      throw badRequest(`strategic merge patch: directive "${k}" is not supported by this server`);
    }
    const sub = [...path, k];
    if (v === null) delete out[k];
    else if (Array.isArray(v)) out[k] = mergeList(kind, sub, out[k], v, orders[k]);
    else if (isObj(v)) {
      const merged = strategicMerge(kind, out[k], v, sub);
      if (merged === undefined) delete out[k];
      else out[k] = merged;
    } else out[k] = v;
  }
  for (const [field, order] of Object.entries(orders)) {
    if (patch[field] === undefined && Array.isArray(out[field])) {
      out[field] = mergeList(kind, [...path, field], out[field], [], order);
    }
  }
  if (Array.isArray(patch.$retainKeys)) {
    const keep = new Set(patch.$retainKeys as string[]);
    out = Object.fromEntries(Object.entries(out).filter(([k]) => keep.has(k)));
  }
  return out;
}
