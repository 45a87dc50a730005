/**
 * What `deno task deploy` applies: the manifests of `k8s/` (and `k8s/examples/` on request) read,
 * rewritten for the target (namespace, image), labelled as deploy's own, and put in apply order:
 * CRDs, then Namespaces, then everything else (in file order).
 *
 * @module
 */
import { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";

/** A Kubernetes object as read from a manifest. */
// deno-lint-ignore no-explicit-any
export type Manifest = Record<string, any>;

/** The label every object deploy applies carries; prune looks for it. */
export const MANAGED_BY = {
  key: "app.kubernetes.io/managed-by",
  value: "holdfast-deploy",
} as const;
/** The namespace the manifests are written for, and the image placeholder they name. */
export const MANIFEST_NAMESPACE = "holdfast-system";
export const MANIFEST_IMAGE = "holdfast:dev";

/** How to rewrite the manifests. */
export interface ManifestOptions {
  /** Target namespace (default the manifests' own, `holdfast-system`). */
  readonly namespace?: string;
  /** Image reference replacing `holdfast:dev`. */
  readonly image?: string;
  /** Include `examples/` (default false). */
  readonly examples?: boolean;
}

/** The manifests' YAML files in `dir` (top level and `crds/`; `examples/` when asked), sorted. */
async function manifestFiles(dir: string, examples: boolean): Promise<string[]> {
  const out: string[] = [];
  for (const sub of ["crds/", "", ...(examples ? ["examples/"] : [])]) {
    const names: string[] = [];
    try {
      for await (const e of Deno.readDir(`${dir}/${sub}`)) {
        if (e.isFile && /\.ya?ml$/.test(e.name)) names.push(`${dir}/${sub}${e.name}`);
      }
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound) || sub === "") throw e;
    }
    out.push(...names.sort());
  }
  return out;
}

/** Replaces `from` in every string of `value` (deep); returns the new value. */
function rewriteStrings(value: unknown, rewrite: (s: string) => string): unknown {
  if (typeof value === "string") return rewrite(value);
  if (Array.isArray(value)) return value.map((v) => rewriteStrings(v, rewrite));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, rewriteStrings(v, rewrite)]),
    );
  }
  return value;
}

/**
 * Reads and prepares the objects to apply from `dir` (a copy of `k8s/`), in apply order.
 * The namespace is rewritten wherever it appears as a word (metadata, RBAC subjects, the Redis
 * URL `holdfast-redis.holdfast-system.svc`); the image wherever it equals `holdfast:dev`.
 */
export async function readDeployManifests(
  dir: string,
  options: ManifestOptions = {},
): Promise<Manifest[]> {
  const namespace = options.namespace ?? MANIFEST_NAMESPACE;
  const word = new RegExp(`(?<![\\w-])${MANIFEST_NAMESPACE}(?![\\w-])`, "g");
  const objects: Manifest[] = [];
  for (const file of await manifestFiles(dir.replace(/\/$/, ""), options.examples ?? false)) {
    for (const doc of parseAllDocuments(await Deno.readTextFile(file))) {
      if (doc.errors.length > 0) {
        throw new Error(`Cannot read manifest "${file}": ${doc.errors[0]!.message}`, {
          cause: doc.errors[0],
        });
      }
      const raw = doc.toJS() as Manifest | null;
      if (raw === null || raw === undefined) continue;
      if (typeof raw.kind !== "string" || typeof raw.metadata?.name !== "string") {
        throw new Error(`Cannot read manifest "${file}": an object without kind or metadata.name`);
      }
      let obj = raw;
      if (namespace !== MANIFEST_NAMESPACE) {
        obj = rewriteStrings(obj, (s) => s.replace(word, namespace)) as Manifest;
      }
      if (options.image) {
        obj = rewriteStrings(obj, (s) => s === MANIFEST_IMAGE ? options.image! : s) as Manifest;
      }
      obj.metadata.labels = { ...obj.metadata.labels, [MANAGED_BY.key]: MANAGED_BY.value };
      objects.push(obj);
    }
  }
  const rank = (o: Manifest) =>
    o.kind === "CustomResourceDefinition" ? 0 : o.kind === "Namespace" ? 1 : 2;
  return objects.map((o, i) => ({ o, i }))
    .sort((a, b) => rank(a.o) - rank(b.o) || a.i - b.i)
    .map(({ o }) => o);
}

/** `kind.group/name` as kubectl prints it (`deployment.apps/holdfast-controller`). */
export function displayName(obj: Manifest): string {
  const apiVersion = String(obj.apiVersion ?? "v1");
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  return `${String(obj.kind).toLowerCase()}${group ? `.${group}` : ""}/${obj.metadata.name}`;
}

/** The `apiVersion kind` key of an object's type. */
export function typeKey(obj: Manifest): string {
  return `${obj.apiVersion ?? "v1"} ${obj.kind}`;
}

/** The HTTP status of a client-node ApiException (undefined for other errors). */
export function statusCode(e: unknown): number | undefined {
  const c = (e as { code?: unknown })?.code;
  return typeof c === "number" ? c : undefined;
}

/** The API server's message in a client-node ApiException (its Status), else the error's. */
export function apiMessage(e: unknown): string {
  const body = (e as { body?: unknown })?.body;
  if (typeof body === "string") {
    try {
      const status = JSON.parse(body);
      if (typeof status?.message === "string") return status.message;
    } catch { /* not JSON: fall through */ }
  }
  return e instanceof Error ? e.message.split("\n")[0]! : String(e);
}

/** What client-node needs to address `obj`. */
export function header(obj: Manifest) {
  return {
    apiVersion: String(obj.apiVersion),
    kind: String(obj.kind),
    metadata: { name: String(obj.metadata.name), namespace: obj.metadata.namespace },
  };
}

/**
 * The kubeconfig `path` (default: in-cluster, else `$KUBECONFIG` or `~/.kube/config`) with
 * `context` selected; throws naming the context when the kubeconfig has no such context.
 */
export function loadKubeConfig(options: { kubeconfig?: string; context?: string }): KubeConfig {
  const kc = new KubeConfig();
  if (options.kubeconfig) kc.loadFromFile(options.kubeconfig);
  else kc.loadFromDefault();
  if (options.context !== undefined) {
    const names = kc.getContexts().map((c) => c.name);
    if (!names.includes(options.context)) {
      throw new Error(
        `Cannot use context "${options.context}": the kubeconfig has ${
          names.map((n) => `"${n}"`).join(", ") || "no contexts"
        }`,
      );
    }
    kc.setCurrentContext(options.context);
  }
  return kc;
}
