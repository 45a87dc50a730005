/**
 * LB nodes' reports (`controller/model/reports.ts`) as Kubernetes Events, aggregated: the same
 * (object, reason, message without the node) from several nodes within a window becomes one
 * Event naming the nodes (`backend 10.1.0.3:8080 unhealthy on lb-node-1, lb-node-2: 3 failed
 * probes (connect refused)`), and each object gets at most a bounded number of Events a minute
 * (the rest are counted as dropped; the agents' log lines and metrics still have them).
 *
 * Pure: the relay (`reports.ts`) feeds it reports and the clock and writes what is due.
 *
 * @module
 */

import type { Report } from "../model/reports.ts";
import type { EventInput, ObjectTarget } from "./status.ts";

/** Event reasons of LB node reports. */
export const BACKEND_UNHEALTHY = "BackendUnhealthy";
export const BACKEND_HEALTHY = "BackendHealthy";
export const POLICY_REJECTED = "PolicyRejected";

/** Nodes named in a note before the rest are only counted. */
const NODES_NAMED = 5;
/** The rate limit's period. */
const RATE_PERIOD_MS = 60_000;

/** Options of {@linkcode ReportAggregator}. */
export interface ReportAggregatorOptions {
  /** How long reports of one kind are gathered before their Event is written (default 2,000). */
  windowMs?: number;
  /** Events per object per minute at most (default 10). */
  perObjectPerMinute?: number;
  /** The policy ConfigMap (policy rejections are dropped without one). */
  policyConfigMap?: { namespace: string; name: string };
}

interface Group {
  target: ObjectTarget;
  type: "Normal" | "Warning";
  reason: string;
  action: string;
  note: (nodes: string) => string;
  nodes: string[];
  dueMs: number;
}

/** What {@linkcode ReportAggregator.due} hands out. */
export interface DueEvents {
  readonly events: EventInput[];
  /** Events left out by the per-object rate limit. */
  readonly dropped: number;
}

/** `["a", "b"]` → `a, b`; past {@linkcode NODES_NAMED} nodes: `7 LB nodes (a, b, c, d, e, …)`. */
export function nodeList(nodes: readonly string[]): string {
  if (nodes.length <= NODES_NAMED) return nodes.join(", ");
  return `${nodes.length} LB nodes (${nodes.slice(0, NODES_NAMED).join(", ")}, …)`;
}

/** The Service of a model service name `namespace/name`. */
function serviceTarget(service: string): ObjectTarget {
  const slash = service.indexOf("/");
  return slash < 0
    ? { kind: "Service", namespace: "default", name: service }
    : { kind: "Service", namespace: service.slice(0, slash), name: service.slice(slash + 1) };
}

/** Gathers reports into Events; see the module doc. */
export class ReportAggregator {
  readonly #windowMs: number;
  readonly #perMinute: number;
  readonly #policy: ReportAggregatorOptions["policyConfigMap"];
  readonly #groups = new Map<string, Group>();
  /** Per object: when its recent Events were written. */
  readonly #sent = new Map<string, number[]>();

  constructor(options: ReportAggregatorOptions = {}) {
    this.#windowMs = options.windowMs ?? 2_000;
    this.#perMinute = options.perObjectPerMinute ?? 10;
    this.#policy = options.policyConfigMap;
  }

  /** Reports waiting for their window to close. */
  get pending(): number {
    return this.#groups.size;
  }

  /** When the next group is due (undefined: none waits). */
  nextDueMs(): number | undefined {
    let next: number | undefined;
    for (const g of this.#groups.values()) if (next === undefined || g.dueMs < next) next = g.dueMs;
    return next;
  }

  /** Adds one report at `nowMs`; false when it has no object to go on (no policy ConfigMap). */
  add(report: Report, nowMs: number): boolean {
    const g = this.#group(report, nowMs);
    if (!g) return false;
    const key = `${objectKey(g.target)}|${g.reason}|${g.note("{nodes}")}`;
    const open = this.#groups.get(key);
    if (!open) this.#groups.set(key, g);
    else if (!open.nodes.includes(report.node)) open.nodes.push(report.node);
    return true;
  }

  /** The Events whose window closed by `nowMs`, oldest first, within each object's rate. */
  due(nowMs: number): DueEvents {
    const events: EventInput[] = [];
    let dropped = 0;
    for (const [key, g] of this.#groups) {
      if (g.dueMs > nowMs) continue;
      this.#groups.delete(key);
      const obj = objectKey(g.target);
      const recent = (this.#sent.get(obj) ?? []).filter((t) => t > nowMs - RATE_PERIOD_MS);
      if (recent.length >= this.#perMinute) {
        dropped++;
        this.#sent.set(obj, recent);
        continue;
      }
      recent.push(nowMs);
      this.#sent.set(obj, recent);
      events.push({
        regarding: g.target,
        type: g.type,
        reason: g.reason,
        note: g.note(nodeList(g.nodes)),
        action: g.action,
      });
    }
    for (const [obj, times] of this.#sent) {
      if (times.every((t) => t <= nowMs - RATE_PERIOD_MS)) this.#sent.delete(obj);
    }
    return { events, dropped };
  }

  #group(r: Report, nowMs: number): Group | undefined {
    const base = { nodes: [r.node], dueMs: nowMs + this.#windowMs };
    if (r.kind === "health") {
      const down = r.state === "unhealthy";
      return {
        ...base,
        target: serviceTarget(r.service),
        type: down ? "Warning" : "Normal",
        reason: down ? BACKEND_UNHEALTHY : BACKEND_HEALTHY,
        action: down ? "Quarantine" : "Restore",
        note: (nodes) => `backend ${r.backend} ${r.state} on ${nodes}: ${r.reason}`,
      };
    }
    if (!this.#policy) return undefined;
    return {
      ...base,
      target: { kind: "ConfigMap", ...this.#policy },
      type: "Warning",
      reason: POLICY_REJECTED,
      action: "Swap",
      note: (nodes) =>
        `Policy module sha256 ${r.sha256.slice(0, 16)} rejected on ${nodes} (${r.reason}); ` +
        `the module serving there stays`,
    };
  }
}

function objectKey(t: ObjectTarget): string {
  return `${t.kind}/${t.namespace ?? ""}/${t.name}`;
}
