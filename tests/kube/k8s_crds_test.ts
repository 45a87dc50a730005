/**
 * Holdfast's own CRDs (`k8s/crds/`) and manifests (`k8s/`) load into the test server, are
 * served, and validate objects the way a cluster would after `kubectl apply -f k8s/crds`. The
 * files are part of the repository: a missing one fails the test that reads it (never a skip).
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { startKubeServer } from "../../lab/kube/mod.ts";
import { loadManifests } from "../../lab/kube/manifests.ts";
import { assertStringIncludes } from "./_assert.ts";
import { kubectlEnv } from "./_kubectl.ts";

const CRDS = new URL("../../k8s/crds/", import.meta.url).pathname;

Deno.test({
  name: "k8s/crds: every CRD loads and its kinds are served",
  async fn() {
    const crds = (await loadManifests(CRDS)).filter((o) => o.kind === "CustomResourceDefinition");
    ok(crds.length > 0, "k8s/crds holds CRDs");
    await using server = await startKubeServer({ crdDirs: [CRDS] });
    for (const crd of crds) {
      const spec = crd.spec as {
        group: string;
        names: { plural: string };
        versions: { name: string }[];
      };
      for (const v of spec.versions) {
        ok(
          server.registry.find(spec.group, v.name, spec.names.plural),
          `${spec.names.plural}.${spec.group}/${v.name} served`,
        );
      }
    }
  },
});

Deno.test({
  name:
    "k8s/crds: kubectl applies the CRDs and AddressPools; an invalid pool is refused naming the field",
  async fn() {
    await using env = await kubectlEnv();
    await env.ok(["apply", "-f", CRDS]);
    const pool = (name: string, blocks: unknown[]) =>
      JSON.stringify({
        apiVersion: "holdfast.io/v1alpha1",
        kind: "AddressPool",
        metadata: { name },
        spec: { blocks },
      });
    await env.ok(
      ["apply", "-f", "-"],
      pool("blue", [{ cidr: "10.0.100.0/28" }, { start: "10.0.100.40", stop: "10.0.100.49" }]),
    );
    const blue = JSON.parse(await env.ok(["get", "hfpool", "blue", "-o", "json"]));
    deepStrictEqual(
      [blue.spec.autoAssign, blue.spec.avoidBuggyIPs],
      [true, false],
      "schema defaults applied",
    );
    const table = await env.ok(["get", "addresspools"]);
    assertStringIncludes(table, "TOTAL");
    const mixed = await env.kubectl(["apply", "-f", "-"], {
      stdin: pool("mixed", [{ cidr: "10.0.0.0/24", start: "10.0.0.1" }]),
    });
    ok(mixed.code !== 0, "a block with both cidr and start is refused");
    assertStringIncludes(mixed.stderr, "spec.blocks[0]");
    const bad = await env.kubectl(["apply", "-f", "-"], {
      stdin: pool("bad", [{ cidr: "10.0.0.0/33" }]),
    });
    ok(bad.code !== 0, "a bad CIDR is refused");
    assertStringIncludes(bad.stderr, "spec.blocks[0].cidr");
    const none = await env.kubectl(["apply", "-f", "-"], { stdin: pool("none", []) });
    ok(none.code !== 0, "a pool without blocks is refused");
    assertStringIncludes(none.stderr, "spec.blocks");
  },
});

const K8S = new URL("../../k8s/", import.meta.url).pathname;

Deno.test({
  name:
    "k8s/: kubectl applies every manifest (client-side, then server-side over it) without errors",
  async fn() {
    await using env = await kubectlEnv({ simulateRollouts: true });
    await env.ok(["apply", "-f", CRDS]);
    await env.ok(["apply", "-f", `${K8S}namespace.yaml`]);
    const first = await env.kubectl(["apply", "-R", "-f", K8S]);
    deepStrictEqual(first.code, 0, first.stderr);
    const again = await env.kubectl(["apply", "--server-side", "-R", "-f", K8S]);
    deepStrictEqual(again.code, 0, again.stderr);
    const deployments = JSON.parse(await env.ok(["get", "deployments", "-A", "-o", "json"]));
    ok(deployments.items.length > 0, "k8s/ holds Deployments");
  },
});
