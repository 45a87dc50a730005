/**
 * `deno task deploy`: installs or upgrades Holdfast from `k8s/` in the cluster of the current
 * kubeconfig context, with server-side apply (field manager `holdfast-deploy`).
 *
 * In order: the CRDs (then waits until they are Established), the Namespace, the Redis password
 * Secret `holdfast-redis` when it is missing (a random password, never printed), everything else;
 * the policy ConfigMap `holdfast-policy` only when it is absent, so a module swapped in with
 * `deno task policy:swap` is not put back. Every applied object carries the label
 * `app.kubernetes.io/managed-by=holdfast-deploy`; objects with that label that are no longer in the
 * manifests are deleted (prune) — never CustomResourceDefinitions or Namespaces, whose deletion
 * takes every object in them along. Then it waits for the Deployments and DaemonSets to roll out.
 *
 * Prints one line per object: `created`, `configured`, `unchanged` or `pruned` (with
 * ` (server dry run)` under `--dry-run`). A second run prints only `unchanged`.
 *
 * @module
 */
import * as k8s from "@kubernetes/client-node";
import { numberOption, readCommandLine, stringOption } from "../lib/args.ts";
import { POLICY_CONFIGMAP } from "./k8s_policy_configmap.ts";
import {
  apiMessage as why,
  displayName,
  header,
  loadKubeConfig,
  MANAGED_BY,
  type Manifest,
  MANIFEST_NAMESPACE,
  readDeployManifests,
  statusCode as code,
  typeKey,
} from "./_deploy_manifests.ts";
import { waitEstablished, waitRollouts } from "./_deploy_wait.ts";

/** Field manager of every apply. */
export const FIELD_MANAGER = "holdfast-deploy";
/** The Secret with the Redis password (key `password`). */
const REDIS_SECRET = "holdfast-redis";
/**
 * Types deploy may have applied, scanned for prune even when no manifest of the type is left
 * (removing the last Service from k8s/ still prunes it). CRDs and Namespaces are never pruned.
 */
const PRUNABLE_TYPES = [
  "v1 ServiceAccount",
  "v1 Service",
  "v1 ConfigMap",
  "apps/v1 Deployment",
  "apps/v1 DaemonSet",
  "rbac.authorization.k8s.io/v1 ClusterRole",
  "rbac.authorization.k8s.io/v1 ClusterRoleBinding",
  "rbac.authorization.k8s.io/v1 Role",
  "rbac.authorization.k8s.io/v1 RoleBinding",
  "holdfast.io/v1alpha1 LoadBalancerConfig",
  "holdfast.io/v1alpha1 AddressPool",
];
const NEVER_PRUNED = new Set(["CustomResourceDefinition", "Namespace"]);

/** What to deploy where. */
export interface DeployOptions {
  /** Directory with the manifests (default the repository's `k8s/`). */
  readonly dir?: string;
  readonly kubeconfig?: string;
  readonly context?: string;
  /** Target namespace (default `holdfast-system`). */
  readonly namespace?: string;
  /** Image replacing `holdfast:dev`. */
  readonly image?: string;
  /** Server dry run (`dryRun=All`): nothing is stored. */
  readonly dryRun?: boolean;
  /** Apply `examples/` too. */
  readonly examples?: boolean;
  /** Wait for Deployments and DaemonSets to roll out (default true). */
  readonly wait?: boolean;
  /** Longest wait for the rollout, in seconds (default 120). */
  readonly timeoutSeconds?: number;
  /** Where the per-object lines go (default stdout). */
  readonly print?: (line: string) => void;
  /** Where progress notes go (default stderr). */
  readonly note?: (line: string) => void;
}

type Outcome = "created" | "configured" | "unchanged" | "pruned";

/** One object deploy touched, and what happened to it. */
export interface DeployChange {
  readonly object: string;
  readonly outcome: Outcome;
}

const K8S_DIR = new URL("../k8s", import.meta.url).pathname;

/** The object without what the server alone changes, in a stable text (for dry-run compares). */
function content(obj: Manifest | undefined): string {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v === null || typeof v !== "object" || v instanceof Date) return v;
    return Object.fromEntries(
      Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map((
        [k, x],
      ) => [k, strip(x)]),
    );
  };
  if (!obj) return "";
  const { resourceVersion: _r, generation: _g, managedFields: _m, ...metadata } = obj.metadata ??
    {};
  return JSON.stringify(strip({ ...obj, metadata }));
}

