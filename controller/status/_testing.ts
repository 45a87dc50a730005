/**
 * Test helpers of the status: an in-memory {@linkcode StatusStore} and `/metrics` text of the
 * nodes, as the LB, anycast and egress agents expose it.
 *
 * @module
 */

import { encodeEntry, type ModelEntry } from "../model/schema.ts";
import type { EgressLeaseRow, StatusStore, StoredState } from "./model.ts";
import { exportBuildInfo, Registry } from "../../lib/metrics.ts";

/** A {@linkcode StatusStore} over a state the test changes; `down` makes reads fail. */
export class MemoryStatusStore implements StatusStore {
  state: StoredState;
  down = false;

  constructor(state: Partial<StoredState> = {}) {
    this.state = {
      model: { epoch: "e1", rev: 1, entries: new Map(), policySha: "" },
      flows: [],
      egress: [],
      reports: [],
      ...state,
    };
  }

  /** Sets the model's entries. */
  setEntries(entries: readonly ModelEntry[], policySha = this.state.model.policySha): void {
    const m = new Map(entries.map((e) => [e.service.name, encodeEntry(e)]));
    this.state = {
      ...this.state,
      model: { ...this.state.model, rev: this.state.model.rev + 1, entries: m, policySha },
    };
  }

  /** Sets the egress rows. */
  setEgress(rows: readonly EgressLeaseRow[]): void {
    this.state = { ...this.state, egress: rows };
  }

  read(): Promise<StoredState> {
    return this.down
      ? Promise.reject(new Error("connection refused"))
      : Promise.resolve(this.state);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** What a node's /metrics says, as the agents write it. */
export interface NodeMetrics {
  role: string;
  node: string;
  lbIps?: Record<string, 0 | 1>;
  policy?: string;
  /** `service|backend` → state (`active`, `quarantined`, `new`). */
  health?: Record<string, string>;
  anycast?: Record<string, 0 | 1>;
  /** `holdfast_build_info`'s labels, as serveOps sets them. */
  build?: { version: string; commit: string };
}

/** The exposition text of `m`, through the real registry. */
export function nodeMetricsText(m: NodeMetrics): string {
  const r = new Registry();
  r.gauge("holdfast_node_info", "", { labelNames: ["role", "node"] }).set(
    { role: m.role, node: m.node },
    1,
  );
  if (m.build) exportBuildInfo(m.build, r);
  const ips = r.gauge("holdfast_agent_lb_ip", "", { labelNames: ["address"] });
  for (const [address, v] of Object.entries(m.lbIps ?? {})) ips.set({ address }, v);
  if (m.policy) {
    r.gauge("holdfast_policy_module", "", { labelNames: ["digest"] }).set({ digest: m.policy }, 1);
  }
  const h = r.gauge("holdfast_backend_health", "", { labelNames: ["service", "backend", "state"] });
  for (const [key, state] of Object.entries(m.health ?? {})) {
    const [service, backend] = key.split("|") as [string, string];
    for (const s of ["new", "active", "quarantined"]) {
      h.set({ service, backend, state: s }, +(s === state));
    }
  }
  const any = r.gauge("holdfast_anycast_address", "", { labelNames: ["address"] });
  for (const [address, v] of Object.entries(m.anycast ?? {})) any.set({ address }, v);
  return r.expose();
}
