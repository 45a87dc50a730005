/**
 * The table-change handshake of exceptions-only sharing (node/lb/flows/exceptions.ts): before this
 * node installs a service's next Maglev table (`node/lb/_maglev_mirror.ts` awaits it), it
 *
 * 1. **publishes** its own flows of that service which the next table would send elsewhere —
 *    they become exceptions, announced on the stream so every peer installs them; and
 * 2. **pulls** the service's stored flows (every node's, from the store's hash) which the next
 *    table would send elsewhere, and installs them — so a flow a peer learned under the old table
 *    keeps its backend here even if ECMP moves it before that peer's own publish arrives.
 *
 * Only then is the table installed: a packet of a flow this node does not hold goes through the
 * new table, and every flow the new table would move is held. Flows the pull cannot see — written
 * by a peer after this node's scan and before that peer switched — are covered by that peer's
 * publish (1.), which arrives a stream read later (docs/scale.md "not yet").
 *
 * @module
 */

import { type AnyFlowEntry, FLOW_F_PEER, isFlowKey6 } from "../../bpf/flow.ts";
import { parseIpv4 } from "../../../lib/ipv4.ts";
import type { AgentContext } from "./_context.ts";
import type { TableChange } from "./exceptions.ts";
import { flowField, parseFlowField } from "./field.ts";

const PROTO: Record<string, number> = { TCP: 6, UDP: 17 };

/** Runs the handshake for `changes`; resolves when both steps are done (throws if the store fails). */
export async function tableChanging(
  ctx: AgentContext,
  changes: readonly TableChange[],
): Promise<void> {
  const { table, store, followed, state, log, metrics, gate, node } = ctx;
  for (const c of changes) {
    const vip = c.service.address;
    const addr = parseIpv4(vip);
    if (followed.vipOf(addr) !== vip) continue;
    const port = c.service.port;
    const proto = PROTO[c.service.protocol] ?? -1;
    const service = `${vip}:${port}/${c.service.protocol}`;
    if (!state.inSync) {
      log.warn("table change while out of sync with the flow store: moved flows not exchanged", {
        service,
        version: c.version,
        why: "the recovery restore installs the exceptions of the new table",
      });
      continue;
    }
    const t0 = performance.now();
    // 1. Own flows the next table sends elsewhere: published as exceptions.
    const mine: AnyFlowEntry[] = [];
    const held = new Map<string, AnyFlowEntry>();
    for (const e of table.entries()) {
      const k = e.key;
      if (isFlowKey6(k) || k.daddr !== addr || k.dport !== port || k.proto !== proto) continue;
      if (c.next(k) === e.value.backend) continue;
      held.set(flowField(k), e);
      if ((e.value.flags & FLOW_F_PEER) === 0) mine.push(e);
    }
    const flows = mine.map((e) => ({ field: flowField(e.key), backend: e.value.backend }));
    for (let i = 0; i < flows.length; i += ctx.batchSize) {
      await store.learn(vip, flows.slice(i, i + ctx.batchSize), {
        node,
        nowMs: ctx.nowMs(),
        idleTimeoutMs: ctx.idleMs,
      });
    }
    if (flows.length > 0) {
      metrics.exceptionsPublished.inc({ vip, why: "table_change" }, flows.length);
    }
    // 2. Stored flows the next table sends elsewhere: installed here first.
    let scanned = 0;
    let installed = 0;
    for await (const page of store.scan(vip)) {
      const entries: AnyFlowEntry[] = [];
      for (const f of page) {
        const key = parseFlowField(f.field, addr);
        if (isFlowKey6(key) || key.dport !== port || key.proto !== proto) continue;
        scanned++;
        if (c.next(key) === f.backend) continue;
        if (held.get(f.field)?.value.backend === f.backend) continue;
        if (!gate.admit(vip, key, f.backend, "table-change")) continue;
        const cur = table.get(key);
        // The same backend, or a flow of this node's own (it keeps what its clients use).
        if (cur && (cur.backend === f.backend || (cur.flags & FLOW_F_PEER) === 0)) continue;
        entries.push({
          key,
          value: { backend: f.backend, flags: FLOW_F_PEER, lastSeenNs: cur?.lastSeenNs ?? 0 },
        });
      }
      if (entries.length > 0) table.putBatch(entries);
      installed += entries.length;
    }
    if (installed > 0) metrics.exceptionsInstalled.inc({ vip, via: "table_change" }, installed);
    log.info("table change: flow exceptions exchanged", {
      service,
      version: c.version,
      published: flows.length,
      installed,
      scanned,
      ms: Math.round(performance.now() - t0),
    });
  }
}
