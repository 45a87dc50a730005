/**
 * CRD `openAPIV3Schema` handling as the API server does it for structural schemas: prune unknown
 * fields (reported, so `fieldValidation=Strict` can refuse them), apply `default`s, then
 * validate type, properties, required, enum, pattern, format (ipv4, cidr, date-time),
 * minimum/maximum, min/maxLength, min/maxItems, min/maxProperties, items, additionalProperties,
 * allOf/anyOf/oneOf/not, `x-kubernetes-int-or-string` and `x-kubernetes-preserve-unknown-fields`.
 * CEL rules (`x-kubernetes-validations`) are evaluated with the subset in `cel.ts`;
 * {@linkcode unsupportedSchemaFeatures} finds rules outside it, so the server refuses such a CRD
 * instead of ignoring its rules.
 *
 * @module
 */
import { isObj, type Obj } from "./resources.ts";
import type { StatusCause } from "./status.ts";
import { type CelProgram, compileCel } from "./cel.ts";

/** What {@linkcode admit} found. */
export interface SchemaResult {
  /** The object, pruned and defaulted. */
  readonly value: Obj;
  /** Validation failures, with field paths (`spec.blocks[0].cidr`). */
  readonly causes: StatusCause[];
  /** Paths of fields the schema does not know (pruned from `value`). */
  readonly unknownFields: string[];
}

type Schema = Obj;

function show(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v) : JSON.stringify(v) ?? String(v);
}

