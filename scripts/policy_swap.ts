/**
 * `deno task policy:swap FILE`: puts a WASM policy module into the cluster. It validates the module
 * here first, exactly as `main.ts policy check` does (ABI, golden vectors, memory and time
 * limits); a rejected module changes nothing and the reason is printed (exit 1). An accepted one
 * replaces `binaryData.policy.wasm` of ConfigMap `holdfast-policy` (merge patch, field manager
 * `holdfast-policy-swap`), with its SHA-256 in the annotation `holdfast.io/policy-sha256`; the
 * controller and agents then validate and hot-swap it themselves. The ConfigMap is created when
 * it does not exist.
 *
 * `main.ts policy swap FILE --active PATH` stays the node-local form (one agent's file).
 *
 * @module
 */
import * as k8s from "@kubernetes/client-node";
import { readCommandLine, stringOption, UsageError } from "../lib/args.ts";
import { DEFAULT_LIMITS, PolicyRejectedError } from "../policy-as/host/policy_module.ts";
import { validatePolicyModule } from "../policy-as/host/validate.ts";
import { loadVectors, VECTORS_DIR } from "../policy-as/host/vectors.ts";
import { dirUrl, readLimits } from "../policy-as/host/cli.ts";
import { MAX_CONFIGMAP_BYTES, POLICY_CONFIGMAP } from "./k8s_policy_configmap.ts";
import { apiMessage, loadKubeConfig, statusCode } from "./_deploy_manifests.ts";

/** The annotation carrying the module's SHA-256 (as in k8s/policy-configmap.yaml). */
export const POLICY_SHA256_ANNOTATION = "holdfast.io/policy-sha256";
const FIELD_MANAGER = "holdfast-policy-swap";

/** Where the module goes, and the validation limits. */
export interface PolicySwapOptions {
  readonly kubeconfig?: string;
  readonly context?: string;
  /** Namespace of the ConfigMap (default `holdfast-system`). */
  readonly namespace?: string;
  /** Name of the ConfigMap (default `holdfast-policy`). */
  readonly configmap?: string;
  readonly buildBudgetMs?: number;
  readonly maxMemoryPages?: number;
  /** Golden vectors directory (default policy-as/vectors/). */
  readonly vectors?: URL;
}

/** What a swap did. */
export interface PolicySwapResult {
  readonly sha256: string;
  /** `updated`, `created`, or `unchanged` (the ConfigMap already carried this module). */
  readonly outcome: "updated" | "created" | "unchanged";
}

/**
 * Validates `bytes` and, when accepted, writes them into the policy ConfigMap.
 *
 * @throws {PolicyRejectedError} when the module fails validation (nothing is written).
 */
export async function swapPolicyConfigMap(
  bytes: Uint8Array<ArrayBuffer>,
  options: PolicySwapOptions = {},
): Promise<PolicySwapResult> {
  const vectors = await loadVectors(options.vectors ?? VECTORS_DIR);
  const { report } = await validatePolicyModule(bytes, vectors, {
    limits: {
      buildBudgetMs: options.buildBudgetMs ?? DEFAULT_LIMITS.buildBudgetMs,
      maxMemoryPages: options.maxMemoryPages ?? DEFAULT_LIMITS.maxMemoryPages,
    },
  });
  const b64 = bytes.toBase64();
  const namespace = options.namespace ?? "holdfast-system";
  const name = options.configmap ?? POLICY_CONFIGMAP.name;
  if (b64.length > MAX_CONFIGMAP_BYTES) {
    throw new RangeError(
      `Cannot put the ${bytes.length}-byte module into ConfigMap "${namespace}/${name}": ${b64.length} bytes of base64 exceed ${MAX_CONFIGMAP_BYTES}`,
    );
  }
  const kc = loadKubeConfig(options);
  const client = k8s.KubernetesObjectApi.makeApiClient(kc);
  const header = { apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace } };
  let current: k8s.V1ConfigMap | undefined;
  try {
    current = await client.read<k8s.V1ConfigMap>(header);
  } catch (e) {
    if (statusCode(e) !== 404) {
      throw new Error(`Cannot read ConfigMap "${namespace}/${name}": ${apiMessage(e)}`, {
        cause: e,
      });
    }
  }
  const sha256 = report.digest;
  if (
    current?.binaryData?.[POLICY_CONFIGMAP.key] === b64 &&
    current.metadata?.annotations?.[POLICY_SHA256_ANNOTATION] === sha256
  ) return { sha256, outcome: "unchanged" };
  try {
    if (!current) {
      await client.create(
        {
          ...header,
          metadata: {
            ...header.metadata,
            labels: { "app.kubernetes.io/part-of": "holdfast" },
            annotations: { [POLICY_SHA256_ANNOTATION]: sha256 },
          },
          binaryData: { [POLICY_CONFIGMAP.key]: b64 },
        },
        undefined,
        undefined,
        FIELD_MANAGER,
      );
      return { sha256, outcome: "created" };
    }
    // One merge patch moves module and annotation together; `data` may not hold the same key.
    await client.patch(
      {
        ...header,
        metadata: { ...header.metadata, annotations: { [POLICY_SHA256_ANNOTATION]: sha256 } },
        binaryData: { [POLICY_CONFIGMAP.key]: b64 },
        ...(current.data?.[POLICY_CONFIGMAP.key] !== undefined
          ? { data: { [POLICY_CONFIGMAP.key]: null } }
          : {}),
      } as k8s.KubernetesObject,
      undefined,
      undefined,
      FIELD_MANAGER,
      undefined,
      k8s.PatchStrategy.MergePatch,
    );
  } catch (e) {
    throw new Error(`Cannot write ConfigMap "${namespace}/${name}": ${apiMessage(e)}`, {
      cause: e,
    });
  }
  return { sha256, outcome: "updated" };
}

