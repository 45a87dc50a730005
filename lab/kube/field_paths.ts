/**
 * Field paths of managedFields (FieldsV1 segments joined by {@linkcode SEP}: `f:name` a field,
 * `k:{"port":80,"protocol":"TCP"}` a keyed list item, `v:"x"` a set member) and looking one up
 * in an object. Resolving every path of a keyed list through one {@linkcode ListIndex} costs
 * the list's length once, not once per path (a Service with 1,000 ports was n²).
 *
 * @module
 */
import { isObj, type Obj } from "./resources.ts";

/** Separates the segments of a path. */
export const SEP = "\u0001";

/** The `k:{...}` segment of a keyed list item (`keys` its key fields). */
export function itemKey(item: unknown, keys: readonly string[]): string {
  const k: Obj = {};
  // A port's protocol key defaults to TCP, so an applied port without one names the stored one.
  for (const name of keys) {
    if (isObj(item)) k[name] = item[name] ?? (name === "protocol" ? "TCP" : undefined);
  }
  return `k:${JSON.stringify(k)}`;
}

/** Keyed list items by key, per list: built once per list a resolver meets (see `resolve`). */
export type ListIndex = Map<unknown[], Map<string, unknown>>;

function keyedItem(list: unknown[], seg: string, index?: ListIndex): unknown {
  const keys = Object.keys(JSON.parse(seg.slice(2)) as Obj);
  if (!index) return list.find((e) => isObj(e) && itemKey(e, keys) === seg);
  let byKey = index.get(list);
  if (!byKey) {
    index.set(list, byKey = new Map());
    for (const e of list) {
      if (!isObj(e)) continue;
      const k = itemKey(e, keys);
      if (!byKey.has(k)) byKey.set(k, e);
    }
  }
  return byKey.get(seg);
}

/**
 * The value at `path` in `obj`. `index` (for objects not changed while it is used) keeps each
 * keyed list's items by key, so resolving every path of a list of n items costs n, not n².
 */
export function resolve(
  obj: unknown,
  path: string,
  index?: ListIndex,
): { found: boolean; value?: unknown } {
  let cur: unknown = obj;
  for (const seg of path.split(SEP)) {
    if (seg.startsWith("f:") && isObj(cur) && Object.hasOwn(cur, seg.slice(2))) {
      cur = cur[seg.slice(2)];
    } else if (seg.startsWith("k:") && Array.isArray(cur)) {
      cur = keyedItem(cur, seg, index);
      if (cur === undefined) return { found: false };
    } else if (seg.startsWith("v:") && Array.isArray(cur)) {
      const v = seg.slice(2);
      if (!cur.some((e) => JSON.stringify(e) === v)) return { found: false };
      return { found: true };
    } else return { found: false };
  }
  return { found: true, value: cur };
}
