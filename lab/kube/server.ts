/**
 * The Kubernetes API test server: `Deno.serve` on loopback, the REAL client-node and kubectl
 * talk to it over HTTP. Discovery, `/version`, `/healthz`, `/openapi/*` (refused, see
 * docs/kube_test_server.md) and resource requests routed to the handlers; every refusal is a
 * `kind: Status` naming what is unsupported.
 *
 * @example
 * ```ts ignore
 * await using kube = await startKubeServer({ crdDirs: ["k8s/crds"] });
 * const path = await kube.writeKubeconfig();   // for kubectl --kubeconfig / KubeConfig.loadFromFile
 * ```
 *
 * @module
 */
import { log } from "../../lib/log.ts";
import { type Obj, storageKey } from "./resources.ts";
import { Store } from "./store.ts";
import { Registry } from "./registry.ts";
import { Rest } from "./rest.ts";
import { Lister } from "./list.ts";
import { coreVersions, group, groupList, resourceList, versionInfo } from "./discovery.ts";
import { type HandlerContext, handleResource, json, type Target } from "./handlers.ts";
import { ApiError, statusObject } from "./status.ts";
import { loadManifests } from "./manifests.ts";
import { openApiGroupVersion, openApiIndex } from "./openapi.ts";
import { simulateRollouts } from "./rollouts.ts";

/** Options of {@linkcode startKubeServer}. */
export interface KubeServerOptions {
  /** Port on 127.0.0.1 (default 0: a free one). */
  readonly port?: number;
  /** Directories or files whose CustomResourceDefinitions are loaded at start. */
  readonly crdDirs?: readonly string[];
  /** CRD objects loaded at start. */
  readonly crds?: readonly Obj[];
  /** Milliseconds between BOOKMARK events on watches that allow them (default 1,000). */
  readonly bookmarkIntervalMs?: number;
  /** Watch events kept for watches from an old resourceVersion (default 1,000). */
  readonly historyLimit?: number;
  /** Longest watch in seconds (default 1,800). */
  readonly maxWatchSeconds?: number;
  /** Log each request as a JSON line (default false). */
  readonly logRequests?: boolean;
  /**
   * Give Deployments and DaemonSets the status of a finished rollout when their spec changes
   * (`rollouts.ts`; default false: nothing writes their status but clients).
   */
  readonly simulateRollouts?: boolean;
}

/** A request the server answered (kept for tests: what did kubectl ask for?). */
export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly code: number;
}

/** A running test server. */
export interface KubeServer extends AsyncDisposable {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  readonly port: number;
  readonly store: Store;
  readonly registry: Registry;
  readonly rest: Rest;
  readonly lister: Lister;
  /** The last 1,000 requests. */
  readonly requests: readonly RequestRecord[];
  /** Writes a kubeconfig for this server (default: a new temp file) and returns its path. */
  writeKubeconfig(path?: string): Promise<string>;
  /**
   * Ends every open watch now, as an API server restart or a load balancer timeout would: clients
   * re-watch from their last resourceVersion (and get 410 Gone if it was compacted meanwhile).
   */
  endWatches(): void;
  /** Stops serving (open watches end). */
  close(): Promise<void>;
}

const DEFAULT_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease"];
const kubeLog = log.with({ component: "kube-test-server" });

function notFoundPath(path: string): ApiError {
  return new ApiError(
    404,
    "NotFound",
    `the server could not find the requested resource (path "${path}" is not served by the Holdfast test API server)`,
  );
}

/** Parses a resource path into a target; undefined when the path is not a resource path. */
function route(registry: Registry, path: string): Target | undefined {
  const segs = path.split("/").filter((s) => s !== "").map(decodeURIComponent);
  let group: string;
  let version: string;
  let rest: string[];
  if (segs[0] === "api" && segs.length >= 3) [group, version, rest] = ["", segs[1]!, segs.slice(2)];
  else if (segs[0] === "apis" && segs.length >= 4) {
    [group, version, rest] = [segs[1]!, segs[2]!, segs.slice(3)];
  } else return undefined;
  if (rest[0] === "watch") {
    throw notFoundPath(`${path} (legacy /watch/ paths are not supported: use ?watch=true)`);
  }
  let namespace: string | undefined;
  if (
    rest[0] === "namespaces" && rest.length >= 3 &&
    // /api/v1/namespaces/NAME/status is the Namespace's own subresource.
    !(group === "" && registry.find(group, version, rest[2]!) === undefined)
  ) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [plural, name, sub, ...more] = rest;
  const type = registry.find(group, version, plural!);
  if (!type) throw notFoundPath(path);
  if (more.length > 0) throw notFoundPath(path);
  if (sub !== undefined && (sub !== "status" || !type.status)) {
    throw new ApiError(
      404,
      "NotFound",
      `the server could not find the requested resource: subresource "${sub}" of ${
        storageKey(type)
      } is not supported by the Holdfast test API server`,
    );
  }
  if (namespace !== undefined && !type.namespaced) throw notFoundPath(path);
  if (type.namespaced && name !== undefined && namespace === undefined) throw notFoundPath(path);
  return { type, namespace, name, subresource: sub as "status" | undefined };
}

