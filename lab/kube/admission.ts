/**
 * Admission: what the server checks before it stores an object (names, fields against the
 * kind's schema, CRDs it can serve). A CRD with a CEL rule outside the supported subset
 * (`cel.ts`) is refused rather than stored with a rule nobody enforces.
 *
 * @module
 */
import { CRD_GROUP, isObj, type Obj, type ResourceType, typesFromCrd } from "./resources.ts";
import { admit, unsupportedSchemaFeatures } from "./schema.ts";
import { checkBuiltin } from "./builtin_schema.ts";
import { validateBuiltin } from "./builtin_validation.ts";
import { validateObjectMeta } from "./meta_validation.ts";
import { badRequest, invalid, type StatusCause } from "./status.ts";
import type { WriteOptions } from "./rest.ts";

function meta(obj: Obj): Obj {
  return (obj.metadata ??= {}) as Obj;
}

/**
 * Checks an object about to be stored (`previous`: the stored one, on an update): its metadata
 * (`meta_validation.ts`), its fields (built-ins against client-node's
 * models, custom objects against their CRD schema, pruned and defaulted), a CRD's own
 * servability. Unknown fields: a 400 under `fieldValidation=Strict`, else warnings.
 */
export function admitObject(
  type: ResourceType,
  obj: Obj,
  opts: WriteOptions,
  previous?: Obj,
): { obj: Obj; warnings: string[] } {
  const m = meta(obj);
  const causes: StatusCause[] = validateObjectMeta(type.group, type.kind, obj, previous);
  const name = String(m.name ?? "");
  let warnings: string[] = [];
  const unknownFields = (fields: string[]) => {
    if (fields.length === 0) return;
    if (opts.fieldValidation === "Strict") {
      throw badRequest(
        `strict decoding error: ${fields.map((f) => `unknown field "${f}"`).join(", ")}`,
      );
    }
    if (opts.fieldValidation !== "Ignore") warnings = fields.map((f) => `unknown field "${f}"`);
  };
  if (type.custom) {
    const r = admit(type.schema, obj);
    causes.push(...r.causes);
    unknownFields(r.unknownFields);
    obj = r.value;
  } else if (type.model) {
    const r = checkBuiltin(type.model, obj);
    if (r.typeErrors.length > 0) {
      throw badRequest(
        `${type.kind} in version "${type.version}" cannot be handled as a ${type.kind}: ${
          r.typeErrors.join("; ")
        }`,
      );
    }
    unknownFields(r.unknownFields);
    causes.push(...validateBuiltin(type.group, type.kind, obj, previous));
  }
  if (type.group === CRD_GROUP && type.kind === "CustomResourceDefinition") {
    causes.push(...crdCauses(obj));
  }
  if (causes.length > 0) {
    throw invalid(type.kind, { plural: type.plural, group: type.group, name }, causes);
  }
  return { obj, warnings };
}

/** Why a CRD cannot be served by this server (empty when it can). */
function crdCauses(crd: Obj): StatusCause[] {
  const causes: StatusCause[] = [];
  const spec = (crd.spec ?? {}) as Obj;
  const names = (spec.names ?? {}) as Obj;
  const name = String((crd.metadata as Obj).name);
  if (name !== `${names.plural}.${spec.group}`) {
    causes.push({
      reason: "FieldValueInvalid",
      field: "metadata.name",
      message: `Invalid value: "${name}": must be spec.names.plural+"."+spec.group`,
    });
  }
  const versions = (spec.versions ?? []) as Obj[];
  if (versions.length === 0) {
    causes.push({
      reason: "FieldValueRequired",
      field: "spec.versions",
      message: "Required value: must have exactly one version marked as storage version",
    });
  }
  if (versions.filter((v) => v.storage === true).length !== 1) {
    causes.push({
      reason: "FieldValueInvalid",
      field: "spec.versions",
      message: "Invalid value: must have exactly one version marked as storage version",
    });
  }
  if (!["Namespaced", "Cluster"].includes(String(spec.scope))) {
    causes.push({
      reason: "FieldValueNotSupported",
      field: "spec.scope",
      message: `Unsupported value: "${spec.scope}": supported values: "Cluster", "Namespaced"`,
    });
  }
  versions.forEach((v, i) => {
    const schema = ((v.schema ?? {}) as Obj).openAPIV3Schema;
    if (!isObj(schema)) {
      causes.push({
        reason: "FieldValueRequired",
        field: `spec.versions[${i}].schema.openAPIV3Schema`,
        message: "Required value: schemas are required",
      });
    }
    for (
      const f of unsupportedSchemaFeatures(schema, `spec.versions[${i}].schema.openAPIV3Schema`)
    ) {
      const at = f.indexOf(": ");
      causes.push({
        reason: "FieldValueForbidden",
        field: f.slice(0, at),
        message: `Forbidden: ${f.slice(at + 2)}: not supported by the Holdfast test API server`,
      });
    }
  });
  if (causes.length === 0) {
    try {
      typesFromCrd(crd);
    } catch (e) {
      causes.push({ reason: "FieldValueInvalid", field: "spec", message: (e as Error).message });
    }
  }
  return causes;
}
