/**
 * The flow agent's trust boundary: a flow read from the store (a peer's addition, a restore) is
 * installed only if its backend serves its frontend in this node's services config. Anyone who
 * can write to Redis could otherwise send an LB IP's traffic to any address. Refused flows are
 * counted (`holdfast_flows_rejected_total{vip,reason}`) and logged, a bounded number per window.
 *
 * @module
 */

import {
  type AnyFlowKey,
  describeFlow,
  type FlowBackend,
  formatFlowAddress,
} from "../../bpf/flow.ts";
import type { Logger } from "../../../lib/log.ts";
import type { AgentMetrics } from "./_metrics.ts";
import {
  backendsLeaving,
  formatFrontend,
  type ServicesView,
  ServingBackends,
} from "./frontends.ts";

const LOG_WINDOW_MS = 10_000;
const LOGS_PER_WINDOW = 100;

const MESSAGES = {
  unknown_frontend: "flow rejected: frontend unknown",
  backend_not_serving: "flow rejected: backend not serving this frontend",
} as const;

/** Admits flows whose backend serves their frontend. */
export class FlowGate {
  #serving: ServingBackends;
  readonly #log: Logger;
  readonly #m: AgentMetrics;
  #windowStart = -Infinity;
  #logged = 0;
  #suppressed = 0;

  constructor(view: ServicesView | null, log: Logger, metrics: AgentMetrics) {
    this.#serving = new ServingBackends(view);
    this.#log = log;
    this.#m = metrics;
  }

  /**
   * Replaces the services config flows are checked against. Returns the backends that served
   * some frontend before and no longer serve it now (empty when nothing left, e.g. only adds).
   */
  set(view: ServicesView | null): Set<FlowBackend> {
    const before = this.#serving;
    this.#serving = new ServingBackends(view);
    return backendsLeaving(before, this.#serving);
  }

  /**
   * False when the flow's frontend is configured and `backend` no longer serves it (a backend that
   * left its service); unknown frontends are not judged here. Neither counts nor logs.
   */
  stillServes(key: AnyFlowKey, backend: FlowBackend): boolean {
    return this.#serving.check(key, backend) !== "backend_not_serving";
  }

  /** True if the flow may be installed; else counts and logs it (`vip` dotted, for labels). */
  admit(vip: string, key: AnyFlowKey, backend: FlowBackend, from: string): boolean {
    const reason = this.#serving.check(key, backend);
    if (reason === null) return true;
    this.#m.rejected.inc({ vip, reason });
    const now = performance.now();
    if (now - this.#windowStart >= LOG_WINDOW_MS) {
      this.#windowStart = now;
      this.#logged = 0;
    }
    if (this.#logged >= LOGS_PER_WINDOW) {
      this.#suppressed++;
      return false;
    }
    this.#logged++;
    this.#log.warn(MESSAGES[reason], {
      vip,
      flow: describeFlow(key),
      backend: formatFlowAddress(backend),
      frontend: formatFrontend({ vip: key.daddr, port: key.dport, proto: key.proto }),
      from,
      ...(this.#suppressed > 0 ? { suppressed_before: this.#suppressed } : {}),
    });
    this.#suppressed = 0;
    return false;
  }
}