const USAGE =
  `usage: deno task policy:swap FILE [--namespace NS] [--configmap NAME] [--kubeconfig FILE]
                              [--context NAME] [--budget-ms N] [--max-pages N] [--vectors DIR]
  Validates FILE as main.ts policy check does, then writes it into ConfigMap NAME
  (default holdfast-policy) in NS (default holdfast-system), binaryData policy.wasm, with
  annotation ${POLICY_SHA256_ANNOTATION}. Exit 0 swapped, 1 rejected or failed, 2 bad usage.`;

/** The `policy:swap` command for lib/args.ts: its name, usage and options. */
export const POLICY_SWAP_COMMAND = {
  command: "policy:swap",
  usage: USAGE,
  positionals: true,
  options: {
    namespace: { type: "string" },
    configmap: { type: "string" },
    kubeconfig: { type: "string" },
    context: { type: "string" },
    "budget-ms": { type: "string" },
    "max-pages": { type: "string" },
    vectors: { type: "string" },
  },
} as const;

/** The command line; returns the exit code. `out`/`err` default to stdout/stderr. */
export async function main(
  args: readonly string[],
  io: { out?: (line: string) => void; err?: (line: string) => void } = {},
): Promise<number> {
  const out = io.out ?? ((l: string) => console.log(l));
  const err = io.err ?? ((l: string) => console.error(l));
  const parsed = readCommandLine(args, POLICY_SWAP_COMMAND, ({ values, positionals }) => {
    const [file, ...extra] = positionals;
    if (file === undefined) throw new UsageError("Missing FILE");
    if (extra.length > 0) throw new UsageError(`Unexpected argument "${extra[0]}"`);
    const vectors = stringOption(values, "vectors");
    return {
      file,
      namespace: stringOption(values, "namespace"),
      configmap: stringOption(values, "configmap"),
      kubeconfig: stringOption(values, "kubeconfig"),
      context: stringOption(values, "context"),
      ...readLimits(values),
      vectors: vectors === undefined ? undefined : dirUrl(vectors),
    };
  });
  if ("exit" in parsed) return parsed.exit;
  const { file, ...options } = parsed.options;
  let bytes: Uint8Array<ArrayBuffer>;
  try {
    bytes = await Deno.readFile(file);
  } catch (e) {
    err(`policy:swap: cannot read module "${file}": ${(e as Error).message}`);
    return 1;
  }
  const where = `${options.namespace ?? "holdfast-system"}/${
    options.configmap ?? POLICY_CONFIGMAP.name
  }`;
  try {
    const result = await swapPolicyConfigMap(bytes, options);
    out(`configmap/${where.split("/")[1]} ${result.outcome}: sha256 ${result.sha256}`);
    return 0;
  } catch (e) {
    if (e instanceof PolicyRejectedError) {
      err(
        `policy:swap: "${file}" rejected (${e.reason}); ConfigMap ${where} unchanged: ${e.message}`,
      );
    } else {
      err(`policy:swap: ${e instanceof Error ? e.message : String(e)}`);
    }
    return 1;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