/** Runs the deploy; returns what changed (also printed). Throws on the first failure. */
export async function deploy(options: DeployOptions = {}): Promise<DeployChange[]> {
  const print = options.print ?? ((line: string) => console.log(line));
  const note = options.note ?? ((line: string) => console.error(line));
  const kc = loadKubeConfig(options);
  const client = k8s.KubernetesObjectApi.makeApiClient(kc);
  const namespace = options.namespace ?? MANIFEST_NAMESPACE;
  const dryRun = options.dryRun ? "All" : undefined;
  const suffix = options.dryRun ? " (server dry run)" : "";
  const changes: DeployChange[] = [];
  const report = (object: string, outcome: Outcome) => {
    changes.push({ object, outcome });
    print(`${object} ${outcome}${suffix}`);
  };
  const read = async (obj: Manifest): Promise<Manifest | undefined> => {
    try {
      return await client.read(header(obj)) as Manifest;
    } catch (e) {
      if (code(e) === 404) return undefined;
      // A kind whose CRD is not installed yet (only under --dry-run): nothing of it exists.
      if (options.dryRun && /Unrecognized API version and kind/.test(String(e))) return undefined;
      throw new Error(`Cannot read ${displayName(obj)}: ${why(e)}`, { cause: e });
    }
  };

  const objects = await readDeployManifests(options.dir ?? K8S_DIR, {
    namespace,
    image: options.image,
    examples: options.examples,
  });
  /** Under --dry-run: types and namespaces that would be created, so nothing of them exists. */
  const newInDryRun = new Set<string>();
  const unknownToServer = (obj: Manifest) =>
    options.dryRun === true &&
    (newInDryRun.has(typeKey(obj)) || newInDryRun.has(`namespace ${obj.metadata.namespace}`));
  let secretDone = false;
  for (const [i, obj] of objects.entries()) {
    const name = displayName(obj);
    const before = await read(obj);
    const isPolicy = obj.kind === "ConfigMap" && obj.metadata.name === POLICY_CONFIGMAP.name;
    if (isPolicy && before) {
      report(name, "unchanged"); // policy:swap owns the module once it is there
    } else if (!before && unknownToServer(obj)) {
      report(name, "created"); // its CRD or namespace is new: the server cannot dry-run it
    } else {
      let after: Manifest;
      try {
        after = await client.patch(
          obj,
          undefined,
          dryRun,
          FIELD_MANAGER,
          true,
          k8s.PatchStrategy.ServerSideApply,
        ) as Manifest;
      } catch (e) {
        throw new Error(`Cannot apply ${name}: ${why(e)}`, { cause: e });
      }
      const changed = options.dryRun
        ? content(before) !== content(after)
        : before?.metadata?.resourceVersion !== after.metadata?.resourceVersion;
      report(name, !before ? "created" : changed ? "configured" : "unchanged");
      if (options.dryRun && obj.kind === "CustomResourceDefinition" && !before) {
        for (const v of obj.spec.versions ?? []) {
          newInDryRun.add(`${obj.spec.group}/${v.name} ${obj.spec.names.kind}`);
        }
      }
      if (options.dryRun && obj.kind === "Namespace" && !before) {
        newInDryRun.add(`namespace ${obj.metadata.name}`);
      }
    }
    const next = objects[i + 1];
    if (obj.kind === "CustomResourceDefinition" && next?.kind !== "CustomResourceDefinition") {
      if (!options.dryRun) await waitEstablished(client, objects, note);
    }
    if (!secretDone && obj.kind === "Namespace" && obj.metadata.name === namespace) {
      secretDone = true;
      if (newInDryRun.has(`namespace ${namespace}`)) report(`secret/${REDIS_SECRET}`, "created");
      else await ensureRedisSecret(client, namespace, options.dryRun ?? false, report);
    }
  }
  if (!secretDone) await ensureRedisSecret(client, namespace, options.dryRun ?? false, report);
  await prune(client, objects, namespace, dryRun, report);
  if (options.wait ?? true) {
    if (options.dryRun) note("not waiting for rollouts: server dry run");
    else await waitRollouts(client, objects, (options.timeoutSeconds ?? 120) * 1000, note);
  }
  return changes;
}

async function ensureRedisSecret(
  client: k8s.KubernetesObjectApi,
  namespace: string,
  dryRun: boolean,
  report: (object: string, outcome: Outcome) => void,
): Promise<void> {
  const header = {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: REDIS_SECRET, namespace },
  };
  try {
    await client.read(header);
    report(`secret/${REDIS_SECRET}`, "unchanged");
    return;
  } catch (e) {
    if (code(e) !== 404) {
      throw new Error(`Cannot read secret "${namespace}/${REDIS_SECRET}": ${why(e)}`, {
        cause: e,
      });
    }
  }
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const password = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  try {
    // Not labelled managed-by: it is not in k8s/, and prune must never take the password.
    await client.create(
      {
        ...header,
        metadata: { ...header.metadata, labels: { "app.kubernetes.io/part-of": "holdfast" } },
        type: "Opaque",
        data: { password: btoa(password) },
      } as k8s.V1Secret,
      undefined,
      dryRun ? "All" : undefined,
      FIELD_MANAGER,
    );
  } catch (e) {
    throw new Error(`Cannot create secret "${namespace}/${REDIS_SECRET}": ${why(e)}`, {
      cause: e,
    });
  }
  report(`secret/${REDIS_SECRET}`, "created");
}

