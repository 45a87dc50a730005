/**
 * LB nodes' reports become Kubernetes Events (issue 14), against the Kubernetes API test server
 * and a real redis-server: what agents append to the model's reports stream (their writer,
 * `node/lb/reports.ts`) shows as Events on the Service (`BackendUnhealthy`, one Event naming both
 * nodes) and on the policy ConfigMap (`PolicyRejected`), written by the leader only; what was
 * reported before the controller started is not replayed.
 */
import { deepStrictEqual } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { startController } from "../../controller/k8s/run.ts";
import { appendReport } from "../../controller/model/reports.ts";
import { kubeConfigFor, startKubeServer } from "../../lab/kube/mod.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { log } from "../../lib/log.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { FAST_CHECK } from "../../node/lb/health/_testing.ts";
import type { HealthChange } from "../../node/lb/health/mod.ts";
import { AgentReporter } from "../../node/lb/reports.ts";
import { waitFor } from "./_kubectl.ts";

const quarantined = (backendIp: string): HealthChange => ({
  target: {
    service: "default/web",
    backend: `${backendIp}:8080/TCP`,
    portName: "",
    frontends: ["10.0.100.1:80/TCP"],
    check: FAST_CHECK,
    ip: backendIp,
    probePort: 8080,
  },
  verdict: "quarantined",
  probes: 3,
  reason: "connect refused",
  atMs: 0,
});

Deno.test("reports: health verdicts from two LB nodes are one Event on the Service, a policy rejection one on the ConfigMap, from the leader only", async () => {
  await using server = await startKubeServer({ crdDirs: ["k8s/crds"] });
  await using redisServer = await startRedis();
  const kc = await kubeConfigFor(server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const conns = [0, 1, 2].map(() => new RedisConnection({ url: redisServer.url }));
  try {
    // Reported before any controller ran: not replayed as an Event.
    await appendReport(conns[2]!, {
      kind: "health",
      node: "lb-node-0",
      service: "default/web",
      backend: "10.1.0.9:8080",
      state: "unhealthy",
      reason: "3 failed probes (timeout)",
    });
    const policyConfigMap = { namespace: "default", name: "holdfast-policy" };
    const common = { policyConfigMap, reportsWindowMs: 300, logger: log };
    await using leader = startController(kc, {
      ...common,
      identity: "controller-0",
      isLeader: () => true,
      reportsRedis: conns[0],
    });
    await using follower = startController(kc, {
      ...common,
      identity: "controller-1",
      isLeader: () => false,
      reportsRedis: conns[1],
    });
    await Promise.all([leader.synced, follower.synced]);

    // Two agents report the same verdict; one of them also rejected a policy module.
    for (const node of ["lb-node-1", "lb-node-2"]) {
      const reporter = new AgentReporter({ redis: { url: redisServer.url }, node, logger: log });
      reporter.health(quarantined("10.1.0.3"));
      if (node === "lb-node-1") reporter.policyRejected("ab".repeat(32), "abi: no export");
      await reporter.close();
    }

    const eventsOf = async (name: string) =>
      (await core.listNamespacedEvent({
        namespace: "default",
        fieldSelector: `involvedObject.name=${name}`,
      })).items;
    let web: k8s.CoreV1Event[] = [];
    await waitFor(
      "the BackendUnhealthy Event",
      async () => (web = await eventsOf("web")).length > 0,
    );
    let cm: k8s.CoreV1Event[] = [];
    await waitFor("the PolicyRejected Event", async () => {
      cm = await eventsOf("holdfast-policy");
      return cm.length > 0;
    });
    // A window later still one each: the follower wrote none, nothing was replayed.
    await new Promise((r) => setTimeout(r, 700));
    web = await eventsOf("web");
    cm = await eventsOf("holdfast-policy");
    const shown = (e: k8s.CoreV1Event) =>
      `${e.type} ${e.reason} ${e.involvedObject.kind} ${e.reportingInstance}: ${e.message}`;
    deepStrictEqual(web.map(shown), [
      "Warning BackendUnhealthy Service controller-0: backend 10.1.0.3:8080 unhealthy on " +
      "lb-node-1, lb-node-2: 3 failed probes (connect refused)",
    ]);
    deepStrictEqual(cm.map(shown), [
      "Warning PolicyRejected ConfigMap controller-0: Policy module sha256 abababababababab " +
      "rejected on lb-node-1 (abi: no export); the module serving there stays",
    ]);
  } finally {
    for (const c of conns) await c.close();
  }
});