function typeOf(v: unknown): string {
  if (Array.isArray(v)) return "array";
  if (v === null) return "null";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function typeMatches(schema: Schema, v: unknown): boolean {
  if (schema["x-kubernetes-int-or-string"] === true) {
    return typeof v === "string" || Number.isInteger(v);
  }
  const want = schema.type as string | undefined;
  if (!want) return true;
  const got = typeOf(v);
  return got === want || (want === "number" && got === "integer");
}

const FORMATS: Record<string, RegExp> = {
  ipv4: /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/,
  cidr:
    /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\/(3[0-2]|[12]?\d)$/,
  "date-time": /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/,
};

const compiled = new Map<string, CelProgram>();

function program(rule: string): CelProgram {
  let p = compiled.get(rule);
  if (!p) compiled.set(rule, p = compileCel(rule));
  return p;
}

/** Schema features this server cannot honour, as `path: feature` lines (empty when none). */
export function unsupportedSchemaFeatures(schema: unknown, path = "openAPIV3Schema"): string[] {
  if (!isObj(schema)) return [];
  const out: string[] = [];
  const rules = schema["x-kubernetes-validations"];
  if (rules !== undefined) {
    for (const r of Array.isArray(rules) ? rules : [rules]) {
      const rule = isObj(r) ? r : {};
      try {
        if (typeof rule.rule !== "string") throw new Error("a rule must be a string");
        if (rule.messageExpression !== undefined) {
          throw new Error("messageExpression is not supported");
        }
        if (rule.optionalOldSelf !== undefined) throw new Error("optionalOldSelf is not supported");
        program(rule.rule);
      } catch (e) {
        out.push(
          `${path}.x-kubernetes-validations: CEL rule ${JSON.stringify(rule.rule)} (${
            (e as Error).message
          })`,
        );
      }
    }
  }
  for (const [k, v] of Object.entries(schema)) {
    if (k === "properties" && isObj(v)) {
      for (const [p, s] of Object.entries(v)) {
        out.push(...unsupportedSchemaFeatures(s, `${path}.properties.${p}`));
      }
    } else if ((k === "items" || k === "additionalProperties" || k === "not") && isObj(v)) {
      out.push(...unsupportedSchemaFeatures(v, `${path}.${k}`));
    } else if ((k === "allOf" || k === "anyOf" || k === "oneOf") && Array.isArray(v)) {
      v.forEach((s, i) => out.push(...unsupportedSchemaFeatures(s, `${path}.${k}[${i}]`)));
    }
  }
  return out;
}

class Walker {
  readonly causes: StatusCause[] = [];
  readonly unknown: string[] = [];
  constructor(readonly prune: boolean) {}

  invalid(path: string, value: unknown, message: string): void {
    this.causes.push({
      reason: "FieldValueInvalid",
      field: path,
      message: `Invalid value: ${show(value)}: ${message}`,
    });
  }

  /** Prunes and defaults `v` in place (objects) and returns the value to keep. */
  walk(schema: Schema, v: unknown, path: string): unknown {
    if (!typeMatches(schema, v)) {
      const want = schema["x-kubernetes-int-or-string"] ? "integer or string" : schema.type;
      this.invalid(path, typeOf(v), `${path} in body must be of type ${want}: ${show(typeOf(v))}`);
      return v;
    }
    if (isObj(v)) this.object(schema, v, path);
    else if (Array.isArray(v) && isObj(schema.items)) {
      v.forEach((e, i) => (v[i] = this.walk(schema.items as Schema, e, `${path}[${i}]`)));
    }
    this.checks(schema, v, path);
    return v;
  }

  object(schema: Schema, v: Obj, path: string): void {
    const props = (schema.properties ?? {}) as Record<string, Schema>;
    const preserve = schema["x-kubernetes-preserve-unknown-fields"] === true;
    const extra = schema.additionalProperties;
    const at = (k: string) => (path ? `${path}.${k}` : k);
    for (const [k, s] of Object.entries(props)) {
      if (v[k] === null && s.nullable !== true) delete v[k];
      if (v[k] === undefined && s.default !== undefined) v[k] = structuredClone(s.default);
    }
    for (const k of Object.keys(v)) {
      if (path === "" && (k === "apiVersion" || k === "kind" || k === "metadata")) continue;
      const s = props[k] ?? (isObj(extra) ? extra : undefined);
      if (s) {
        if (v[k] === null && s.nullable === true) continue;
        v[k] = this.walk(s, v[k], at(k));
      } else if (!preserve && extra !== true && this.prune) {
        this.unknown.push(at(k));
        delete v[k];
      }
    }
    for (const r of (schema.required ?? []) as string[]) {
      if (v[r] === undefined) {
        this.causes.push({ reason: "FieldValueRequired", field: at(r), message: "Required value" });
      }
    }
  }

  checks(schema: Schema, v: unknown, path: string): void {
    const where = `${path || "<root>"} in body`;
    if (
      Array.isArray(schema.enum) &&
      !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))
    ) {
      this.causes.push({
        reason: "FieldValueNotSupported",
        field: path,
        message: `Unsupported value: ${show(v)}: supported values: ${
          schema.enum.map(show).join(", ")
        }`,
      });
    }
    if (typeof v === "string") {
      if (typeof schema.pattern === "string" && !new RegExp(schema.pattern, "u").test(v)) {
        this.invalid(path, v, `${where} should match '${schema.pattern}'`);
      }
      const fmt = FORMATS[String(schema.format)];
      if (fmt && !fmt.test(v)) {
        this.invalid(path, v, `${where} must be of type ${schema.format}: ${show(v)}`);
      }
      if (typeof schema.minLength === "number" && [...v].length < schema.minLength) {
        this.invalid(path, v, `${where} should be at least ${schema.minLength} chars long`);
      }
      if (typeof schema.maxLength === "number" && [...v].length > schema.maxLength) {
        this.causes.push({
          reason: "FieldValueTooLong",
          field: path,
          message: `Too long: may not be longer than ${schema.maxLength}`,
        });
      }
    }
    if (typeof v === "number") {
      const min = schema.minimum as number | undefined;
      const max = schema.maximum as number | undefined;
      if (min !== undefined && (schema.exclusiveMinimum ? v <= min : v < min)) {
        this.invalid(
          path,
          v,
          `${where} should be greater than ${schema.exclusiveMinimum ? "" : "or equal to "}${min}`,
        );
      }
      if (max !== undefined && (schema.exclusiveMaximum ? v >= max : v > max)) {
        this.invalid(
          path,
          v,
          `${where} should be less than ${schema.exclusiveMaximum ? "" : "or equal to "}${max}`,
        );
      }
    }
    if (Array.isArray(v)) {
      if (typeof schema.minItems === "number" && v.length < schema.minItems) {
        this.invalid(path, v.length, `${where} should have at least ${schema.minItems} items`);
      }
      if (typeof schema.maxItems === "number" && v.length > schema.maxItems) {
        this.causes.push({
          reason: "FieldValueTooMany",
          field: path,
          message: `Too many: ${v.length}: must have at most ${schema.maxItems} items`,
        });
      }
      if (
        schema["x-kubernetes-list-type"] === "set" &&
        new Set(v.map((e) => JSON.stringify(e))).size !== v.length
      ) {
        this.causes.push({
          reason: "FieldValueDuplicate",
          field: path,
          message: "Duplicate value",
        });
      }
    }
    if (isObj(v)) {
      const n = Object.keys(v).length;
      if (typeof schema.minProperties === "number" && n < schema.minProperties) {
        this.invalid(path, n, `${where} should have at least ${schema.minProperties} properties`);
      }
      if (typeof schema.maxProperties === "number" && n > schema.maxProperties) {
        this.invalid(path, n, `${where} should have at most ${schema.maxProperties} properties`);
      }
    }
    this.combinators(schema, v, path);
    this.rules(schema, v, path);
  }

  rules(schema: Schema, v: unknown, path: string): void {
    const rules = schema["x-kubernetes-validations"];
    if (!Array.isArray(rules)) return;
    const shown = isObj(v) ? "object" : Array.isArray(v) ? "array" : v;
    for (const r of rules as Obj[]) {
      const rule = String(r.rule);
      let ok: unknown;
      let why = String(r.message ?? `failed rule: ${rule}`);
      try {
        ok = program(rule)(v);
      } catch (e) {
        ok = false;
        why = `${(e as Error).message} evaluating rule: ${rule}`;
      }
      if (ok === true) continue;
      const fieldPath = typeof r.fieldPath === "string" ? r.fieldPath : "";
      const field = `${path}${fieldPath}`;
      const reason = String(r.reason ?? "FieldValueInvalid");
      const prefix: Record<string, string> = {
        FieldValueForbidden: "Forbidden",
        FieldValueRequired: "Required value",
        FieldValueDuplicate: "Duplicate value",
      };
      const message = prefix[reason]
        ? `${prefix[reason]}: ${why}`
        : `Invalid value: ${show(shown)}: ${why}`;
      this.causes.push({ reason, field, message });
    }
  }

  combinators(schema: Schema, v: unknown, path: string): void {
    const passes = (s: Schema) => {
      const w = new Walker(false);
      w.walk(s, structuredClone(v), path);
      return w.causes.length === 0;
    };
    for (const s of (schema.allOf ?? []) as Schema[]) {
      const w = new Walker(false);
      w.walk(s, structuredClone(v), path);
      this.causes.push(...w.causes);
    }
    const any = schema.anyOf as Schema[] | undefined;
    if (any && !any.some(passes)) {
      this.invalid(path, v, `${path || "<root>"} in body must match at least one schema in anyOf`);
    }
    const one = schema.oneOf as Schema[] | undefined;
    if (one && one.filter(passes).length !== 1) {
      this.invalid(path, v, `${path || "<root>"} in body must match exactly one schema in oneOf`);
    }
    if (isObj(schema.not) && passes(schema.not)) {
      this.invalid(path, v, `${path || "<root>"} in body must not match the schema in not`);
    }
  }
}

/**
 * Prunes, defaults and validates a custom object against its CRD version's schema.
 *
 * @example
 * ```ts
 * import { admit } from "./schema.ts";
 * const schema = { type: "object", properties: { spec: { type: "object", properties: {
 *   replicas: { type: "integer", minimum: 2, default: 2 } } } } };
 * const r = admit(schema, { apiVersion: "x/v1", kind: "X", metadata: {}, spec: {} });
 * console.assert((r.value.spec as { replicas: number }).replicas === 2);
 * ```
 */
export function admit(schema: Obj | undefined, obj: Obj): SchemaResult {
  const value = structuredClone(obj);
  if (!schema) return { value, causes: [], unknownFields: [] };
  const w = new Walker(true);
  w.walk(schema, value, "");
  return { value, causes: w.causes, unknownFields: w.unknown };
}
