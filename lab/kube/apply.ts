/**
 * Server-side apply and field ownership: each manager's fields are kept in
 * `metadata.managedFields` (FieldsV1, as the real server writes them); an apply that changes a
 * field another manager owns is a 409 Conflict naming the manager and field unless `force`;
 * fields a manager applied before and no longer applies are removed when nobody else owns them.
 * Plain updates (PUT, PATCH) move the fields they change to their manager (operation `Update`).
 *
 * Lists are atomic unless the type says they are keyed: built-ins by the strategic-merge keys,
 * custom resources by `x-kubernetes-list-type: map` / `set` in their schema.
 *
 * @module
 */
import { isObj, type Obj } from "./resources.ts";
import { ApiError } from "./status.ts";
import { itemKey, type ListIndex, resolve, SEP } from "./field_paths.ts";

/**
 * How the field at a path (field names only) merges: a list by keys, a list as a set, a map
 * as one value (`"atomic"`), or else the default (lists atomic, maps field by field).
 */
export type ListKeys = (
  path: readonly string[],
) => readonly string[] | "set" | "atomic" | undefined;

/** Who writes: manager name, operation, subresource. */
export interface Writer {
  readonly manager: string;
  readonly operation: "Apply" | "Update";
  readonly subresource?: string;
  readonly apiVersion: string;
}

type Paths = Set<string>;

/** Metadata fields nobody owns. */
const SYSTEM_META = new Set([
  "name",
  "namespace",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "managedFields",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "selfLink",
  "generateName",
]);

function collect(
  value: unknown,
  names: string[],
  segs: string[],
  listKeys: ListKeys,
  out: Paths,
): void {
  if (
    isObj(value) && Object.keys(value).length > 0 &&
    !(segs.length > 0 && listKeys(names) === "atomic")
  ) {
    for (const [k, v] of Object.entries(value)) {
      if (segs.length === 0 && (k === "apiVersion" || k === "kind")) continue;
      if (segs.length === 1 && segs[0] === "f:metadata" && SYSTEM_META.has(k)) continue;
      collect(v, [...names, k], [...segs, `f:${k}`], listKeys, out);
    }
    return;
  }
  const keys = Array.isArray(value) && value.length > 0 ? listKeys(names) : undefined;
  if (!Array.isArray(value) || keys === undefined || keys === "atomic") {
    if (segs.length > 0) out.add(segs.join(SEP));
  } else if (keys === "set") {
    for (const v of value) out.add([...segs, `v:${JSON.stringify(v)}`].join(SEP));
  } else {
    for (const item of value) {
      const seg = [...segs, itemKey(item, keys)];
      out.add(seg.join(SEP));
      collect(item, names, seg, listKeys, out);
    }
  }
}

/** The fields an object sets (paths of segments `f:`, `k:`, `v:`). */
export function fieldsOf(obj: Obj, listKeys: ListKeys, only?: "status" | "spec"): Paths {
  const out: Paths = new Set();
  collect(obj, [], [], listKeys, out);
  if (!only) return out;
  const statusPrefix = `f:status`;
  return new Set(
    [...out].filter((p) =>
      (p === statusPrefix || p.startsWith(statusPrefix + SEP)) === (only === "status")
    ),
  );
}

function toFieldsV1(paths: Paths): Obj {
  const root: Obj = {};
  for (const p of paths) {
    let node = root;
    for (const seg of p.split(SEP)) node = (node[seg] ??= {}) as Obj;
    node["."] = {};
  }
  const tidy = (node: Obj): Obj => {
    const keys = Object.keys(node).filter((k) => k !== ".");
    if (keys.length === 0) return {};
    const out: Obj = Object.hasOwn(node, ".") ? { ".": {} } : {};
    for (const k of keys) out[k] = tidy(node[k] as Obj);
    return out;
  };
  return tidy(root);
}

function fromFieldsV1(fields: unknown, prefix: string[] = [], out: Paths = new Set()): Paths {
  if (!isObj(fields)) return out;
  const keys = Object.keys(fields).filter((k) => k !== ".");
  if (prefix.length > 0 && (keys.length === 0 || Object.hasOwn(fields, "."))) {
    out.add(prefix.join(SEP));
  }
  for (const k of keys) fromFieldsV1(fields[k], [...prefix, k], out);
  return out;
}

const STATUS_PATH = "f:status";
const isStatusPath = (p: string) => p === STATUS_PATH || p.startsWith(STATUS_PATH + SEP);

/**
 * Whether `a` and `b` are the same JSON but for the top-level key `skip`: keys holding
 * `undefined` count as keys (as `collect` walks them), arrays element by element.
 */
