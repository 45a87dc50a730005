/**
 * `deno task policy:swap FILE` (scripts/policy_swap.ts) against the Kubernetes API test server:
 * a module that passes validation replaces `policy.wasm` in ConfigMap `holdfast-policy` with its
 * SHA-256 annotation; a module that fails it (a wrong flow hash) changes nothing and says why.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import {
  kubeConfigFor,
  type KubeServer,
  loadManifests,
  startKubeServer,
} from "../../lab/kube/mod.ts";
import { main } from "../../scripts/policy_swap.ts";
import { assertStringIncludes } from "./_assert.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const DEBUG_WASM = `${ROOT}policy-as/build/debug.wasm`;
const WRONG_HASH_WASM = `${ROOT}policy-as/build/fixtures/wrong_hash.wasm`;

async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The namespace and k8s/policy-configmap.yaml as deploy installs them; the core client. */
async function installed(kube: KubeServer) {
  const kc = await kubeConfigFor(kube);
  const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
  for (const file of ["namespace.yaml", "policy-configmap.yaml"]) {
    for (const obj of await loadManifests(`${ROOT}k8s/${file}`)) {
      await objects.create(obj as k8s.KubernetesObject);
    }
  }
  return kc.makeApiClient(k8s.CoreV1Api);
}

async function swap(kube: KubeServer, file: string) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(["--kubeconfig", await kube.writeKubeconfig(), file], {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

const readPolicy = (core: k8s.CoreV1Api) =>
  core.readNamespacedConfigMap({ name: "holdfast-policy", namespace: "holdfast-system" });

Deno.test("policy:swap: an accepted module replaces policy.wasm with its sha256; again is unchanged", async () => {
  await using kube = await startKubeServer();
  const core = await installed(kube);
  const bytes = await Deno.readFile(DEBUG_WASM);
  const before = await readPolicy(core);
  ok(
    before.binaryData?.["policy.wasm"] !== bytes.toBase64(),
    "the test swaps in another module",
  );

  const run = await swap(kube, DEBUG_WASM);
  deepStrictEqual(run.code, 0, run.err);
  const digest = await sha256(bytes);
  deepStrictEqual(run.out, `configmap/holdfast-policy updated: sha256 ${digest}`);
  const after = await readPolicy(core);
  deepStrictEqual(after.binaryData?.["policy.wasm"], bytes.toBase64());
  deepStrictEqual(after.metadata?.annotations?.["holdfast.io/policy-sha256"], digest);
  deepStrictEqual(after.metadata?.labels, before.metadata?.labels, "labels kept");

  const again = await swap(kube, DEBUG_WASM);
  deepStrictEqual(again.code, 0, again.err);
  assertStringIncludes(again.out, "unchanged");
  deepStrictEqual(
    (await readPolicy(core)).metadata?.resourceVersion,
    after.metadata?.resourceVersion,
  );
});

Deno.test("policy:swap: a rejected module changes nothing and says why", async () => {
  await using kube = await startKubeServer();
  const core = await installed(kube);
  const before = await readPolicy(core);
  const run = await swap(kube, WRONG_HASH_WASM);
  deepStrictEqual(run.code, 1);
  assertStringIncludes(run.err, "rejected (vectors)");
  assertStringIncludes(run.err, "five-tuple flow hash of");
  assertStringIncludes(run.err, "ConfigMap holdfast-system/holdfast-policy unchanged");
  const after = await readPolicy(core);
  deepStrictEqual(after.metadata?.resourceVersion, before.metadata?.resourceVersion);
  deepStrictEqual(after.binaryData, before.binaryData);
  // Validation fails before any write to the ConfigMap is sent.
  ok(
    !kube.requests.some((r) => r.method !== "GET" && r.path.includes("configmaps/holdfast-policy")),
  );
});

Deno.test("policy:swap: a missing file or FILE is an error before any request", async () => {
  await using kube = await startKubeServer();
  const missing = await swap(kube, `${ROOT}nope.wasm`);
  deepStrictEqual(missing.code, 1);
  assertStringIncludes(missing.err, 'cannot read module "');
  deepStrictEqual(await main(["--namespace", "x"], { err: () => {} }), 2);
});
