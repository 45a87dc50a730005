/**
 * Active health probing on an LB node (`node/lb/main.ts` starts it with {@linkcode startHealth}).
 *
 * Each LB node probes alone and decides alone (no verdicts shared through Redis): the agent
 * forwards to backends itself, so what it can reach is what matters for its packets, and a
 * probe verdict never waits on Redis. Nodes converge because they probe the same backends with
 * the same settings and policy; while they disagree, stored flows (flow sync) keep every
 * existing connection on its backend — `docs/policy.md` says what disagreement costs.
 *
 * - `targets.ts`: what to probe, from the services config (`healthCheck` per service).
 * - `probe.ts`: one TCP connect or HTTP GET with a timeout.
 * - `checker.ts`: probe loops, bounded concurrency, the policy's `health_step`, log lines, metrics.
 * - `apply.ts`: verdicts through the Writer (source `health`), flow purges on quarantine.
 *
 * @module
 */
import { log as rootLog, type Logger } from "../../../lib/log.ts";
import type { Registry } from "../../../lib/metrics.ts";
import type { Writer } from "../tables/writer.ts";
import { healthStepTs } from "../../../policy-as/host/health_ts.ts";
import type { PolicyHost } from "../../../policy-as/host/policy_host.ts";
import type { FlowTable } from "../../bpf/flow_table.ts";
import type { FlowStore } from "../flows/store.ts";
import { HealthApplier } from "./apply.ts";
import { type HealthChange, HealthChecker, type HealthStep } from "./checker.ts";
import type { Prober } from "./probe.ts";
import { healthTargets, type HealthView } from "./targets.ts";

export { HEALTH_SOURCE, HealthApplier } from "./apply.ts";
export { type HealthChange, HealthChecker, type HealthStep } from "./checker.ts";
export { probe, type Prober, type ProbeResult, type ProbeTarget } from "./probe.ts";
export { type HealthTarget, healthTargets, type HealthView, targetKey } from "./targets.ts";

/** How often the followed config is looked at for a new version (an identity check). */
const FOLLOW_MS = 100;

/** Options of {@link startHealth}. */
export interface StartHealthOptions {
  /** The control plane whose Writer and reconciler carry the verdicts. */
  cp: { writer: Writer; reconciler: { waitIdleWithin(timeoutMs: number): Promise<boolean> } };
  /** The policy host: its serving module's `health_step` judges every probe. */
  policy?: PolicyHost;
  /** The services config in force (called often: return the same object while unchanged). */
  config: () => HealthView | null;
  flows?: FlowTable;
  /** The shared flow store, called at the first purge (see `HealthApplierOptions.store`). */
  store?: () => FlowStore;
  node?: string;
  /** Told of each verdict change once applied (the agent's reports); must not block. */
  onVerdict?: (change: HealthChange) => void;
  prober?: Prober;
  maxConcurrent?: number;
  logger?: Logger;
  registry?: Registry;
}

/** Running health probes; `stop()` ends them (verdicts already written stay). */
export interface NodeHealth {
  readonly checker: HealthChecker;
  stop(): Promise<void>;
}

/**
 * The health step of the module `policy` serves now (the TypeScript reference before any
 * module serves, or if the module traps — logged).
 */
export function policyHealthStep(policy: PolicyHost | undefined, logger: Logger): HealthStep {
  if (!policy?.ready) return healthStepTs;
  const module = policy.current;
  return (rec, probe) => {
    try {
      return module.healthStep(rec, probe);
    } catch (err) {
      logger.warn("policy health step failed; using the TypeScript reference", { err });
      return healthStepTs(rec, probe);
    }
  };
}

/**
 * Probes the backends of every service of `config()` that has a health check, following
 * config changes, and applies the verdicts.
 */
export function startHealth(options: StartHealthOptions): NodeHealth {
  const logger = (options.logger ?? rootLog).with({ component: "health" });
  const applier = new HealthApplier(options.cp, {
    ...(options.flows ? { flows: options.flows } : {}),
    ...(options.store ? { store: options.store } : {}),
    ...(options.node ? { node: options.node } : {}),
    logger,
  });
  const checker = new HealthChecker({
    step: () => policyHealthStep(options.policy, logger),
    onChange: async (change) => {
      await applier.apply(change);
      options.onVerdict?.(change);
    },
    onRemove: (target) => applier.release(target),
    ...(options.prober ? { prober: options.prober } : {}),
    ...(options.maxConcurrent ? { maxConcurrent: options.maxConcurrent } : {}),
    logger,
    ...(options.registry ? { registry: options.registry } : {}),
  });
  let seen: HealthView | null | undefined = undefined;
  let updating: Promise<void> = Promise.resolve();
  const follow = () => {
    const view = options.config();
    if (view === seen) return;
    seen = view;
    const targets = healthTargets(view);
    updating = updating.then(() => checker.setTargets(targets)).catch((err) =>
      logger.error("cannot follow the health targets", { err })
    );
    logger.info("health targets", {
      backends: targets.length,
      services: new Set(targets.map((t) => t.service)).size,
    });
  };
  follow();
  const timer = setInterval(follow, FOLLOW_MS);
  return {
    checker,
    async stop() {
      clearInterval(timer);
      await updating;
      await checker.stop();
    },
  };
}