export function identicalBut(a: Obj, b: Obj, skip: string): boolean {
  const same = (x: unknown, y: unknown): boolean => {
    if (x === y) return true;
    if (typeof x !== "object" || typeof y !== "object" || x === null || y === null) return false;
    if (Array.isArray(x) !== Array.isArray(y)) return false;
    if (Array.isArray(x)) {
      const ya = y as unknown[];
      return x.length === ya.length && x.every((e, i) => same(e, ya[i]));
    }
    return sameKeys(x as Obj, y as Obj, undefined);
  };
  const sameKeys = (x: Obj, y: Obj, leave: string | undefined): boolean => {
    let n = 0;
    for (const k in x) {
      if (k === leave) continue;
      n++;
      if (!Object.hasOwn(y, k) || !same(x[k], y[k])) return false;
    }
    for (const k in y) if (k !== leave) n--;
    return n === 0;
  };
  return sameKeys(a, b, skip);
}

/** One entry of `metadata.managedFields`, decoded. */
interface Entry {
  writer: Writer;
  time: string;
  paths: Paths;
}

function entries(obj: Obj): Entry[] {
  const list = ((obj.metadata as Obj | undefined)?.managedFields ?? []) as Obj[];
  return list.map((m) => ({
    writer: {
      manager: String(m.manager ?? ""),
      operation: m.operation === "Apply" ? "Apply" : "Update",
      subresource: m.subresource ? String(m.subresource) : undefined,
      apiVersion: String(m.apiVersion ?? ""),
    },
    time: String(m.time ?? ""),
    paths: fromFieldsV1(m.fieldsV1),
  }));
}

function same(a: Writer, b: Writer): boolean {
  return a.manager === b.manager && a.operation === b.operation &&
    (a.subresource ?? "") === (b.subresource ?? "");
}

function store(obj: Obj, list: Entry[]): void {
  const meta = (obj.metadata ??= {}) as Obj;
  const kept = list.filter((e) => e.paths.size > 0);
  if (kept.length === 0) {
    delete meta.managedFields;
    return;
  }
  meta.managedFields = kept.map((e) => ({
    manager: e.writer.manager,
    operation: e.writer.operation,
    apiVersion: e.writer.apiVersion,
    time: e.time,
    fieldsType: "FieldsV1",
    fieldsV1: toFieldsV1(e.paths),
    ...(e.writer.subresource ? { subresource: e.writer.subresource } : {}),
  }));
}

function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

function removePath(obj: Obj, path: string): void {
  const segs = path.split(SEP);
  const last = segs.pop()!;
  const parent = segs.length ? resolve(obj, segs.join(SEP)).value : obj;
  if (last.startsWith("f:") && isObj(parent)) delete parent[last.slice(2)];
  else if (Array.isArray(parent)) {
    const at = parent.findIndex((_, i) => {
      const probe = resolve([parent[i]], last);
      return probe.found;
    });
    if (at >= 0) parent.splice(at, 1);
  }
}

/** Structured merge of an applied configuration into the live object. */
export function structuredMerge(
  live: unknown,
  applied: unknown,
  listKeys: ListKeys,
  names: string[] = [],
): unknown {
  if (isObj(applied) && !(names.length > 0 && listKeys(names) === "atomic")) {
    const out: Obj = isObj(live) ? { ...live } : {};
    for (const [k, v] of Object.entries(applied)) {
      if (v === null) delete out[k];
      else out[k] = structuredMerge(out[k], v, listKeys, [...names, k]);
    }
    return out;
  }
  if (Array.isArray(applied) && Array.isArray(live)) {
    const keys = listKeys(names);
    if (keys === "set") {
      return [
        ...live,
        ...applied.filter((v) => !live.some((l) => JSON.stringify(l) === JSON.stringify(v))),
      ];
    }
    if (keys !== undefined && keys !== "atomic") {
      const out = [...live];
      const at = new Map<string, number>();
      out.forEach((e, i) => {
        const k = itemKey(e, keys);
        if (!at.has(k)) at.set(k, i);
      });
      for (const item of applied) {
        const k = itemKey(item, keys), i = at.get(k);
        if (i !== undefined) out[i] = structuredMerge(out[i], item, listKeys, names);
        else at.set(k, out.push(structuredClone(item)) - 1);
      }
      return out;
    }
  }
  return structuredClone(applied);
}

/** Options of {@linkcode serverSideApply}. */
export interface ApplyOptions {
  readonly listKeys: ListKeys;
  readonly force: boolean;
  /** `"status"` for an apply to the /status subresource, else the main resource (no status). */
  readonly subresource?: "status";
}

/**
 * Applies `applied` as `writer` to `live` (undefined when creating). Returns the new object with
 * updated managedFields; throws a 409 Conflict listing every conflicting field unless `force`.
 */
