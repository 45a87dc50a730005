import { deepStrictEqual, ok } from "node:assert/strict";
import type * as k8s from "@kubernetes/client-node";
import { keepAliveConfig } from "./_keep_alive.ts";

type AgentMaker = { createAgent(c: k8s.Cluster | null, o: Record<string, unknown>): unknown };

/** What keepAliveConfig relies on of a KubeConfig: its prototype methods, read through `this`. */
class FakeKubeConfig {
  made = 0;
  cluster: k8s.Cluster = { name: "c", server: "http://127.0.0.1:1", skipTLSVerify: true };
  getCurrentCluster(): k8s.Cluster {
    return this.cluster;
  }
  createAgent(_c: k8s.Cluster | null, _o: Record<string, unknown>): unknown {
    return { fresh: ++this.made };
  }
}

Deno.test("keepAliveConfig: one kept-alive agent while the options stay; a new one when they change", () => {
  const fake = new FakeKubeConfig();
  const kept = keepAliveConfig(fake as unknown as k8s.KubeConfig);
  const view = kept.kc as unknown as AgentMaker;
  const cluster = kept.kc.getCurrentCluster();
  deepStrictEqual(cluster?.server, "http://127.0.0.1:1"); // the view reads the original's config
  const a = view.createAgent(cluster, {}) as { keepAlive?: boolean };
  ok(a === view.createAgent(cluster, {}), "same options: same agent");
  deepStrictEqual(a.keepAlive, true);
  const b = view.createAgent(cluster, { ca: "another CA" });
  ok(b !== a, "new options: new agent");
  // The original still makes an agent per call; a proxied cluster keeps client-node's agent.
  deepStrictEqual((fake.createAgent(cluster, {}) as { fresh: number }).fresh, 1);
  const proxied = { ...cluster!, proxyUrl: "http://proxy:3128" };
  deepStrictEqual((view.createAgent(proxied, {}) as { fresh: number }).fresh, 2);
  kept.close();
  ok(view.createAgent(cluster, {}) !== b, "closed: the next call makes a fresh agent");
  kept.close();
});