async function prune(
  client: k8s.KubernetesObjectApi,
  objects: readonly Manifest[],
  namespace: string,
  dryRun: string | undefined,
  report: (object: string, outcome: Outcome) => void,
): Promise<void> {
  const wanted = new Set(
    objects.map((o) => `${typeKey(o)} ${o.metadata.namespace ?? ""}/${o.metadata.name}`),
  );
  const types = new Set([...objects.map(typeKey), ...PRUNABLE_TYPES]);
  for (const type of types) {
    const [apiVersion, kind] = type.split(" ") as [string, string];
    if (NEVER_PRUNED.has(kind)) continue;
    let items: Manifest[];
    try {
      const list = await client.list(
        apiVersion,
        kind,
        namespace,
        undefined,
        undefined,
        undefined,
        undefined,
        `${MANAGED_BY.key}=${MANAGED_BY.value}`,
      );
      items = list.items as Manifest[];
    } catch (e) {
      // A type the cluster does not serve (its CRD is gone or not installed) has nothing to prune.
      if (code(e) === 404 || /Unrecognized API version and kind/.test(String(e))) continue;
      throw new Error(`Cannot list ${kind} for prune: ${why(e)}`, { cause: e });
    }
    for (const item of items) {
      const key = `${type} ${item.metadata?.namespace ?? ""}/${item.metadata?.name}`;
      if (wanted.has(key)) continue;
      const obj = { ...item, apiVersion, kind };
      try {
        await client.delete(obj as k8s.KubernetesObject, undefined, dryRun);
      } catch (e) {
        if (code(e) === 404) continue;
        throw new Error(`Cannot prune ${displayName(obj)}: ${why(e)}`, { cause: e });
      }
      report(displayName(obj), "pruned");
    }
  }
}

const USAGE = `usage: deno task deploy [--kubeconfig FILE] [--context NAME] [--namespace NS]
                         [--image REF] [--dry-run] [--examples] [--no-wait] [--timeout S]
                         [--dir DIR]
  Server-side applies k8s/ (CRDs, the namespace, then the rest) with field manager
  holdfast-deploy, creates the Redis password Secret when missing, prunes objects labelled
  app.kubernetes.io/managed-by=holdfast-deploy that left the manifests, waits for rollouts,
  and prints one line per object: created, configured, unchanged or pruned.
  --namespace NS   install into NS instead of holdfast-system
  --image REF      run REF instead of holdfast:dev
  --dry-run        server dry run (dryRun=All): nothing changes
  --examples       apply k8s/examples/ too
  --timeout S      longest wait for rollouts (default 120); --no-wait skips it
  --dir DIR        the manifests' directory (default k8s/)`;

/** The `deploy` command for lib/args.ts: its name, usage and options. */
export const DEPLOY_COMMAND = {
  command: "deploy",
  usage: USAGE,
  options: {
    kubeconfig: { type: "string" },
    context: { type: "string" },
    namespace: { type: "string" },
    image: { type: "string" },
    "dry-run": { type: "boolean" },
    examples: { type: "boolean" },
    "no-wait": { type: "boolean" },
    timeout: { type: "string" },
    dir: { type: "string" },
  },
} as const;

/** The command line: returns the exit code (0 done, 1 failed, 2 bad usage). */
export async function main(
  args: readonly string[],
  io: Pick<DeployOptions, "print" | "note"> = {},
): Promise<number> {
  const parsed = readCommandLine(args, DEPLOY_COMMAND, ({ values }) => {
    const timeout = numberOption(values, "timeout", { default: 120, min: 0.001 });
    return {
      kubeconfig: stringOption(values, "kubeconfig"),
      context: stringOption(values, "context"),
      namespace: stringOption(values, "namespace"),
      image: stringOption(values, "image"),
      dryRun: values["dry-run"] === true,
      examples: values.examples === true,
      wait: values["no-wait"] !== true,
      timeoutSeconds: timeout,
      dir: stringOption(values, "dir"),
    } satisfies DeployOptions;
  });
  if ("exit" in parsed) return parsed.exit;
  try {
    await deploy({ ...parsed.options, ...io });
    return 0;
  } catch (e) {
    (io.note ?? console.error)(e instanceof Error ? e.message : String(e));
    return 1;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