export function serverSideApply(
  live: Obj | undefined,
  applied: Obj,
  writer: Writer,
  options: ApplyOptions,
): Obj {
  const only = options.subresource === "status" ? "status" : undefined;
  const mine = fieldsOf(applied, options.listKeys, only);
  const appliedMeta = (applied.metadata ?? {}) as Obj;
  const identity = {
    name: appliedMeta.name,
    ...(appliedMeta.namespace ? { namespace: appliedMeta.namespace } : {}),
  };
  const base: Obj = structuredClone(
    live ?? { apiVersion: applied.apiVersion, kind: applied.kind, metadata: identity },
  );
  const list = entries(base);
  const conflicts: { manager: string; path: string }[] = [];
  const appliedIndex: ListIndex = new Map(), baseIndex: ListIndex = new Map();
  for (const e of list) {
    if (same(e.writer, writer)) continue;
    for (const p of mine) {
      // A keyed list item or set member is co-owned; only leaf values conflict.
      if (!e.paths.has(p) || /^[kv]:/.test(p.slice(p.lastIndexOf(SEP) + 1))) continue;
      const a = resolve(applied, p, appliedIndex);
      const l = resolve(base, p, baseIndex);
      if (JSON.stringify(a.value) === JSON.stringify(l.value)) continue;
      if (options.force) e.paths.delete(p);
      else conflicts.push({ manager: e.writer.manager, path: p });
    }
  }
  if (conflicts.length > 0) {
    const show = (p: string) =>
      "." +
      p.split(SEP).map((s) => s.startsWith("f:") ? s.slice(2) : `[${s.slice(2)}]`).join(".")
        .replace(/\.\[/g, "[");
    const lines = conflicts.map((c) => `conflict with "${c.manager}": ${show(c.path)}`);
    throw new ApiError(
      409,
      "Conflict",
      `Apply failed with ${conflicts.length} conflict${conflicts.length > 1 ? "s" : ""}: ${
        lines.join("\n")
      }`,
      {
        details: {
          causes: conflicts.map((c) => ({
            reason: "FieldManagerConflict",
            message: `conflict with "${c.manager}"`,
            field: show(c.path),
          })),
        },
      },
    );
  }
  let own = list.find((e) => same(e.writer, writer));
  if (!own) list.push(own = { writer, time: now(), paths: new Set() });
  // Paths other managers own, and every parent of them: a field is shared when it is one.
  const shared = new Set<string>();
  for (const e of list) {
    if (e === own) continue;
    for (const q of e.paths) {
      for (let i = q.indexOf(SEP); i >= 0; i = q.indexOf(SEP, i + 1)) shared.add(q.slice(0, i));
      shared.add(q);
    }
  }
  for (const p of own.paths) {
    if (!mine.has(p) && !shared.has(p)) removePath(base, p);
  }
  const toMerge = structuredClone(applied);
  delete toMerge.apiVersion;
  const meta = (toMerge.metadata ?? {}) as Obj;
  for (const k of SYSTEM_META) delete meta[k];
  if (only) {
    for (const k of Object.keys(toMerge)) if (k !== "status") delete toMerge[k];
  } else delete toMerge.status;
  const merged = structuredMerge(base, toMerge, options.listKeys) as Obj;
  own.paths = mine;
  own.time = now();
  store(merged, list);
  return merged;
}

/**
 * Records a plain update (create, PUT, PATCH) by `writer`: the fields whose value it changed
 * become its own and leave other managers; fields it removed leave everyone. `supplied`: the
 * managedFields the request set, when it changed them.
 */
export function recordUpdate(
  before: Obj | undefined,
  after: Obj,
  writer: Writer,
  listKeys: ListKeys,
  supplied?: readonly unknown[],
): void {
  // A status write leaves everything else as it was: its fields are the same paths with the
  // same values, so only the status subtree of `before` is walked and compared.
  const statusOnly = before !== undefined && identicalBut(before, after, "status");
  const now_ = fieldsOf(after, listKeys);
  let old: Paths;
  if (!before) old = new Set<string>();
  else if (!statusOnly) old = fieldsOf(before, listKeys);
  else {
    old = new Set([...now_].filter((p) => !isStatusPath(p)));
    const sub = Object.hasOwn(before, "status") ? { status: before.status } : {};
    for (const p of fieldsOf(sub, listKeys)) old.add(p);
  }
  // managedFields the client changed replace the stored ones (`[{}]` clears them), as on a real
  // server; kubectl rewrites them this way when it moves from client-side to server-side apply.
  const list = supplied
    ? entries({ metadata: { managedFields: supplied.filter((m) => isObj(m) && m.manager) } })
    : entries(before ?? after);
  const beforeIndex: ListIndex = new Map(), afterIndex: ListIndex = new Map();
  const changed = new Set([...now_].filter((p) =>
    (!statusOnly || isStatusPath(p)) && (
      !old.has(p) ||
      JSON.stringify(resolve(before, p, beforeIndex).value) !==
        JSON.stringify(resolve(after, p, afterIndex).value)
    )
  ));
  for (const e of list) {
    for (const p of [...e.paths]) {
      if (!now_.has(p) || (changed.has(p) && !same(e.writer, writer))) e.paths.delete(p);
    }
  }
  if (changed.size > 0) {
    let own = list.find((e) => same(e.writer, writer));
    if (!own) list.push(own = { writer, time: now(), paths: new Set() });
    for (const p of changed) own.paths.add(p);
    own.time = now();
  }
  store(after, list);
}
