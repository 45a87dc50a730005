/**
 * The agent's reports to the controller (`--model redis` only): each health verdict change and
 * each policy module it rejected is appended to the model's reports stream in Redis
 * (`controller/model/reports.ts`), which the leading controller turns into Kubernetes Events.
 *
 * Never in the way: a report is sent in the background (at most {@linkcode MAX_IN_FLIGHT} at
 * once, more are dropped), a failed or dropped one is logged and counted
 * (`holdfast_agent_reports_total{kind,result}`), and probing or swapping never waits on it. The
 * connection is opened at the first report.
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import { type Registry, registry as rootRegistry } from "../../lib/metrics.ts";
import { RedisConnection, type RedisStoreOptions } from "../../lib/redis_connection.ts";
import { appendReport, type Report } from "../../controller/model/reports.ts";
import type { HealthChange } from "./health/checker.ts";

/** Reports being sent at once; past it new ones are dropped (Redis is slow or down). */
export const MAX_IN_FLIGHT = 64;

/** Sends an agent's reports; see the module doc. */
export class AgentReporter {
  readonly #redis: RedisStoreOptions;
  readonly #node: string;
  readonly #log: Logger;
  readonly #sent;
  #conn: Pick<RedisConnection, "command" | "close"> | undefined;
  readonly #inFlight = new Set<Promise<void>>();

  constructor(
    options: {
      redis: RedisStoreOptions;
      node: string;
      logger: Logger;
      registry?: Registry;
      /** The connection (default: one of its own, opened at the first report). */
      connection?: Pick<RedisConnection, "command" | "close">;
    },
  ) {
    this.#redis = options.redis;
    this.#node = options.node;
    this.#log = options.logger.with({ component: "reports" });
    this.#conn = options.connection;
    this.#sent = (options.registry ?? rootRegistry).counter(
      "holdfast_agent_reports_total",
      "Reports (health verdicts, policy rejections) this agent sent to the controller through " +
        "Redis, by kind and result (sent, failed, dropped)",
      { labelNames: ["kind", "result"] },
    );
  }

  /** Reports a verdict change of the health checker. */
  health(change: HealthChange): void {
    const t = change.target;
    const down = change.verdict === "quarantined";
    this.#send({
      kind: "health",
      node: this.#node,
      service: t.service,
      backend: `${t.ip}:${t.probePort}`,
      state: down ? "unhealthy" : "healthy",
      reason: down
        ? `${change.probes} failed probes (${change.reason})`
        : `${change.probes} successful probes`,
    });
  }

  /** Reports a policy module this agent rejected. */
  policyRejected(sha256: string, reason: string): void {
    this.#send({ kind: "policy", node: this.#node, sha256, reason });
  }

  /** Waits for the reports in flight, then closes the connection. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#inFlight]);
    await this.#conn?.close();
  }

  #send(report: Report): void {
    if (this.#inFlight.size >= MAX_IN_FLIGHT) {
      this.#sent.inc({ kind: report.kind, result: "dropped" });
      this.#log.warn("report dropped: too many in flight", { kind: report.kind });
      return;
    }
    this.#conn ??= new RedisConnection({ ...this.#redis, logComponent: "reports" });
    const p = appendReport(this.#conn, report, {
      ...(this.#redis.prefix ? { prefix: this.#redis.prefix } : {}),
    }).then(
      () => this.#sent.inc({ kind: report.kind, result: "sent" }),
      (err) => {
        this.#sent.inc({ kind: report.kind, result: "failed" });
        this.#log.warn("cannot send report to the controller", { kind: report.kind, err });
      },
    ).finally(() => this.#inFlight.delete(p));
    this.#inFlight.add(p);
  }
}

/**
 * The agent's reporter: with `--model redis` one over its Redis (its `close` pushed onto
 * `cleanup`), else null (verdicts and rejections are log lines and metrics only).
 */
export function agentReporter(
  a: { model?: string | undefined; nodeName: string; redis: RedisStoreOptions },
  logger: Logger,
  cleanup: { push(stop: () => Promise<void> | void): unknown },
): AgentReporter | null {
  if (a.model !== "redis") return null;
  const reporter = new AgentReporter({ redis: a.redis, node: a.nodeName, logger });
  cleanup.push(() => reporter.close());
  return reporter;
}
