/**
 * Label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!`exists, `>`/`<`) and field
 * selectors (`=`, `==`, `!=` on the fields a kind supports), parsed from query strings the way
 * the real API server reads them; a selector it cannot read is a 400, never "match everything".
 *
 * @module
 */
import type { Obj } from "./resources.ts";
import { badRequest } from "./status.ts";

/** A compiled selector: true when the object matches. */
export type Matcher = (obj: Obj) => boolean;

type LabelOp = "=" | "!=" | "in" | "notin" | "exists" | "!exists" | ">" | "<";

interface LabelRequirement {
  readonly key: string;
  readonly op: LabelOp;
  readonly values: readonly string[];
}

const KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "," && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== "");
}

function checkKey(key: string, selector: string): string {
  if (!KEY.test(key)) {
    throw badRequest(
      `unable to parse requirement: invalid label key "${key}" in selector "${selector}"`,
    );
  }
  return key;
}

function checkValue(value: string, selector: string): string {
  if (!VALUE.test(value)) {
    throw badRequest(
      `unable to parse requirement: invalid label value "${value}" in selector "${selector}"`,
    );
  }
  return value;
}

function parseRequirement(part: string, selector: string): LabelRequirement {
  const set = part.match(/^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/);
  if (set) {
    const values = set[3]!.split(",").map((v) => checkValue(v.trim(), selector));
    return { key: checkKey(set[1]!, selector), op: set[2] as LabelOp, values };
  }
  const cmp = part.match(/^([^=!<>\s]+)\s*(==|=|!=|>|<)\s*(\S*)$/);
  if (cmp) {
    const op = cmp[2] === "==" ? "=" : cmp[2] as LabelOp;
    if ((op === ">" || op === "<") && !/^-?\d+$/.test(cmp[3]!)) {
      throw badRequest(
        `unable to parse requirement: for "${op}" the value must be an integer in selector "${selector}"`,
      );
    }
    return { key: checkKey(cmp[1]!, selector), op, values: [checkValue(cmp[3]!, selector)] };
  }
  if (part.startsWith("!")) {
    return { key: checkKey(part.slice(1).trim(), selector), op: "!exists", values: [] };
  }
  if (!/\s/.test(part)) return { key: checkKey(part, selector), op: "exists", values: [] };
  throw badRequest(
    `unable to parse requirement: cannot read "${part}" in label selector "${selector}"`,
  );
}

function matchRequirement(r: LabelRequirement, labels: Record<string, string>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = labels[r.key];
  switch (r.op) {
    case "=":
      return has && value === r.values[0];
    case "!=":
      return !has || value !== r.values[0];
    case "in":
      return has && r.values.includes(value!);
    case "notin":
      return !has || !r.values.includes(value!);
    case "exists":
      return has;
    case "!exists":
      return !has;
    case ">":
    case "<": {
      if (!has || !/^-?\d+$/.test(value!)) return false;
      const n = Number(value);
      const bound = Number(r.values[0]);
      return r.op === ">" ? n > bound : n < bound;
    }
  }
}

/** Compiles a `labelSelector` query value; empty or absent matches everything. */
export function parseLabelSelector(selector: string | null): Matcher {
  if (!selector?.trim()) return () => true;
  const reqs = splitTopLevel(selector).map((p) => parseRequirement(p, selector));
  return (obj) => {
    const labels = (((obj.metadata ?? {}) as Obj).labels ?? {}) as Record<string, string>;
    return reqs.every((r) => matchRequirement(r, labels));
  };
}

/** The value of a dotted field path as a field selector compares it (absent → `""`). */
export function fieldValue(obj: Obj, path: string): string {
  let cur: unknown = obj;
  for (const seg of path.split(".")) {
    if (cur === null || typeof cur !== "object") return "";
    cur = (cur as Obj)[seg];
  }
  if (cur === undefined || cur === null) return "";
  return typeof cur === "object" ? JSON.stringify(cur) : String(cur);
}

function unescapeField(v: string): string {
  return v.replace(/\\(.)/g, "$1");
}

/**
 * Compiles a `fieldSelector` query value. `metadata.name` and `metadata.namespace` always work;
 * other fields only when listed in `supported`, else a 400 naming the field.
 */
export function parseFieldSelector(selector: string | null, supported: readonly string[]): Matcher {
  if (!selector?.trim()) return () => true;
  const reqs = selector.split(/(?<!\\),/).map((part) => {
    const m = part.trim().match(/^([^=!]+?)\s*(==|=|!=)\s*(.*)$/);
    if (!m) throw badRequest(`invalid field selector: cannot read "${part}" in "${selector}"`);
    const field = m[1]!;
    if (field !== "metadata.name" && field !== "metadata.namespace" && !supported.includes(field)) {
      throw badRequest(
        `field label not supported: ${field} (this server supports metadata.name, metadata.namespace` +
          (supported.length ? `, ${supported.join(", ")}` : "") + ")",
      );
    }
    return { field, negate: m[2] === "!=", value: unescapeField(m[3]!) };
  });
  return (obj) => reqs.every((r) => (fieldValue(obj, r.field) === r.value) !== r.negate);
}
