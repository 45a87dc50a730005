/**
 * The flow agent's activity/expiry job. Every sweep interval it expires idle flows in the store
 * (one node per round; the removals come back on the stream and leave every map). Every report
 * interval it reads the flow map once: pushes last seen of flows active since the previous read to
 * the store, removes local flows that are idle and no longer stored, and idles out entries of LB
 * IPs no longer followed.
 *
 * The report interval is `every` = max(1, floor(idle timeout / 4 / sweep interval)) sweeps, so
 * R = every × sweep interval ≤ max(sweep interval, idle timeout / 4). Reading a large flow map is
 * the costly part of a pass (the kernel walks every bucket of the LRU hash, ~1 ms per 256k
 * buckets, and each entry is decoded), and a steadily active flow need not be written more often.
 *
 * Expiry bound: a packet's last seen reaches the store within D = R + LAST_SEEN_LAG_NS (+ the read
 * and write of that pass). The store expires a flow only when its learn time and its reported
 * last seen are both older than the idle timeout, so a flow with a packet in
 * [now − idle + 20 ms, now − D] is never expired: a flow whose packets come less than idle − D
 * apart never is. Defaults (idle 300 s, sweep 30 s): every 2 sweeps, D ≈ 60 s, gaps up to 240 s
 * (one sweep per report: 270 s); D < idle always holds since R ≤ max(sweep, idle / 4) and the
 * sweep interval defaults to at most idle / 4.
 *
 * @module
 */

import { type AnyFlowKey, describeFlow, formatFlowAddress } from "../../bpf/flow.ts";
import type { AgentContext } from "./_context.ts";
import type { VipAddress } from "./_followed.ts";
import { flowField } from "./field.ts";

/** How far the datapath's last_seen may trail CLOCK_MONOTONIC (bpf/lb.h: per-tick clock). */
const LAST_SEEN_LAG_NS = 20_000_000;

/** Per-pass cap of flows removed locally per kind (the rest go in later passes). */
const MAX_PER_PASS = 10_000;

/** Sweeps activity and expiry. */
export class Sweeper {
  readonly #ctx: AgentContext;
  readonly #intervalMs: number;
  #timer: ReturnType<typeof setInterval> | undefined;
  #sweeping: Promise<void> | null = null;
  /** CLOCK_MONOTONIC ns at the start of the last map read whose activity reached the store. */
  #lastReadNs = 0;
  /** The flow map is read on every this many timer sweeps (the report interval). */
  readonly #readEvery: number;
  /** Timer sweeps since the last successful map read. */
  #sinceRead = 0;

  constructor(ctx: AgentContext, options: { intervalMs: number }) {
    this.#ctx = ctx;
    this.#intervalMs = options.intervalMs;
    this.#readEvery = Math.max(1, Math.floor(ctx.idleMs / 4 / Math.max(1, options.intervalMs)));
    this.#sinceRead = this.#readEvery; // the first timer sweep reads
  }

  /** Sweeps every interval until {@link stop}; reads the flow map every report interval. */
  start(): void {
    this.#timer ??= setInterval(() => void this.tick(), this.#intervalMs);
  }

  /** Stops the timer and waits for a pass in progress. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#sweeping;
  }

  /** One timer sweep now: the map is read on every report interval's sweep only. */
  tick(): Promise<void> {
    return this.#run(this.#sinceRead + 1 >= this.#readEvery);
  }

  /** One full pass now, map read included (while in sync), or the pass in progress. */
  sweep(): Promise<void> {
    return this.#run(true);
  }

