/**
 * API clients whose requests reuse connections. client-node 1.x makes a new HTTP(S) agent for
 * every request (`KubeConfig.createAgent`, called from `applySecurityAuthentication`), so every
 * status patch and Event opened a connection of its own (and, against a real API server, a TLS
 * handshake). {@linkcode keepAliveConfig} gives a view of a `KubeConfig` whose agent is kept, with
 * `keepAlive`, as long as its options (CA, client certificate and key, TLS settings) are the same:
 * a rotated certificate makes a new one. Proxied clusters keep client-node's own agent.
 *
 * Measured (1,000 Service status merge patches against the in-process test API server, client
 * and server in one process): 490–690 → 340–410 ms of CPU.
 *
 * @module
 */

import http from "node:http";
import https from "node:https";
import type * as k8s from "@kubernetes/client-node";

type AgentOptions = https.AgentOptions & Record<string, unknown>;

/** The options an agent is built from, as one comparable string. */
function optionsKey(server: string, o: AgentOptions): string {
  const text = (v: unknown) =>
    v === undefined
      ? ""
      : typeof v === "string"
      ? v
      : v instanceof Uint8Array
      ? new TextDecoder().decode(v)
      : JSON.stringify(v);
  return [server, text(o.ca), text(o.cert), text(o.key), text(o.pfx), text(o.passphrase)]
    .concat([String(o.rejectUnauthorized), String(o.servername)]).join("\u0000");
}

/**
 * A view of `kc` (its prototype is `kc`: the same clusters, users and credentials, read live)
 * whose API clients (`makeApiClient`) share one keep-alive agent. `maxSockets` bounds the
 * connections it opens (default 64). `close()` ends its idle connections (the process would
 * otherwise keep them open).
 */
export function keepAliveConfig(
  kc: k8s.KubeConfig,
  maxSockets = 64,
): { kc: k8s.KubeConfig; close(): void } {
  const view = Object.create(kc) as k8s.KubeConfig;
  let kept: { key: string; agent: http.Agent } | undefined;
  const original = (kc as unknown as { createAgent: (c: unknown, o: unknown) => unknown })
    .createAgent;
  Object.defineProperty(view, "createAgent", {
    value(cluster: k8s.Cluster | null, options: AgentOptions) {
      if (!cluster || cluster.proxyUrl) return original.call(this, cluster, options);
      const plain = cluster.server.startsWith("http:");
      if (plain && !cluster.skipTLSVerify) return original.call(this, cluster, options);
      const key = optionsKey(cluster.server, options);
      if (kept?.key === key) return kept.agent;
      kept?.agent.destroy();
      const o = { ...options, keepAlive: true, maxSockets };
      kept = { key, agent: plain ? new http.Agent(o) : new https.Agent(o) };
      return kept.agent;
    },
  });
  return {
    kc: view,
    close() {
      kept?.agent.destroy();
      kept = undefined;
    },
  };
}
