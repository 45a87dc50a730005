/**
 * The flow agent's restore job: installs every stored flow of some LB IPs into the flow map
 * (through the trust gate), reconciles map entries the store lacks, and publishes local flows to
 * the store. Restores (start, recovery, an LB IP added) run one at a time, in order, together
 * with changes of the followed set.
 *
 * @module
 */

import { type AnyFlowEntry, describeFlow, FLOW_F_PEER } from "../../bpf/flow.ts";
import type { AgentContext } from "./_context.ts";
import type { VipAddress } from "./_followed.ts";
import { flowField, flowId, parseFlowField } from "./field.ts";
import { isException } from "./exceptions.ts";

/** Restores and publishes flows; serializes what must not interleave with a restore. */
export class Restorer {
  readonly #ctx: AgentContext;
  #lock: Promise<unknown> = Promise.resolve();

  constructor(ctx: AgentContext) {
    this.#ctx = ctx;
  }

  /** Runs `fn` after every earlier `exclusive` call has settled. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(fn, fn);
    this.#lock = run.catch(() => {});
    return run;
  }

  /**
   * Installs every stored flow of `vips` (default all followed) whose backend serves its
   * frontend, and sets the stream positions to the tails read before scanning. Map entries the
   * store lacks: learned here → written; installed from a peer → removed (expired or purged
   * meanwhile) — unless the store has nothing for that LB IP (it lost its data): then all are
   * written back.
   */
  async restore(
    vips: ReadonlyMap<VipAddress, string> = this.#ctx.followed.snapshot(),
  ): Promise<void> {
    const { table, store, metrics, log, gate, picker } = this.#ctx;
    const exceptionsOnly = this.#ctx.sharing === "exceptions";
    const t0 = performance.now();
    // Entries already in the map (pinned across an agent restart), by identity; those the store
    // also has are struck off while scanning, what remains is unknown to the store.
    const local = new Map<string, AnyFlowEntry>();
    for (const e of table.entries()) {
      if (vips.has(e.key.daddr)) local.set(flowId(e.key), e);
    }
    for (const [addr, vip] of vips) {
      const tail = await store.streamTail(vip);
      let installed = 0;
      let stored = 0;
      let rejected = 0;
      let notExceptions = 0;
      for await (const page of store.scan(vip)) {
        const entries: AnyFlowEntry[] = [];
        for (const f of page) {
          const key = parseFlowField(f.field, addr);
          stored++;
          let lastSeenNs = 0;
          let held = false;
          if (local.size > 0) {
            const id = flowId(key);
            const cur = local.get(id);
            if (cur) {
              local.delete(id);
              if (cur.value.backend === f.backend) continue;
              lastSeenNs = cur.value.lastSeenNs;
              held = true;
            }
          }
          // Exceptions-only sharing: a flow the current table places alike needs no entry (unless
          // the map holds it with another backend: then the stored one replaces it, as in `all`).
          if (exceptionsOnly && !held && !isException(picker?.pick(key), f.backend)) {
            notExceptions++;
            continue;
          }
          if (!gate.admit(vip, key, f.backend, "restore")) {
            rejected++;
            continue;
          }
          entries.push({ key, value: { backend: f.backend, flags: FLOW_F_PEER, lastSeenNs } });
        }
        if (entries.length > 0) table.putBatch(entries);
        installed += entries.length;
      }
      // Removed meanwhile: not followed (its map entries idle out as unfollowed).
      if (this.#ctx.followed.vipOf(addr) === vip) this.#ctx.positions.set(vip, tail);
      metrics.installed.inc({ vip }, installed);
      if (exceptionsOnly) metrics.exceptionsInstalled.inc({ vip, via: "restore" }, installed);
      const missing = [...local.values()].filter((e) => e.key.daddr === addr);
      const publish = stored === 0
        ? missing
        : missing.filter((e) => (e.value.flags & FLOW_F_PEER) === 0);
      let removed = 0;
      if (stored > 0) {
        for (const e of missing) {
          if ((e.value.flags & FLOW_F_PEER) === 0 || !table.delete(e.key)) continue;
          removed++;
          log.debug("flow removed, no longer stored", { vip, flow: describeFlow(e.key) });
        }
        if (removed > 0) metrics.removed.inc({ vip, reason: "stale" }, removed);
      }
      await this.publish(vip, publish);
      if (publish.length > 0) metrics.rewritten.inc({ vip }, publish.length);
      log.info("flows restored", {
        vip,
        stored,
        installed,
        rejected,
        ...(exceptionsOnly ? { not_exceptions: notExceptions } : {}),
        published: publish.length,
        removed,
        from_stream_id: tail,
      });
    }
    metrics.restoreSeconds.set(undefined, (performance.now() - t0) / 1000);
  }

  /** Writes map entries to the store in batches (not through the queue: may be large). */
  async publish(vip: string, entries: readonly AnyFlowEntry[]): Promise<void> {
    const { batchSize } = this.#ctx;
    for (let i = 0; i < entries.length; i += batchSize) {
      const flows = entries.slice(i, i + batchSize).map((e) => ({
        field: flowField(e.key),
        backend: e.value.backend,
      }));
      await this.#ctx.store.learn(vip, flows, {
        node: this.#ctx.node,
        nowMs: this.#ctx.nowMs(),
        idleTimeoutMs: this.#ctx.idleMs,
      });
    }
  }

  /** Writes every local flow of the followed LB IPs to the store (it lost its data). */
  async reseed(): Promise<void> {
    const byVip = new Map<string, AnyFlowEntry[]>();
    for (const e of this.#ctx.table.entries()) {
      const vip = this.#ctx.followed.vipOf(e.key.daddr);
      if (vip === undefined) continue;
      let list = byVip.get(vip);
      if (!list) byVip.set(vip, list = []);
      list.push(e);
    }
    for (const [vip, list] of byVip) {
      await this.publish(vip, list);
      this.#ctx.metrics.rewritten.inc({ vip }, list.length);
      this.#ctx.log.info("flows rewritten to store", { vip, flows: list.length });
    }
  }
}
