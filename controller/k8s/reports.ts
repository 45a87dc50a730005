/**
 * The relay of LB nodes' reports to Kubernetes Events: while this replica leads, it follows the
 * reports stream in Redis (`controller/model/reports.ts`) from its tail (what was reported
 * before it led is not replayed) and writes `BackendUnhealthy` / `BackendHealthy` Events on the
 * Service and `PolicyRejected` on the policy ConfigMap, aggregated across nodes and rate-limited
 * per object (`_report_events.ts`). A follower reads nothing. Agents have no Kubernetes API
 * access (least privilege); this is how their health decisions and policy rejections reach
 * `kubectl describe`.
 *
 * @module
 */

import { sleep } from "../../lib/backoff.ts";
import { log as rootLog, type Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import type { RedisConnection } from "../../lib/redis_connection.ts";
import { readReports, reportsTail } from "../model/reports.ts";
import { ReportAggregator, type ReportAggregatorOptions } from "./_report_events.ts";
import type { ClusterWriter } from "./status.ts";

/** The relay's metric, on `registry` (lib/metrics.ts: registered per instance). */
const relayedCounter = (registry: Registry) =>
  registry.counter(
    "holdfast_controller_report_events_total",
    "LB node reports turned into Events, by result (written, failed, rate_limited, unreadable)",
    { labelNames: ["result"] },
  );

/** Options of {@linkcode ReportRelay}. */
export interface ReportRelayOptions extends ReportAggregatorOptions {
  redis: Pick<RedisConnection, "command" | "blocking">;
  writer: ClusterWriter;
  /** Whether this replica leads (default: always). */
  isLeader?: () => boolean;
  /** Key prefix of the model (default `hf`). */
  prefix?: string;
  /** Longest XREAD BLOCK, ms (default 500); also how often leadership is looked at. */
  blockMs?: number;
  logger?: Logger;
  /** Where its metrics go (default the process registry, served at `/metrics`). */
  registry?: Registry;
}

/** Follows the reports stream while leading; `stop()` ends it. */
export class ReportRelay {
  readonly #o: ReportRelayOptions;
  readonly #log: Logger;
  readonly #agg: ReportAggregator;
  readonly #relayed: ReturnType<typeof relayedCounter>;
  readonly #stop = new AbortController();
  #done: Promise<void> = Promise.resolve();

  constructor(options: ReportRelayOptions) {
    this.#o = options;
    this.#log = (options.logger ?? rootLog).with({ component: "reports" });
    this.#agg = new ReportAggregator(options);
    this.#relayed = relayedCounter(options.registry ?? processRegistry);
  }

  /** Starts following (in the background). */
  start(): void {
    this.#done = this.#run().catch((err) => {
      if (!this.#stop.signal.aborted) this.#log.error("report relay failed", { err });
    });
  }

  /** Stops following; reports still gathering are written first (while leading). */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#done;
    await this.#flush(Number.MAX_SAFE_INTEGER);
  }

  async #run(): Promise<void> {
    const signal = this.#stop.signal;
    const blockMs = this.#o.blockMs ?? 500;
    const leading = () => this.#o.isLeader?.() ?? true;
    let after: string | undefined;
    let failures = 0;
    for (let n = 0; !signal.aborted && n < Number.MAX_SAFE_INTEGER; n++) {
      if (!leading()) {
        after = undefined; // a new leader starts at the tail again
        await sleep(blockMs, signal).catch(() => {});
        continue;
      }
      try {
        after ??= await reportsTail(this.#o.redis, this.#o.prefix);
        const due = this.#agg.nextDueMs();
        const wait = due === undefined ? blockMs : Math.max(1, Math.min(blockMs, due - Date.now()));
        const entries = await readReports(this.#o.redis, after, {
          count: 256,
          blockMs: wait,
          ...(this.#o.prefix ? { prefix: this.#o.prefix } : {}),
        });
        failures = 0;
        const now = Date.now();
        for (const { id, report } of entries) {
          after = id;
          if (!report || !this.#agg.add(report, now)) this.#relayed.inc({ result: "unreadable" });
        }
        await this.#flush(Date.now());
      } catch (err) {
        if (signal.aborted) return;
        if (failures++ === 0) this.#log.warn("cannot read the reports stream", { err });
        await sleep(Math.min(blockMs * failures, 5_000), signal).catch(() => {});
      }
    }
  }

  async #flush(nowMs: number): Promise<void> {
    const { events, dropped } = this.#agg.due(nowMs);
    if (dropped > 0) {
      this.#relayed.inc({ result: "rate_limited" }, dropped);
      this.#log.warn("report Events rate-limited", { dropped });
    }
    if (!(this.#o.isLeader?.() ?? true)) return;
    for (const e of events) {
      const object = `${e.regarding.namespace ?? ""}/${e.regarding.name}`;
      try {
        await this.#o.writer.emitEvent(e);
        this.#relayed.inc({ result: "written" });
        this.#log.info("report Event", { object, reason: e.reason, note: e.note });
      } catch (err) {
        this.#relayed.inc({ result: "failed" });
        this.#log.warn("cannot write report Event", { object, reason: e.reason, err });
      }
    }
  }
}
