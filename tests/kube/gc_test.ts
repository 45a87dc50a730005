/**
 * The test server's garbage collector (lab/kube/gc.ts) driven by the real kubectl: a Background
 * delete removes the owner's dependents (a chain too) but only unlinks a dependent that has
 * another live owner; `--cascade=orphan` keeps the dependents without the reference;
 * `--cascade=foreground` keeps the owner (deletionTimestamp, finalizer foregroundDeletion) until
 * a dependent held by a finalizer of its own is gone; an object created with a reference only to
 * an owner that is gone is collected. PodDisruptionBudgets are served
 * (`kubectl get pdb`).
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { assertStringIncludes } from "./_assert.ts";
import { kubectlEnv, waitFor } from "./_kubectl.ts";

// deno-lint-ignore no-explicit-any
type Obj = any;

function configMap(name: string, owners: Obj[] = [], finalizers: string[] = []): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace: "default", ownerReferences: owners, finalizers },
    data: { a: "b" },
  });
}

function ref(kind: string, apiVersion: string, o: Obj, block = true): Obj {
  return {
    apiVersion,
    kind,
    name: o.metadata.name,
    uid: o.metadata.uid,
    controller: true,
    blockOwnerDeletion: block,
  };
}

Deno.test("kube gc: Background, Orphan and Foreground deletes of owners, with kubectl", async () => {
  await using env = await kubectlEnv();
  const get = async (what: string): Promise<Obj> =>
    JSON.parse(await env.ok(["get", ...what.split(" "), "-o", "json"]));
  const exists = async (what: string) =>
    (await env.kubectl(["get", ...what.split(" ")])).code === 0;

  // Background (kubectl's default): owner → Deployment → PDB; a ConfigMap with a second owner.
  await env.ok(["create", "-f", "-"], configMap("owner"));
  await env.ok(["create", "-f", "-"], configMap("other"));
  const owner = await get("configmap owner"), other = await get("configmap other");
  await env.ok(
    ["create", "-f", "-"],
    JSON.stringify({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: {
        name: "dep",
        namespace: "default",
        ownerReferences: [ref("ConfigMap", "v1", owner)],
      },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "x" } },
        template: {
          metadata: { labels: { app: "x" } },
          spec: { containers: [{ name: "c", image: "i" }] },
        },
      },
    }),
  );
  const dep = await get("deployment dep");
  await env.ok(
    ["create", "-f", "-"],
    JSON.stringify({
      apiVersion: "policy/v1",
      kind: "PodDisruptionBudget",
      metadata: {
        name: "pdb",
        namespace: "default",
        ownerReferences: [ref("Deployment", "apps/v1", dep)],
      },
      spec: { maxUnavailable: 1, selector: { matchLabels: { app: "x" } } },
    }),
  );
  await env.ok(
    ["create", "-f", "-"],
    configMap("shared", [
      ref("ConfigMap", "v1", owner, false),
      ref("ConfigMap", "v1", other, false),
    ]),
  );
  assertStringIncludes(await env.ok(["get", "pdb"]), "pdb");
  await env.ok(["delete", "configmap", "owner"]);
  await waitFor("the chain collected", async () => !(await exists("deployment dep")));
  ok(!(await exists("pdb pdb")), "the PDB owned by the Deployment is gone");
  const shared = await get("configmap shared");
  deepStrictEqual(shared.metadata.ownerReferences.map((r: Obj) => r.name), ["other"]);

  // Orphan: the dependent stays, without the reference.
  await env.ok(["create", "-f", "-"], configMap("owner2"));
  const owner2 = await get("configmap owner2");
  await env.ok(["create", "-f", "-"], configMap("orphan", [ref("ConfigMap", "v1", owner2)]));
  await env.ok(["delete", "configmap", "owner2", "--cascade=orphan"]);
  ok(!(await exists("configmap owner2")), "owner2 deleted");
  const orphan = await get("configmap orphan");
  deepStrictEqual(orphan.metadata.ownerReferences, undefined);

  // Foreground: the owner waits for a blocking dependent held by its own finalizer.
  await env.ok(["create", "-f", "-"], configMap("owner3"));
  const owner3 = await get("configmap owner3");
  await env.ok(
    ["create", "-f", "-"],
    configMap("held", [ref("ConfigMap", "v1", owner3)], ["example.com/hold"]),
  );
  await env.ok(["delete", "configmap", "owner3", "--cascade=foreground", "--wait=false"]);
  const waiting = await get("configmap owner3");
  ok(waiting.metadata.deletionTimestamp, "owner3 is being deleted");
  deepStrictEqual(waiting.metadata.finalizers, ["foregroundDeletion"]);
  ok((await get("configmap held")).metadata.deletionTimestamp, "the dependent is deleting");
  await env.ok([
    "patch",
    "configmap",
    "held",
    "--type",
    "merge",
    "-p",
    '{"metadata":{"finalizers":null}}',
  ]);
  await waitFor("owner3 released", async () => !(await exists("configmap owner3")));
  ok(!(await exists("configmap held")), "held gone");

  // Foreground with nothing to wait for: gone at once.
  await env.ok(["create", "-f", "-"], configMap("owner4"));
  const owner4 = await get("configmap owner4");
  await env.ok(["create", "-f", "-"], configMap("dep4", [ref("ConfigMap", "v1", owner4)]));
  await env.ok(["delete", "configmap", "owner4", "--cascade=foreground"]);
  ok(!(await exists("configmap owner4")) && !(await exists("configmap dep4")), "both gone");

  // Created with a reference only to an owner that does not exist (deleted a moment before):
  // collected.
  await env.ok(
    ["create", "-f", "-"],
    configMap("late", [ref("ConfigMap", "v1", owner4)]),
  );
  ok(!(await exists("configmap late")), "a dependent of a gone owner is collected");
});
