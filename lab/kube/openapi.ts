/**
 * The OpenAPI v3 documents kubectl reads before `apply`/`create`/`patch`: an index of group
 * versions (`/openapi/v3`) and, per group version, the PATCH operation of each kind with its
 * `x-kubernetes-group-version-kind` and the query parameters the server honours
 * (`fieldValidation`, `dryRun`, `fieldManager`, `force`). kubectl then leaves validation to the
 * server (`fieldValidation=Strict`), which checks built-ins against client-node's models and
 * custom resources against their CRD schema. No component schemas: `kubectl explain` is refused.
 *
 * @module
 */
import { apiVersionOf, type Obj, type ResourceType } from "./resources.ts";
import type { Registry } from "./registry.ts";

function gvPath(t: ResourceType): string {
  return t.group ? `apis/${t.group}/${t.version}` : `api/${t.version}`;
}

/** `/openapi/v3`: the group versions and where their documents are. */
export function openApiIndex(registry: Registry): Obj {
  const paths: Obj = {};
  for (const t of registry.types) {
    const p = gvPath(t);
    paths[p] = { serverRelativeURL: `/openapi/v3/${p}?hash=${hash(registry, p)}` };
  }
  return { paths };
}

function hash(registry: Registry, gv: string): string {
  const text = registry.types.filter((t) => gvPath(t) === gv).map((t) =>
    `${t.kind}:${t.plural}:${JSON.stringify(t.schema ?? {})}`
  ).join("|");
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0;
  return h.toString(16).toUpperCase().padStart(8, "0");
}

const PARAMS = ["fieldValidation", "dryRun", "fieldManager", "force"].map((name) => ({
  name,
  in: "query",
  schema: { type: name === "force" ? "boolean" : "string", uniqueItems: true },
}));

function patchOperation(t: ResourceType, sub: string): Obj {
  const types = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
  ];
  if (!t.custom) types.push("application/strategic-merge-patch+json");
  return {
    patch: {
      operationId: `patch${t.kind}${sub}`,
      "x-kubernetes-action": "patch",
      "x-kubernetes-group-version-kind": { group: t.group, version: t.version, kind: t.kind },
      parameters: PARAMS,
      requestBody: {
        content: Object.fromEntries(types.map((c) => [c, { schema: { type: "object" } }])),
        required: true,
      },
      responses: { "200": { description: "OK" } },
    },
  };
}

/** `/openapi/v3/api/v1` or `/openapi/v3/apis/GROUP/VERSION`, or undefined when not served. */
export function openApiGroupVersion(registry: Registry, gv: string): Obj | undefined {
  const types = registry.types.filter((t) => gvPath(t) === gv);
  if (types.length === 0) return undefined;
  const paths: Obj = {};
  for (const t of types) {
    const base = `/${gvPath(t)}${t.namespaced ? "/namespaces/{namespace}" : ""}/${t.plural}/{name}`;
    paths[base] = patchOperation(t, "");
    if (t.status) paths[`${base}/status`] = patchOperation(t, "Status");
  }
  return {
    openapi: "3.0.0",
    info: { title: "Kubernetes (Holdfast test API server)", version: apiVersionOf(types[0]!) },
    paths,
    components: {},
  };
}