/** Starts the server on 127.0.0.1 and loads CRDs. */
export async function startKubeServer(options: KubeServerOptions = {}): Promise<KubeServer> {
  const store = new Store({ historyLimit: options.historyLimit });
  let watches = new AbortController();
  const endWatches = () => {
    watches.abort();
    watches = new AbortController();
  };
  const registry = new Registry(store);
  const rest = new Rest(registry);
  const lister = new Lister(store);
  const ctx: HandlerContext = {
    rest,
    lister,
    store,
    bookmarkIntervalMs: options.bookmarkIntervalMs ?? 1000,
    maxWatchSeconds: options.maxWatchSeconds ?? 1800,
    watchSignal: () => watches.signal,
  };
  const nsType = registry.find("", "v1", "namespaces")!;
  for (const name of DEFAULT_NAMESPACES) {
    rest.create(nsType, "", { metadata: { name } }, { manager: "kube-apiserver" });
  }
  const crdType = registry.find("apiextensions.k8s.io", "v1", "customresourcedefinitions")!;
  const crds = [...(options.crds ?? [])];
  for (const dir of options.crdDirs ?? []) {
    crds.push(...(await loadManifests(dir)).filter((o) => o.kind === "CustomResourceDefinition"));
  }
  for (const crd of crds) {
    try {
      rest.create(crdType, "", crd, { manager: "kube-test-server", fieldValidation: "Strict" });
    } catch (e) {
      throw new Error(
        `Cannot load CRD "${(crd.metadata as Obj | undefined)?.name}": ${(e as Error).message}`,
        { cause: e },
      );
    }
  }
  const stopRollouts = options.simulateRollouts ? simulateRollouts(rest) : () => {};
  const requests: RequestRecord[] = [];
  let address = "127.0.0.1:0";
  const handle = async (req: Request): Promise<Response> => {
    const url = new URL(req.url);
    const path = url.pathname.replace(/\/+$/, "") || "/";
    try {
      if (req.method === "GET") {
        if (path === "/version") return json(200, versionInfo());
        if (path === "/healthz" || path === "/livez" || path === "/readyz") {
          return new Response("ok");
        }
        if (path === "/api") return json(200, coreVersions(address));
        if (path === "/apis") return json(200, groupList(registry));
        if (path === "/openapi/v3") return json(200, openApiIndex(registry));
        if (path.startsWith("/openapi/v3/")) {
          return json(
            200,
            openApiGroupVersion(registry, path.slice("/openapi/v3/".length)) ?? (() => {
              throw notFoundPath(path);
            })(),
          );
        }
        if (path.startsWith("/openapi/")) {
          throw notFoundPath(
            `${path} (only the OpenAPI v3 index and PATCH operations are served, no schemas: kubectl explain is not supported)`,
          );
        }
        const g = path.match(/^\/apis\/([^/]+)$/);
        if (g) {
          return json(
            200,
            group(registry, g[1]!) ?? (() => {
              throw notFoundPath(path);
            })(),
          );
        }
        const v = path === "/api/v1"
          ? ["", "v1"]
          : path.match(/^\/apis\/([^/]+)\/([^/]+)$/)?.slice(1);
        if (v) {
          return json(
            200,
            resourceList(registry, v[0]!, v[1]!) ?? (() => {
              throw notFoundPath(path);
            })(),
          );
        }
      }
      const target = route(registry, path);
      if (!target) throw notFoundPath(path);
      return await handleResource(ctx, req, url, target);
    } catch (e) {
      if (e instanceof ApiError) return json(e.code, e.toStatus());
      kubeLog.error("request failed", { method: req.method, path, error: e });
      return json(
        500,
        statusObject(500, "InternalError", `Internal error occurred: ${(e as Error).message}`),
      );
    }
  };
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: options.port ?? 0, onListen: () => {} },
    async (req) => {
      const res = await handle(req);
      const rec = {
        method: req.method,
        path: new URL(req.url).pathname + new URL(req.url).search,
        code: res.status,
      };
      requests.push(rec);
      if (requests.length > 1000) requests.shift();
      if (options.logRequests) kubeLog.info("request", { ...rec });
      return res;
    },
  );
  const port = server.addr.port;
  address = `127.0.0.1:${port}`;
  const url = `http://127.0.0.1:${port}`;
  const tempFiles: string[] = [];
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    stopRollouts();
    watches.abort();
    await server.shutdown();
    for (const f of tempFiles) await Deno.remove(f).catch(() => {});
  };
  return {
    url,
    port,
    store,
    registry,
    rest,
    lister,
    requests,
    endWatches,
    async writeKubeconfig(path?: string) {
      const file = path ?? await Deno.makeTempFile({ prefix: "hf-kubeconfig-", suffix: ".yaml" });
      if (!path) tempFiles.push(file);
      await Deno.writeTextFile(file, kubeconfigText(url));
      return file;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

/**
 * A kubeconfig (YAML) for a server at `url`: plain HTTP on loopback, no auth, one context named
 * `holdfast-test` with namespace `default`.
 */
export function kubeconfigText(url: string): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: holdfast-test",
    "  cluster:",
    `    server: ${url}`,
    // client-node refuses plain HTTP unless this is set; kubectl ignores it for http URLs.
    "    insecure-skip-tls-verify: true",
    "contexts:",
    "- name: holdfast-test",
    "  context:",
    "    cluster: holdfast-test",
    "    user: holdfast-test",
    "    namespace: default",
    "current-context: holdfast-test",
    "users:",
    "- name: holdfast-test",
    "  user: {}",
    "",
  ].join("\n");
}
