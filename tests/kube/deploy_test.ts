/**
 * `deno task deploy` (scripts/deploy.ts) against the Kubernetes API test server with simulated
 * rollouts: the first run creates everything (and the Redis password Secret), a second run is
 * all `unchanged`, a manifest removed from the directory is pruned, `--dry-run` stores nothing,
 * `--image` and `--namespace` rewrite what is applied, and a swapped policy is not put back.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { kubeConfigFor, type KubeServer, startKubeServer } from "../../lab/kube/mod.ts";
import { main } from "../../scripts/deploy.ts";
import { assertRejects } from "./_assert.ts";

const K8S = new URL("../../k8s/", import.meta.url).pathname;

/** A temp copy of k8s/ (top level, crds/, examples/) that a test may change. */
async function copyOfK8s(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "hf-deploy-" });
  for (const sub of ["", "crds/", "examples/"]) {
    await Deno.mkdir(`${dir}/${sub}`, { recursive: true });
    for await (const e of Deno.readDir(`${K8S}${sub}`)) {
      if (e.isFile) await Deno.copyFile(`${K8S}${sub}${e.name}`, `${dir}/${sub}${e.name}`);
    }
  }
  return dir;
}

interface Run {
  code: number;
  lines: string[];
  notes: string[];
}

async function deployTo(kube: KubeServer, dir: string, ...flags: string[]): Promise<Run> {
  const lines: string[] = [];
  const notes: string[] = [];
  const code = await main(
    ["--kubeconfig", await kube.writeKubeconfig(), "--dir", dir, "--timeout", "10", ...flags],
    { print: (l) => lines.push(l), note: (l) => notes.push(l) },
  );
  return { code, lines, notes };
}

async function clients(kube: KubeServer) {
  const kc = await kubeConfigFor(kube);
  return {
    core: kc.makeApiClient(k8s.CoreV1Api),
    apps: kc.makeApiClient(k8s.AppsV1Api),
    rbac: kc.makeApiClient(k8s.RbacAuthorizationV1Api),
    ext: kc.makeApiClient(k8s.ApiextensionsV1Api),
  };
}

function outcomes(run: Run): Set<string> {
  return new Set(run.lines.map((l) => l.split(" ")[1]!));
}

