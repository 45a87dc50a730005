/**
 * The agent's health probing (`main.ts agent --health on`, the default): probes the backends of
 * every service with a `healthCheck` in the config the agent follows, judged by its policy host,
 * verdicts through its control plane; with flow sync a quarantined backend's stored flows are
 * purged through a Redis connection of its own (opened only when a service has a check).
 *
 * @module
 */
import type { Logger } from "../../../lib/log.ts";
import type { PolicyHost } from "../../../policy-as/host/policy_host.ts";
import type { FlowTable } from "../../bpf/flow_table.ts";
import {
  connectRedisStore,
  type RedisFlowStore,
  type RedisStoreOptions,
} from "../flows/redis_store.ts";
import type { AgentReporter } from "../reports.ts";
import { startHealth, type StartHealthOptions } from "./mod.ts";
import type { HealthView } from "./targets.ts";

/** Starts probing for an agent; returns the function that stops it (and closes its store). */
export function startAgentHealth(
  a: { nodeName: string; flowSync: boolean; redis: RedisStoreOptions },
  parts: {
    cp: StartHealthOptions["cp"];
    policy: PolicyHost;
    flows: FlowTable;
    config: () => HealthView | null;
    logger: Logger;
    /** Where verdict changes are reported to the controller (`--model redis`). */
    reporter?: AgentReporter | null;
  },
): () => Promise<void> {
  let store: RedisFlowStore | undefined;
  const health = startHealth({
    cp: parts.cp,
    policy: parts.policy,
    config: parts.config,
    flows: parts.flows,
    ...(a.flowSync ? { store: () => store ??= connectRedisStore(a.redis) } : {}),
    node: a.nodeName,
    ...(parts.reporter ? { onVerdict: (c) => parts.reporter!.health(c) } : {}),
    logger: parts.logger,
  });
  return async () => {
    await health.stop();
    await store?.close();
  };
}
