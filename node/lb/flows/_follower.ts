/**
 * The flow agent's follow job: a blocking read on the followed LB IPs' streams; peers' additions
 * are installed (through the trust gate) with the peer flag, removals deleted. Two nodes learning
 * one flow at once converge on the later stream entry (last writer wins).
 *
 * @module
 */

import { type AnyFlowEntry, describeFlow, FLOW_F_PEER, formatFlowAddress } from "../../bpf/flow.ts";
import { Backoff, sleep } from "../../../lib/backoff.ts";
import { adaptiveWaitMs } from "../../bpf/ringbuf.ts";
import type { AgentContext } from "./_context.ts";
import { flowAddress, flowId, parseFlowField } from "./field.ts";
import type { FlowChange } from "./store.ts";

/**
 * Orders stream entry IDs (`<ms>-<seq>`): negative when `a` is older than `b`. A bucketed LB IP's
 * position (`buckets.ts`: one ID per bucket, joined by `|`) is newer when any bucket's ID is.
 */
export function compareStreamIds(a: string, b: string): number {
  if (a.includes("|") || b.includes("|")) {
    const as = a.split("|"), bs = b.split("|");
    let older = false;
    for (let i = 0; i < Math.max(as.length, bs.length); i++) {
      const d = compareStreamIds(as[i] ?? "0-0", bs[i] ?? "0-0");
      if (d > 0) return 1;
      if (d < 0) older = true;
    }
    return older ? -1 : 0;
  }
  const [am = "0", as = "0"] = a.split("-");
  const [bm = "0", bs = "0"] = b.split("-");
  const d = Number(am) - Number(bm);
  return d !== 0 ? Math.sign(d) : Math.sign(Number(as) - Number(bs));
}

/** Stream entries per read (each a batch of flows). */
const READ_COUNT = 100;

/** Peers' flows per read the adaptive gather aims at (as the learner's ring bursts). */
const GATHER_FLOWS = 100;

/**
 * A read answered sooner than this found entries waiting (a round trip on a busy node takes
 * well under it); a later answer means it blocked until one was written.
 */
const BLOCKED_MS = 5;

/** Follows the stores' streams into the flow map. */
export class Follower {
  readonly #ctx: AgentContext;
  readonly #readBlockMs: number;
  readonly #gatherMs: number;
  readonly #gatherMaxMs: number;
  /** Flows learned here that a peer's addition replaced before ours was seen on the stream. */
  readonly #contested = new Set<string>();

  /**
   * `readBlockMs`: longest blocking read. `gatherMs`: pause after a read that found entries
   * already waiting (unless it was full), so entries of several learning nodes arrive in one
   * read: a round trip costs far more CPU than the flows it carries. A read that blocked until
   * an entry came is not followed by a pause: the next read blocks until the next entry anyway,
   * and a pause would only add a timer wake-up per burst (and its length to how late the flows
   * arrive). `gatherMaxMs`: the pause grows up to this while reads carry fewer than
   * {@link GATHER_FLOWS} peers' flows, and shrinks back to `gatherMs` as the rate rises.
   */
  constructor(
    ctx: AgentContext,
    options: { readBlockMs: number; gatherMs: number; gatherMaxMs?: number },
  ) {
    this.#ctx = ctx;
    this.#readBlockMs = options.readBlockMs;
    this.#gatherMs = options.gatherMs;
    this.#gatherMaxMs = Math.max(options.gatherMs, options.gatherMaxMs ?? options.gatherMs);
  }

  /** Reads and applies stream entries until `signal` aborts; waits out outages. */
  async run(signal: AbortSignal): Promise<void> {
    const { state, store } = this.#ctx;
    const backoff = new Backoff({ minMs: 50, maxMs: 1000 });
    const gather = { minMs: this.#gatherMs, maxMs: this.#gatherMaxMs, records: GATHER_FLOWS };
    let lastRead = performance.now();
    while (!signal.aborted) {
      if (!state.inSync) {
        await state.changed(signal); // recovery restores the positions
        continue;
      }
      try {
        const started = performance.now();
        const changes = await store.read(this.#ctx.positions, {
          blockMs: this.#readBlockMs,
          count: READ_COUNT,
        });
        backoff.reset();
        if (signal.aborted) return;
        let peerFlows = 0;
        for (const c of changes) peerFlows += this.apply(c);
        const now = performance.now();
        const waited = now - lastRead;
        lastRead = now;
        const waiting = now - started < BLOCKED_MS;
        if (waiting && changes.length > 0 && changes.length < READ_COUNT && this.#gatherMs > 0) {
          await sleep(adaptiveWaitMs(peerFlows, waited, gather), signal).catch(() => {});
        }
      } catch (err) {
        if (signal.aborted) return;
        this.#ctx.storeFailed(err, "follow");
        await sleep(backoff.next(), signal).catch(() => {});
      }
    }
  }

