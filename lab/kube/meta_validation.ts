/**
 * ObjectMeta validation as the real API server does it (apimachinery's `ValidateObjectMeta` and
 * `ValidateObjectMetaUpdate`), for every kind: the name by the kind's rule (a DNS-1035 label for
 * Services, an RFC 1123 label for Namespaces, a path segment for RBAC objects, an RFC 1123
 * subdomain for the rest), label keys and values, annotation keys and their total size
 * (256 KiB), finalizer names, and no new finalizer on an object being deleted. Messages are the
 * real server's (`a lowercase RFC 1123 label must consist of ...`, `must be no more than 63
 * characters`, `Too long: may not be more than 262144 bytes`).
 *
 * @module
 */
import { isObj, type Obj } from "./resources.ts";
import type { StatusCause } from "./status.ts";

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** The total size of a object's annotations (keys and values), as `TotalAnnotationSizeLimitB`. */
export const ANNOTATIONS_LIMIT = 256 * 1024;

const maxLen = (n: number) => `must be no more than ${n} characters`;

/** apimachinery's `RegexError`: the rule, examples and the regex. */
function regexError(rule: string, regex: string, ...examples: string[]): string {
  const e = examples.length ? ` (e.g. ${examples.map((x) => `'${x}'`).join(",  or ")}, ` : " (";
  return `${rule}${e}regex used for validation is '${regex}')`;
}

const LABEL_MSG = regexError(
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
  "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
  "my-name",
  "123-abc",
);
const SUBDOMAIN_MSG = regexError(
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
  "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
  "example.com",
);
const DNS1035_MSG = regexError(
  "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
  "[a-z]([-a-z0-9]*[a-z0-9])?",
  "my-name",
  "abc-123",
);
const QUALIFIED_MSG = regexError(
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
  "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]",
  "MyName",
  "my.name",
  "123-abc",
);
const LABEL_VALUE_MSG = regexError(
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
  "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
  "MyValue",
  "my_value",
  "12345",
);

/** `IsDNS1123Label`: problems with `v` as an RFC 1123 label (empty when fine). */
export function dns1123Label(v: string): string[] {
  const out = v.length > 63 ? [maxLen(63)] : [];
  if (!DNS1123_LABEL.test(v)) out.push(LABEL_MSG);
  return out;
}

/** `IsDNS1123Subdomain`. */
export function dns1123Subdomain(v: string): string[] {
  const out = v.length > 253 ? [maxLen(253)] : [];
  if (!DNS1123_SUBDOMAIN.test(v)) out.push(SUBDOMAIN_MSG);
  return out;
}

/** `IsDNS1035Label`. */
export function dns1035Label(v: string): string[] {
  const out = v.length > 63 ? [maxLen(63)] : [];
  if (!DNS1035_LABEL.test(v)) out.push(DNS1035_MSG);
  return out;
}