  #run(read: boolean): Promise<void> {
    if (this.#sweeping || !this.#ctx.state.inSync) return this.#sweeping ?? Promise.resolve();
    this.#sweeping = this.#pass(read)
      .catch((err) => this.#ctx.storeFailed(err, "sweep"))
      .finally(() => this.#sweeping = null);
    return this.#sweeping;
  }

  async #pass(read: boolean): Promise<void> {
    const { store, followed, idleMs, node } = this.#ctx;
    await this.#ctx.verifyStore("sweep");
    if (!this.#ctx.state.inSync) return;
    const nowMs = this.#ctx.nowMs();
    // Counted before the read: a failed read is retried on the next sweep.
    this.#sinceRead++;
    const idle = read ? await this.#readMap(nowMs) : new Map<string, AnyFlowKey[]>();
    for (const vip of followed.list()) {
      // One node per round walks the LB IP's flows; the removals come back on the stream.
      await store.expire(vip, nowMs - idleMs, { node, lockMs: this.#intervalMs * 0.9 });
    }
    for (const [vip, keys] of idle) await this.#removeOrphans(vip, keys);
  }

  /**
   * Reads the flow map: reports activity since the previous read to the store, idles out
   * entries of LB IPs no longer followed. Returns the local idle flows per LB IP.
   */
  async #readMap(nowMs: number): Promise<Map<string, AnyFlowKey[]>> {
    const { table, store, followed, idleMs } = this.#ctx;
    const nowNs = table.nowNs();
    const idleNs = idleMs * 1e6;
    // The datapath stamps last_seen from a per-tick cached clock (up to ~2 jiffies behind
    // CLOCK_MONOTONIC), so a packet just after the previous read can carry a stamp just before
    // it: look back a margin. Reporting a flow active twice is harmless; missing it is not.
    const since = this.#lastReadNs - LAST_SEEN_LAG_NS;
    const active = new Map<string, { field: string; lastSeenMs: number }[]>();
    const idle = new Map<string, AnyFlowKey[]>();
    const retiredIdle: AnyFlowKey[] = [];
    const retiredLive = new Set<VipAddress>();
    for (const e of table.entries()) {
      const vip = followed.vipOf(e.key.daddr);
      if (vip === undefined) {
        const retired = followed.retiredSince(e.key.daddr);
        if (retired === undefined) continue;
        // Unfollowed LB IP: local idle-out only (peer-installed entries count from unfollowing).
        if (nowNs - Math.max(retired, e.value.lastSeenNs) > idleNs) {
          if (retiredIdle.length < MAX_PER_PASS) retiredIdle.push(e.key);
        } else retiredLive.add(e.key.daddr);
        continue;
      }
      const seen = e.value.lastSeenNs;
      if (seen <= 0) continue;
      if (seen > since) {
        let list = active.get(vip);
        if (!list) active.set(vip, list = []);
        list.push({ field: flowField(e.key), lastSeenMs: nowMs - (nowNs - seen) / 1e6 });
      } else if (nowNs - seen > idleNs) {
        let list = idle.get(vip);
        if (!list) idle.set(vip, list = []);
        if (list.length < MAX_PER_PASS) list.push(e.key);
      }
    }
    this.#idleOutRetired(retiredIdle);
    followed.pruneRetired(nowNs, idleNs, retiredLive);
    for (const [vip, seen] of active) {
      await store.touch(vip, seen, { idleTimeoutMs: idleMs });
    }
    // Only once reported: a failed write reports the same activity again on the next read.
    this.#lastReadNs = nowNs;
    this.#sinceRead = 0;
    return idle;
  }

  #idleOutRetired(keys: readonly AnyFlowKey[]): void {
    const { table, metrics, log, node } = this.#ctx;
    const byVip = new Map<string, number>();
    for (const key of keys) {
      if (!table.delete(key)) continue;
      const vip = formatFlowAddress(key.daddr);
      byVip.set(vip, (byVip.get(vip) ?? 0) + 1);
      log.debug("flow expired", { vip, flow: describeFlow(key), by: node, followed: false });
    }
    for (const [vip, flows] of byVip) {
      metrics.removed.inc({ vip, reason: "unfollowed" }, flows);
      log.info("flows expired", { vip, flows, by: node, followed: false });
    }
  }

  /** Removes local idle flows of `vip` the store no longer has. */
  async #removeOrphans(vip: string, keys: readonly AnyFlowKey[]): Promise<void> {
    const { table, store, metrics, log, node } = this.#ctx;
    const stored = await store.exists(vip, keys.map(flowField));
    let removed = 0;
    keys.forEach((key, i) => {
      if (stored[i] || !table.delete(key)) return;
      removed++;
      log.debug("flow expired", { vip, flow: describeFlow(key), by: node, stored: false });
    });
    if (removed === 0) return;
    metrics.removed.inc({ vip, reason: "orphan" }, removed);
    log.info("flows expired", { vip, flows: removed, by: node, stored: false });
  }
}
