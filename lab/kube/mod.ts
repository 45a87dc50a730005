/**
 * The Kubernetes API test server: what the real `@kubernetes/client-node` and `kubectl` talk to
 * in tests and operators' tooling, since no kube-apiserver can run here
 * (docs/kube_test_server.md says what it supports and what it refuses).
 *
 * - `server.ts` starts it (`startKubeServer`), routes requests, writes kubeconfigs;
 *   `main.ts` is `deno task kube:server`;
 * - `handlers.ts` the verbs, `rest.ts` what they do to objects, `list.ts` lists and pages,
 *   `watch.ts` watch streams, `store.ts` objects, resourceVersions and event history;
 * - `patch.ts` merge/JSON/strategic patches, `apply.ts` server-side apply and managedFields
 *   (`field_paths.ts` their paths);
 * - `schema.ts` CRD schemas, `builtin_schema.ts` built-in fields (from client-node's models),
 *   `defaults.ts` the built-in defaults clients notice;
 * - `admission.ts` what is checked before a write: `meta_validation.ts` ObjectMeta (names,
 *   labels, annotations, finalizers), `builtin_validation.ts` and `service_validation.ts` the
 *   real server's hand-written rules (`causes.ts` their field errors), `service_alloc.ts` node
 *   ports and cluster IPs, `service_strategy.ts` what a Service update drops or keeps;
 * - `resources.ts` the built-in kinds, `registry.ts` built-in plus CRD types,
 *   `discovery.ts` and `openapi.ts` what clients read first, `table.ts` `kubectl get` tables;
 * - `selectors.ts` label and field selectors, `status.ts` errors as `kind: Status`,
 *   `manifests.ts` reads YAML manifests.
 *
 * @module
 */
export * from "./server.ts";
export * from "./status.ts";
export * from "./client.ts";
export type { Obj, ResourceType } from "./resources.ts";
export { loadManifests } from "./manifests.ts";
export { Store, type StoreEvent } from "./store.ts";