/** `IsQualifiedName`: `[prefix/]name`, a label key, an annotation key, a finalizer. */
export function qualifiedName(v: string): string[] {
  const parts = v.split("/");
  let name = v;
  const out: string[] = [];
  if (parts.length === 2) {
    const [prefix, n] = parts as [string, string];
    name = n;
    if (prefix.length === 0) out.push("prefix part must be non-empty");
    else out.push(...dns1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  } else if (parts.length > 2) {
    return [
      `a qualified name ${QUALIFIED_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  }
  if (name.length === 0) out.push("name part must be non-empty");
  else if (name.length > 63) out.push(`name part ${maxLen(63)}`);
  if (!QUALIFIED_NAME.test(name)) out.push(`name part ${QUALIFIED_MSG}`);
  return out;
}

/** `IsValidLabelValue`. */
export function labelValue(v: string): string[] {
  const out = v.length > 63 ? [maxLen(63)] : [];
  if (!LABEL_VALUE.test(v)) out.push(LABEL_VALUE_MSG);
  return out;
}

/** A field error as the real server words it: `Invalid value: "x": why`. */
export function invalidCause(field: string, value: unknown, why: string): StatusCause {
  return {
    reason: "FieldValueInvalid",
    field,
    message: `Invalid value: ${goValue(value)}: ${why}`,
  };
}

/** A value as Go's `%#v`/`%q` prints it in field errors (strings quoted, `[]string{...}`). */
export function goValue(v: unknown): string {
  if (Array.isArray(v) && v.every((x) => typeof x === "string")) {
    return `[]string{${v.map((x) => JSON.stringify(x)).join(", ")}}`;
  }
  return v === undefined ? "null" : JSON.stringify(v);
}

/** `ValidateLabels`: keys qualified names, values label values, all at `field`. */
export function validateLabels(labels: unknown, field: string): StatusCause[] {
  if (!isObj(labels)) return [];
  const out: StatusCause[] = [];
  for (const [k, v] of Object.entries(labels)) {
    for (const m of qualifiedName(k)) out.push(invalidCause(field, k, m));
    for (const m of labelValue(String(v ?? ""))) out.push(invalidCause(field, v, m));
  }
  return out;
}

/** Which rule names of a kind follow. */
export type NameRule = "dns1035" | "label" | "subdomain" | "path" | "none";

/** The name rule the real server applies to `group`/`kind`. */
export function nameRule(group: string, kind: string): NameRule {
  if (group === "" && kind === "Service") return "dns1035";
  if (group === "" && kind === "Namespace") return "label";
  if (group === "rbac.authorization.k8s.io") return "path";
  if (group === "apiextensions.k8s.io") return "none"; // plural.group, checked with the CRD
  return "subdomain";
}

function nameProblems(rule: NameRule, name: string, prefix: boolean): string[] {
  // A generateName may end in '-': the real server checks it masked (`maskTrailingDash`, which
  // replaces the last two characters by 'a').
  const v = prefix && name.length > 1 && name.endsWith("-") ? `${name.slice(0, -2)}a` : name;
  switch (rule) {
    case "dns1035":
      return dns1035Label(v);
    case "label":
      return dns1123Label(v);
    case "subdomain":
      return dns1123Subdomain(v);
    case "path":
      return [".", ".."].includes(name)
        ? [`may not be '${name}'`]
        : [...name].flatMap((c) => c === "/" || c === "%" ? [`may not contain '${c}'`] : []);
    default:
      return [];
  }
}

/**
 * `ValidateObjectMeta` (and `ValidateObjectMetaUpdate` when `old` is given) for an object of
 * `group`/`kind`.
 */
export function validateObjectMeta(
  group: string,
  kind: string,
  obj: Obj,
  old?: Obj,
): StatusCause[] {
  const m = (obj.metadata ?? {}) as Obj;
  const out: StatusCause[] = [];
  const rule = nameRule(group, kind);
  const name = typeof m.name === "string" ? m.name : "";
  if (!name) {
    out.push({
      reason: "FieldValueRequired",
      field: "metadata.name",
      message: "Required value: name or generateName is required",
    });
  } else {
    for (const why of nameProblems(rule, name, false)) {
      out.push(invalidCause("metadata.name", name, why));
    }
  }
  if (typeof m.generateName === "string" && m.generateName && !old) {
    for (const why of nameProblems(rule, m.generateName, true)) {
      out.push(invalidCause("metadata.generateName", m.generateName, why));
    }
  }
  out.push(...validateLabels(m.labels, "metadata.labels"));
  out.push(...annotations(m.annotations));
  const finalizers = Array.isArray(m.finalizers) ? m.finalizers.map(String) : [];
  for (const f of finalizers) {
    for (const why of qualifiedName(f)) out.push(invalidCause("metadata.finalizers", f, why));
  }
  const oldMeta = (old?.metadata ?? {}) as Obj;
  if (old && oldMeta.deletionTimestamp) {
    const before = new Set(Array.isArray(oldMeta.finalizers) ? oldMeta.finalizers.map(String) : []);
    const extra = [...new Set(finalizers.filter((f) => !before.has(f)))].sort();
    if (extra.length > 0) {
      out.push({
        reason: "FieldValueForbidden",
        field: "metadata.finalizers",
        message:
          `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers ${
            goValue(extra)
          }`,
      });
    }
  }
  return out;
}

function annotations(value: unknown): StatusCause[] {
  if (!isObj(value)) return [];
  const out: StatusCause[] = [];
  let size = 0;
  const enc = new TextEncoder();
  for (const [k, v] of Object.entries(value)) {
    for (const why of qualifiedName(k.toLowerCase())) {
      out.push(invalidCause("metadata.annotations", k, why));
    }
    size += enc.encode(k).length + enc.encode(String(v ?? "")).length;
  }
  if (size > ANNOTATIONS_LIMIT) {
    out.push({
      reason: "FieldValueTooLong",
      field: "metadata.annotations",
      message: `Too long: may not be more than ${ANNOTATIONS_LIMIT} bytes`,
    });
  }
  return out;
}