  /** Applies one stream entry to the flow map; returns the number of a peer's flows in it. */
  apply(change: FlowChange): number {
    const { positions } = this.#ctx;
    // A read started before the LB IP was unfollowed (or unfollowed and followed again, then
    // restored to a later position) may return entries no longer wanted: skip them.
    const pos = positions.get(change.vip);
    if (pos === undefined || compareStreamIds(change.id, pos) <= 0) return 0;
    positions.set(change.vip, change.id);
    if (change.op === "add") this.#add(change);
    else this.#remove(change);
    // Own additions are not parsed (skipped unless contested): they count for nothing.
    return change.node === this.#ctx.node ? 0 : change.flows.length;
  }

  #add(change: FlowChange): void {
    const { table, metrics, log, gate, node } = this.#ctx;
    // Own additions match the map already, except for a flow a peer learned at the same time
    // ("contested"): then the later stream entry wins on every node (last writer wins).
    if (change.node === node && this.#contested.size === 0) return;
    const addr = flowAddress(change.vip);
    const entries: AnyFlowEntry[] = [];
    for (const f of change.flows) {
      const key = parseFlowField(f.field, addr);
      const id = flowId(key);
      if (change.node === node && !this.#contested.delete(id)) continue;
      const cur = table.get(key);
      if (cur?.backend === f.backend) continue;
      if (!gate.admit(change.vip, key, f.backend, change.node)) continue;
      if (cur && (cur.flags & FLOW_F_PEER) === 0 && change.node !== node) {
        if (this.#contested.size < 100_000) this.#contested.add(id);
      }
      entries.push({
        key,
        value: { backend: f.backend, flags: FLOW_F_PEER, lastSeenNs: cur?.lastSeenNs ?? 0 },
      });
    }
    if (entries.length === 0) return;
    table.putBatch(entries);
    metrics.installed.inc({ vip: change.vip }, entries.length);
    // Exceptions-only sharing: the stream carries exceptions only (and all of them are installed).
    if (this.#ctx.sharing === "exceptions") {
      metrics.exceptionsInstalled.inc({ vip: change.vip, via: "stream" }, entries.length);
    }
    // Routine installs: a summary line now and then (and each at debug); a flow of ours replaced
    // by a peer's later learn is rare and worth its own line.
    const own = change.node === node;
    if (!own) this.#ctx.tally.installed(change.vip, change.node, entries.length);
    if (!own && !log.enabled("debug")) return;
    for (const e of entries) {
      log[own ? "info" : "debug"](
        own ? "flow replaced by later learn" : "flow installed from peer",
        {
          vip: change.vip,
          flow: describeFlow(e.key),
          backend: formatFlowAddress(e.value.backend),
          peer: change.node,
        },
      );
    }
  }

  #remove(change: FlowChange): void {
    const { table, metrics, log } = this.#ctx;
    const addr = flowAddress(change.vip);
    const reason = change.reason ?? "idle";
    let removed = 0;
    const logEach = log.enabled("debug");
    for (const f of change.flows) {
      const key = parseFlowField(f.field, addr);
      if (!table.delete(key)) continue;
      removed++;
      if (!logEach) continue;
      log.debug(reason === "purge" ? "flow purged" : "flow expired", {
        vip: change.vip,
        flow: describeFlow(key),
        by: change.node,
      });
    }
    if (removed === 0) return;
    metrics.removed.inc({ vip: change.vip, reason }, removed);
    // One line per stream entry (a batch), each flow at debug.
    log.info(reason === "purge" ? "flows purged" : "flows expired", {
      vip: change.vip,
      flows: removed,
      by: change.node,
    });
  }
}
