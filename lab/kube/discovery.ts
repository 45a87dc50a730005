/**
 * Discovery documents (`/api`, `/api/v1`, `/apis`, `/apis/GROUP`, `/apis/GROUP/VERSION`) and
 * `/version`, in the legacy (unaggregated) form: clients that ask for aggregated discovery
 * (`as=APIGroupDiscoveryList`) get this form and fall back, as they do with older servers.
 *
 * @module
 */
import { apiVersionOf, type Obj, type ResourceType } from "./resources.ts";
import type { Registry } from "./registry.ts";

const VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/** `/version`: the Kubernetes version this server imitates. */
export function versionInfo(): Obj {
  return {
    major: "1",
    minor: "32",
    gitVersion: "v1.32.0-holdfast-test",
    gitCommit: "0000000000000000000000000000000000000000",
    gitTreeState: "clean",
    buildDate: "2026-01-01T00:00:00Z",
    goVersion: "deno",
    compiler: "deno",
    platform: "linux/amd64",
  };
}

/** `/api`. */
export function coreVersions(serverAddress: string): Obj {
  return {
    kind: "APIVersions",
    versions: ["v1"],
    serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress }],
  };
}

function groupDoc(name: string, versions: readonly string[]): Obj {
  const list = versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
  return { name, versions: list, preferredVersion: list[0] };
}

/** `/apis`. */
export function groupList(registry: Registry): Obj {
  return {
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: registry.groups().map((g) => groupDoc(g.name, g.versions)),
  };
}

/** `/apis/GROUP`, or undefined when the group is not served. */
export function group(registry: Registry, name: string): Obj | undefined {
  const g = registry.groups().find((x) => x.name === name);
  return g ? { kind: "APIGroup", apiVersion: "v1", ...groupDoc(g.name, g.versions) } : undefined;
}

function resourceEntries(t: ResourceType): Obj[] {
  const main: Obj = {
    name: t.plural,
    singularName: t.singular,
    namespaced: t.namespaced,
    kind: t.kind,
    verbs: VERBS,
    ...(t.shortNames.length ? { shortNames: t.shortNames } : {}),
    ...(t.categories?.length ? { categories: t.categories } : {}),
  };
  const status = {
    name: `${t.plural}/status`,
    singularName: "",
    namespaced: t.namespaced,
    kind: t.kind,
    verbs: ["get", "patch", "update"],
  };
  return t.status ? [main, status] : [main];
}

/** `/api/v1` or `/apis/GROUP/VERSION`, or undefined when not served. */
export function resourceList(registry: Registry, group: string, version: string): Obj | undefined {
  const types = registry.types.filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: apiVersionOf(types[0]!),
    resources: types.flatMap(resourceEntries),
  };
}
