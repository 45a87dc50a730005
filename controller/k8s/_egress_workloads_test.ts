import { deepStrictEqual } from "node:assert/strict";
import { reconcileWorkload, type WorkloadWriter } from "./_egress_workloads.ts";
import { captureLogs, log } from "../../lib/log.ts";
import type { KubeObject } from "./objects.ts";

const nat = (meta: Record<string, unknown> = {}): KubeObject => ({
  metadata: { namespace: "egress", name: "internet", uid: "u-1", generation: 1, ...meta },
  spec: { replicas: 2 },
});

function writer() {
  const ops: string[] = [];
  const w: WorkloadWriter = {
    createWorkload: (o) => Promise.resolve(void ops.push(`create ${o.kind}`)),
    replaceWorkload: (o) => Promise.resolve(void ops.push(`replace ${o.kind}`)),
  };
  return { w, ops };
}

const OPTS = { redisUrl: "redis://r:6379" };

Deno.test("egress workloads: creates what is missing; nothing for an EgressNAT being deleted or a name it does not control", async () => {
  using _logs = captureLogs();
  const a = writer();
  const c = await reconcileWorkload(nat(), [], [], OPTS, a.w, log, () => true);
  deepStrictEqual(a.ops, ["create Deployment", "create PodDisruptionBudget"]);
  deepStrictEqual([c.type, c.status, c.reason], ["NATPods", "True", "Managed"]);

  const b = writer();
  const deleting = await reconcileWorkload(
    nat({ deletionTimestamp: "2026-11-29T00:00:00Z" }),
    [],
    [],
    OPTS,
    b.w,
    log,
    () => true,
  );
  deepStrictEqual(b.ops, []);
  deepStrictEqual([deleting.status, deleting.reason], ["False", "Deleting"]);

  const d = writer();
  const theirs = { metadata: { namespace: "egress", name: "internet", uid: "x" }, spec: {} };
  const conflict = await reconcileWorkload(nat(), [theirs], [], OPTS, d.w, log, () => true);
  deepStrictEqual(d.ops, []);
  deepStrictEqual([conflict.status, conflict.reason], ["False", "Conflict"]);

  const f = writer();
  await reconcileWorkload(nat(), [], [], OPTS, f.w, log, () => false);
  deepStrictEqual(f.ops, [], "a follower writes nothing");
});
