import { deepStrictEqual, ok } from "node:assert/strict";
import {
  agentRedisUrl,
  controlledBy,
  corrected,
  covers,
  defaultImage,
  deriveWorkload,
  drifted,
} from "./_egress_workload.ts";
import { VERSION } from "../../lib/version.ts";
import type { KubeObject } from "./objects.ts";

const nat = (spec: Record<string, unknown> = {}, name = "internet"): KubeObject => ({
  metadata: { namespace: "egress", name, uid: "u-1", generation: 2 },
  spec: {
    destinations: ["0.0.0.0/0"],
    addresses: ["203.0.113.10"],
    gateways: ["10.8.0.100"],
    sources: [{ prefix: "10.8.0.0/26" }],
    ...spec,
  },
});
const OPTS = { redisUrl: "redis://holdfast-redis.holdfast-system.svc:6379" };

Deno.test("egress workload: a Deployment and a PDB owned by the EgressNAT, with the agent's arguments", () => {
  const d = deriveWorkload(nat({ replicas: 3, nodeSelector: { nat: "yes" } }), OPTS);
  ok("deployment" in d, JSON.stringify(d));
  const { deployment: dep, pdb } = d;
  const owner = {
    apiVersion: "holdfast.io/v1alpha1",
    kind: "EgressNAT",
    name: "internet",
    uid: "u-1",
    controller: true,
    blockOwnerDeletion: true,
  };
  deepStrictEqual(dep.metadata.ownerReferences, [owner]);
  deepStrictEqual(pdb.metadata.ownerReferences, [owner]);
  deepStrictEqual([dep.metadata.namespace, dep.metadata.name], ["egress", "internet"]);
  deepStrictEqual(dep.spec.replicas, 3);
  deepStrictEqual(dep.spec.selector, { matchLabels: { "holdfast.io/egress": "internet" } });
  deepStrictEqual(dep.spec.template.metadata.labels["holdfast.io/egress"], "internet");
  deepStrictEqual(dep.spec.strategy.rollingUpdate, { maxSurge: 1, maxUnavailable: 0 });
  deepStrictEqual(dep.spec.template.spec.nodeSelector, { nat: "yes" });
  const anti = dep.spec.template.spec.affinity.podAntiAffinity
    .preferredDuringSchedulingIgnoredDuringExecution[0];
  deepStrictEqual(anti.podAffinityTerm.topologyKey, "kubernetes.io/hostname");
  const c = dep.spec.template.spec.containers[0];
  deepStrictEqual(c.image, `holdfast:${VERSION}`);
  deepStrictEqual(defaultImage(), `holdfast:${VERSION}`);
  deepStrictEqual(c.args, [
    "main.ts",
    "egress",
    "--egress=egress/internet",
    "--name=$(POD_NAME)",
    "--redis=redis://holdfast-redis.holdfast-system.svc:6379",
    "--metrics-addr=0.0.0.0:9470",
  ]);
  deepStrictEqual(c.command, ["deno", "run", "-P=egress", "--no-prompt"]);
  deepStrictEqual(pdb.spec, {
    maxUnavailable: 1,
    selector: { matchLabels: { "holdfast.io/egress": "internet" } },
  });
  // Default replicas (the CRD's default too).
  const two = deriveWorkload(nat(), { ...OPTS, image: "reg/holdfast:x" });
  ok("deployment" in two);
  deepStrictEqual(two.deployment.spec.replicas, 2);
  deepStrictEqual(two.deployment.spec.template.spec.containers[0].image, "reg/holdfast:x");
});

Deno.test("egress workload: Redis credentials through the Secret, bad names refused", () => {
  const o = { ...OPTS, redisUser: "holdfast", redisPasswordSecret: "holdfast-redis" };
  deepStrictEqual(
    agentRedisUrl(o),
    "redis://holdfast:$(HOLDFAST_REDIS_PASSWORD)@holdfast-redis.holdfast-system.svc:6379",
  );
  const d = deriveWorkload(nat(), o);
  ok("deployment" in d);
  const env = d.deployment.spec.template.spec.containers[0].env;
  deepStrictEqual(env.find((e: KubeObject) => e.name === "HOLDFAST_REDIS_PASSWORD")?.valueFrom, {
    secretKeyRef: { name: "holdfast-redis", key: "password" },
  });
  const long = deriveWorkload(nat({}, "x".repeat(64)), OPTS);
  ok("problem" in long);
  ok(long.problem.startsWith('field "metadata.name": at most 63 characters'), long.problem);
  const bad = deriveWorkload(nat({ replicas: 0 }), OPTS);
  ok("problem" in bad && bad.problem.startsWith('field "spec.replicas"'));
});

Deno.test("egress workload: drift is what the controller keeps, server defaults are not", () => {
  const d = deriveWorkload(nat(), OPTS);
  ok("deployment" in d);
  const want = d.deployment;
  // What the API server shows: defaults and status added.
  // deno-lint-ignore no-explicit-any
  const actual: any = structuredClone(want);
  actual.metadata.resourceVersion = "7";
  actual.metadata.labels = { ...want.metadata.labels, extra: "kept" };
  actual.spec.revisionHistoryLimit = 10;
  actual.spec.template.spec.containers[0].terminationMessagePath = "/dev/termination-log";
  actual.status = { readyReplicas: 2 };
  deepStrictEqual(drifted(actual, want), []);
  ok(controlledBy(actual, "u-1") && !controlledBy(actual, "u-2"));
  actual.spec.replicas = 5;
  actual.spec.template.spec.containers.push({ name: "intruder", image: "x" });
  deepStrictEqual(drifted(actual, want), ["spec.replicas", "spec.template"]);
  // deno-lint-ignore no-explicit-any
  const fixed: any = corrected(actual, want);
  deepStrictEqual(fixed.metadata.resourceVersion, "7");
  deepStrictEqual(fixed.metadata.labels.extra, "kept");
  deepStrictEqual(drifted(fixed, want), []);
  ok(covers({ port: 9470 }, { port: 9470 }) && !covers([1, 2], [1]));
});