Deno.test("deploy: creates everything and the Redis Secret; a second run is all unchanged", async () => {
  await using kube = await startKubeServer({ simulateRollouts: true });
  const dir = await copyOfK8s();
  try {
    const first = await deployTo(kube, dir);
    deepStrictEqual(first.code, 0, first.notes.join("\n"));
    for (
      const line of [
        "customresourcedefinition.apiextensions.k8s.io/addresspools.holdfast.io created",
        "namespace/holdfast-system created",
        "secret/holdfast-redis created",
        "serviceaccount/holdfast-controller created",
        "clusterrole.rbac.authorization.k8s.io/holdfast-controller created",
        "deployment.apps/holdfast-controller created",
        "daemonset.apps/holdfast-agent created",
        "deployment.apps/holdfast-redis created",
        "service/holdfast-redis created",
        "configmap/holdfast-policy created",
        "loadbalancerconfig.holdfast.io/default created",
      ]
    ) ok(first.lines.includes(line), `"${line}" in:\n${first.lines.join("\n")}`);
    deepStrictEqual(outcomes(first), new Set(["created"]));
    ok(
      !first.lines.some((l) => l.includes("addresspool.holdfast.io/blue")),
      "examples not applied",
    );
    ok(first.notes.some((n) => n.startsWith("deployment.apps/holdfast-controller rolled out")));

    const { core, apps } = await clients(kube);
    const secret = await core.readNamespacedSecret({
      name: "holdfast-redis",
      namespace: "holdfast-system",
    });
    const password = atob(secret.data!.password!);
    ok(/^[0-9a-f]{64}$/.test(password), "a random password");
    ok(![...first.lines, ...first.notes].some((l) => l.includes(password)), "never printed");
    const controller = await apps.readNamespacedDeployment({
      name: "holdfast-controller",
      namespace: "holdfast-system",
    });
    deepStrictEqual(
      controller.metadata?.labels?.["app.kubernetes.io/managed-by"],
      "holdfast-deploy",
    );
    ok(
      controller.metadata?.managedFields?.some((f) => f.manager === "holdfast-deploy"),
      "applied by field manager holdfast-deploy",
    );

    const second = await deployTo(kube, dir);
    deepStrictEqual(second.code, 0, second.notes.join("\n"));
    deepStrictEqual(outcomes(second), new Set(["unchanged"]), second.lines.join("\n"));
    deepStrictEqual(second.lines.length, first.lines.length);
    const again = await core.readNamespacedSecret({
      name: "holdfast-redis",
      namespace: "holdfast-system",
    });
    deepStrictEqual(atob(again.data!.password!), password, "the password is kept");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deploy: a manifest removed from the directory is pruned; the Secret and CRDs stay", async () => {
  await using kube = await startKubeServer({ simulateRollouts: true });
  const dir = await copyOfK8s();
  try {
    deepStrictEqual((await deployTo(kube, dir)).code, 0);
    await Deno.remove(`${dir}/redis.yaml`);
    await Deno.remove(`${dir}/crds/egressnats.yaml`);
    const run = await deployTo(kube, dir);
    deepStrictEqual(run.code, 0, run.notes.join("\n"));
    const pruned = run.lines.filter((l) => l.endsWith(" pruned")).sort();
    deepStrictEqual(pruned, [
      "deployment.apps/holdfast-redis pruned",
      "service/holdfast-redis pruned",
      "serviceaccount/holdfast-redis pruned",
    ]);
    const { core, apps, ext } = await clients(kube);
    await assertRejects(() =>
      apps.readNamespacedDeployment({ name: "holdfast-redis", namespace: "holdfast-system" })
    );
    await core.readNamespacedSecret({ name: "holdfast-redis", namespace: "holdfast-system" });
    await ext.readCustomResourceDefinition({ name: "egressnats.holdfast.io" });
    // Objects deploy did not apply (no managed-by label) are never pruned.
    await core.createNamespacedConfigMap({
      namespace: "holdfast-system",
      body: { metadata: { name: "operator-notes" }, data: { a: "b" } },
    });
    const third = await deployTo(kube, dir);
    deepStrictEqual(outcomes(third), new Set(["unchanged"]), third.lines.join("\n"));
    await core.readNamespacedConfigMap({ name: "operator-notes", namespace: "holdfast-system" });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deploy --dry-run stores nothing; --image and --namespace rewrite what is applied", async () => {
  await using kube = await startKubeServer({ simulateRollouts: true });
  const dir = await copyOfK8s();
  try {
    const { core, apps, rbac, ext } = await clients(kube);
    const wrongContext = await deployTo(kube, dir, "--context", "prod");
    deepStrictEqual(wrongContext.code, 1);
    deepStrictEqual(wrongContext.notes, [
      'Cannot use context "prod": the kubeconfig has "holdfast-test"',
    ]);
    const dry = await deployTo(kube, dir, "--dry-run", "--context", "holdfast-test");
    deepStrictEqual(dry.code, 0, dry.notes.join("\n"));
    deepStrictEqual(outcomes(dry), new Set(["created"]));
    ok(dry.lines.every((l) => l.endsWith(" (server dry run)")), dry.lines.join("\n"));
    deepStrictEqual((await ext.listCustomResourceDefinition()).items, []);
    await assertRejects(() => core.readNamespace({ name: "holdfast-system" }));

    const run = await deployTo(
      kube,
      dir,
      "--image",
      "registry.example/holdfast:v1",
      "--namespace",
      "lb",
    );
    deepStrictEqual(run.code, 0, run.notes.join("\n"));
    const controller = await apps.readNamespacedDeployment({
      name: "holdfast-controller",
      namespace: "lb",
    });
    deepStrictEqual(
      controller.spec?.template.spec?.containers[0]?.image,
      "registry.example/holdfast:v1",
    );
    ok(
      controller.spec?.template.spec?.containers[0]?.args?.includes(
        "--redis=redis://holdfast-redis.lb.svc:6379",
      ),
    );
    const agent = await apps.readNamespacedDaemonSet({ name: "holdfast-agent", namespace: "lb" });
    deepStrictEqual(
      agent.spec?.template.spec?.containers[0]?.image,
      "registry.example/holdfast:v1",
    );
    const bindings = await rbac.listClusterRoleBinding();
    for (const b of bindings.items) {
      for (const s of b.subjects ?? []) deepStrictEqual(s.namespace, "lb", b.metadata?.name);
    }
    await core.readNamespacedSecret({ name: "holdfast-redis", namespace: "lb" });

    // A dry run of another image reports the change and changes nothing.
    const before = controller.metadata?.resourceVersion;
    const change = await deployTo(kube, dir, "--namespace", "lb", "--dry-run");
    deepStrictEqual(change.code, 0, change.notes.join("\n"));
    ok(
      change.lines.includes("deployment.apps/holdfast-controller configured (server dry run)"),
      change.lines.join("\n"),
    );
    ok(change.lines.includes("service/holdfast-redis unchanged (server dry run)"));
    const after = await apps.readNamespacedDeployment({
      name: "holdfast-controller",
      namespace: "lb",
    });
    deepStrictEqual(after.metadata?.resourceVersion, before);
    deepStrictEqual(
      after.spec?.template.spec?.containers[0]?.image,
      "registry.example/holdfast:v1",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deploy: a policy swapped into the cluster is not put back; rollout timeout fails", async () => {
  await using kube = await startKubeServer({ simulateRollouts: false });
  const dir = await copyOfK8s();
  try {
    const { core } = await clients(kube);
    const noRollout = await deployTo(kube, dir, "--timeout", "0.5");
    deepStrictEqual(noRollout.code, 1);
    ok(
      noRollout.notes.some((n) => /did not roll out within 0.5 s/.test(n)),
      noRollout.notes.join("\n"),
    );
    const cm = await core.readNamespacedConfigMap({
      name: "holdfast-policy",
      namespace: "holdfast-system",
    });
    cm.binaryData = { "policy.wasm": btoa("swapped") };
    await core.replaceNamespacedConfigMap({
      name: "holdfast-policy",
      namespace: "holdfast-system",
      body: cm,
    });
    const run = await deployTo(kube, dir, "--no-wait");
    deepStrictEqual(run.code, 0, run.notes.join("\n"));
    ok(run.lines.includes("configmap/holdfast-policy unchanged"));
    const kept = await core.readNamespacedConfigMap({
      name: "holdfast-policy",
      namespace: "holdfast-system",
    });
    deepStrictEqual(kept.binaryData?.["policy.wasm"], btoa("swapped"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
