/**
 * Turns health verdicts into the LB model and the flow maps. A quarantine writes a
 * `quarantined` instance of the backend under the Writer source `health` (priority 0, so it
 * overrides the file's or Kubernetes' `active`; `select.ts` never selects it) — the reconciler
 * then rebuilds the service's Maglev tables without it. Once the maps carry that, the backend's
 * flows on its frontends are removed from this node's flow map and from the shared store (whose
 * stream removes them on every peer), so its clients reconnect to a live backend at once; flows
 * to other backends stay. A recovery releases the `health` instance: the source's own state
 * (active) selects it again.
 *
 * @module
 */
import { parseAddr } from "../tables/address.ts";
import type { SourceWriter } from "../tables/source_writer.ts";
import type { Writer } from "../tables/writer.ts";
import { log as rootLog, type Logger } from "../../../lib/log.ts";
import type { FlowTable } from "../../bpf/flow_table.ts";
import { purgeBackendFlows } from "../flows/purge.ts";
import { flowAddress } from "../flows/field.ts";
import type { FlowStore } from "../flows/store.ts";
import type { HealthChange } from "./checker.ts";
import type { HealthTarget } from "./targets.ts";

/** The Writer source health verdicts are written under. */
export const HEALTH_SOURCE = "health";

/** Longest wait for the maps to carry a quarantine before flows are purged anyway. */
const APPLY_WAIT_MS = 5_000;

/** Options of a {@link HealthApplier}. */
export interface HealthApplierOptions {
  /** This node's flow map (its flows to a quarantined backend are removed). */
  flows?: FlowTable;
  /**
   * The shared flow store (flow sync on): stored flows of a quarantined backend are purged.
   * Called at the first purge (a connection opened only when a backend is quarantined).
   */
  store?: () => FlowStore;
  /** This node's name, recorded with store purges. */
  node?: string;
  logger?: Logger;
}

/** Writes verdicts through the Writer and purges a quarantined backend's flows. */
export class HealthApplier {
  readonly #src: SourceWriter;
  readonly #reconciler: { waitIdleWithin(timeoutMs: number): Promise<boolean> };
  readonly #o: HealthApplierOptions;
  readonly #log: Logger;

  constructor(
    cp: { writer: Writer; reconciler: { waitIdleWithin(timeoutMs: number): Promise<boolean> } },
    options: HealthApplierOptions = {},
  ) {
    this.#src = cp.writer.source(HEALTH_SOURCE);
    this.#reconciler = cp.reconciler;
    this.#o = options;
    this.#log = (options.logger ?? rootLog).with({ component: "health" });
  }

  /** Applies one verdict change; resolves once the maps carry it (and flows are purged). */
  async apply(change: HealthChange): Promise<void> {
    const t = change.target;
    if (change.verdict === "active") {
      this.release(t);
      return;
    }
    const txn = this.#src.txn();
    try {
      this.#src.upsertBackends(txn, {
        service: t.service,
        backends: [{
          address: t.backend,
          portName: t.portName,
          state: "quarantined",
          ...(t.weight !== undefined ? { weight: t.weight } : {}),
        }],
      });
      txn.commit();
    } finally {
      txn.abort();
    }
    if (!await this.#reconciler.waitIdleWithin(APPLY_WAIT_MS)) {
      this.#log.warn("maps not in step with the quarantine yet; purging anyway", {
        waitedMs: APPLY_WAIT_MS,
      });
    }
    await this.#purge(t);
  }

  /** Withdraws the verdict on `t` (recovered, or no longer in the config). */
  release(t: HealthTarget): void {
    const txn = this.#src.txn();
    try {
      this.#src.releaseBackends(txn, { service: t.service, addresses: [t.backend] });
      txn.commit();
    } finally {
      txn.abort();
    }
  }

  async #purge(t: HealthTarget): Promise<void> {
    // Either family: the flow map holds both (IPv4 and IPv6 frontends), backends as flows carry
    // them (a u32 for IPv4, text for IPv6).
    const backendIp = flowAddress(t.ip);
    const scopes = t.frontends.map((f) => {
      const a = parseAddr(f);
      return { vip: flowAddress(a.ip), port: a.port, proto: a.protocol === "TCP" ? 6 : 17 };
    });
    let local = 0;
    if (this.#o.flows) {
      const gone = [];
      for (const e of this.#o.flows.entries()) {
        if (e.value.backend !== backendIp) continue;
        if (
          scopes.some((s) =>
            s.vip === e.key.daddr && s.port === e.key.dport && s.proto === e.key.proto
          )
        ) {
          gone.push(e.key);
        }
      }
      for (const k of gone) if (this.#o.flows.delete(k)) local++;
    }
    let stored = 0;
    if (this.#o.store) {
      for (const f of t.frontends) {
        stored += await purgeBackendFlows(f, t.ip, {
          store: this.#o.store(),
          ...(this.#o.node ? { node: this.#o.node } : {}),
        }).catch((err) => {
          this.#log.warn("stored flow purge failed", { frontend: f, backend: t.backend, err });
          return 0;
        });
      }
    }
    this.#log.info("quarantined backend's flows purged", {
      service: t.service,
      backend: t.backend,
      ip: t.ip,
      local_flows: local,
      stored_flows: stored,
    });
  }
}
