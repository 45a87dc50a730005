/**
 * Field checking for built-in kinds, from the models of the real `@kubernetes/client-node`
 * (each model's `attributeTypeMap`: JSON field names and types). Unknown fields are pruned and
 * reported (the server refuses them under `fieldValidation=Strict`, as kubectl asks); a value of
 * the wrong JSON type is a 400, as the real server's decoder answers.
 *
 * @module
 */
import * as k8s from "@kubernetes/client-node";
import { isObj, type Obj } from "./resources.ts";

interface Attribute {
  readonly baseName: string;
  readonly type: string;
  readonly format: string;
}

type Model = { getAttributeTypeMap?: () => Attribute[] };
const MODELS = k8s as unknown as Record<string, Model | undefined>;

/** What {@linkcode checkBuiltin} found. */
export interface BuiltinCheck {
  /** Paths of unknown fields (pruned from the object). */
  readonly unknownFields: string[];
  /** Wrong-type errors, `path: expected T, got U`. */
  readonly typeErrors: string[];
}

function jsonType(v: unknown): string {
  return Array.isArray(v) ? "array" : v === null ? "null" : typeof v;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A model's type string parsed once: `Array<T>` (element T), `{ [key: string]: T; }` (value T). */
interface Shape {
  readonly array?: string;
  readonly map?: string;
}
const shapes = new Map<string, Shape>();
function shapeOf(type: string): Shape {
  let shape = shapes.get(type);
  if (shape === undefined) {
    const array = type.match(/^Array<(.+)>$/);
    const map = type.match(/^\{ \[key: string\]: (.+); \}$/);
    shape = array ? { array: array[1]! } : map ? { map: map[1]! } : {};
    shapes.set(type, shape);
  }
  return shape;
}

/** A model's attributes by JSON name, read once (undefined: no such model). */
const attributes = new Map<string, Map<string, Attribute> | undefined>();
function attributesOf(name: string): Map<string, Attribute> | undefined {
  if (attributes.has(name)) return attributes.get(name);
  const list = MODELS[name]?.getAttributeTypeMap?.();
  // The first of a JSON name wins, as `find` did.
  const byName = list && new Map([...list].reverse().map((a) => [a.baseName, a]));
  attributes.set(name, byName);
  return byName;
}

class Checker {
  readonly unknownFields: string[] = [];
  readonly typeErrors: string[] = [];

  value(type: string, format: string, v: unknown, path: string): void {
    if (v === null) return;
    const shape = shapeOf(type);
    if (shape.array !== undefined) {
      if (!Array.isArray(v)) return this.wrong(path, "array", v);
      v.forEach((e, i) => this.value(shape.array!, "", e, `${path}[${i}]`));
    } else if (shape.map !== undefined) {
      if (!isObj(v)) return this.wrong(path, "object", v);
      for (const [k, e] of Object.entries(v)) this.value(shape.map, format, e, `${path}[${k}]`);
    } else if (type === "string" || type === "Date" || type === "V1MicroTime") {
      if (typeof v !== "string") return this.wrong(path, "string", v);
      if (format === "byte" && !BASE64.test(v.replace(/\s/g, ""))) {
        this.typeErrors.push(`${path}: illegal base64 data in "${v.slice(0, 20)}"`);
      }
    } else if (type === "number") {
      if (typeof v !== "number") return this.wrong(path, "number", v);
      if (format.startsWith("int") && !Number.isInteger(v)) this.wrong(path, "integer", v);
    } else if (type === "boolean") {
      if (typeof v !== "boolean") this.wrong(path, "boolean", v);
    } else if (type === "IntOrString") {
      if (typeof v !== "string" && !Number.isInteger(v)) this.wrong(path, "integer or string", v);
    } else if (type !== "any" && type !== "object") {
      this.model(type, v, path);
    }
  }

  model(name: string, v: unknown, path: string): void {
    const attrs = attributesOf(name);
    if (!attrs) return; // an opaque type (RawExtension-like): any JSON is accepted, as upstream.
    if (!isObj(v)) return this.wrong(path, "object", v);
    for (const key of Object.keys(v)) {
      const a = attrs.get(key);
      const at = path ? `${path}.${key}` : key;
      if (!a) {
        this.unknownFields.push(at);
        delete v[key];
      } else this.value(a.type, a.format, v[key], at);
    }
  }

  wrong(path: string, want: string, v: unknown): void {
    this.typeErrors.push(`${path}: expected ${want}, got ${jsonType(v)}`);
  }
}

/**
 * Checks (and prunes) `obj` against client-node's model `model` (e.g. `V1Service`).
 * Throws when the model is missing: the resource table names a model client-node lacks.
 */
export function checkBuiltin(model: string, obj: Obj): BuiltinCheck {
  if (!MODELS[model]?.getAttributeTypeMap) {
    throw new Error(
      `Cannot check built-in object: @kubernetes/client-node has no model "${model}"`,
    );
  }
  const c = new Checker();
  c.model(model, obj, "");
  return { unknownFields: c.unknownFields, typeErrors: c.typeErrors };
}
