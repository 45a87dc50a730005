/**
 * Reading the flow streams of several LB IPs (`RedisFlowStore.read`): one blocking XREAD over every
 * stream of one Redis, one non-blocking XREAD per stream to a Redis Cluster (one XREAD cannot span
 * slots); a bucketed LB IP's streams (`buckets.ts`) read together, its position advanced bucket by
 * bucket.
 *
 * @module
 */

import { decodeStreamFlows, FLOW_RECORDS_VERSION } from "./schema.ts";
import type { FlowChange, StoredFlow } from "./store.ts";
import type { RedisConnection } from "../../../lib/redis_connection.ts";
import { log } from "../../../lib/log.ts";
import { joinPositions, splitPositions } from "./buckets.ts";

/**
 * To a Redis Cluster, an agent following several LB IPs polls their streams this often (ms) when
 * they had nothing new (one XREAD cannot span slots; see {@linkcode readStreams}).
 */
export const CLUSTER_POLL_MS = 20;

/** Stream items this version could not read (a later version's forms), for the rate of warnings. */
let unreadable = 0;

function parseStreamFlows(vip: string, id: string, op: string, raw: string): StoredFlow[] {
  // An op this version does not know (a later version's) carries nothing it can apply.
  const known = op === "add" || op === "del";
  const { flows, skipped } = known ? decodeStreamFlows(op, raw) : { flows: [], skipped: 1 };
  if (skipped > 0 && unreadable++ % 1000 === 0) {
    log.warn("stream entry items skipped: not a form this version reads", {
      vip,
      id,
      op,
      skipped,
      version: FLOW_RECORDS_VERSION,
      total: unreadable,
    });
  }
  return flows;
}

/** Where an LB IP's streams are: its bucket tags and each tag's stream key. */
export type StreamLayout = (vip: string) => {
  tags: readonly string[];
  events: (tag: string) => string;
};

/** Changes after `positions` (LB IP → stream position), as `FlowStore.read`. */
export async function readStreams(
  redis: RedisConnection,
  positions: ReadonlyMap<string, string>,
  options: { blockMs: number; count: number },
  layout: StreamLayout,
): Promise<FlowChange[]> {
  if (positions.size === 0) {
    await new Promise((r) => setTimeout(r, options.blockMs));
    return [];
  }
  // Stream key → its LB IP and bucket; each bucketed LB IP's per-bucket positions.
  const byKey = new Map<string, { vip: string; bucket: number }>();
  const bucketIds = new Map<string, string[]>();
  const keys: string[] = [];
  const ids: string[] = [];
  for (const [vip, position] of positions) {
    const { tags, events } = layout(vip);
    const split = splitPositions(position, tags.length);
    if (tags.length > 1) bucketIds.set(vip, split);
    tags.forEach((tag, bucket) => {
      const k = events(tag);
      byKey.set(k, { vip, bucket });
      keys.push(k);
      ids.push(split[bucket]!);
    });
  }
  type Reply = [string, [string, string[]][]][] | null;
  let replies: Reply[];
  if (redis.cluster && keys.length > 1) {
    // A cluster refuses one XREAD over several slots, and a blocking read holds its node's
    // connection: one non-blocking XREAD per LB IP (node-redis pipelines those going to the
    // same master), then a short pause when none had news.
    replies = await Promise.all(
      keys.map((k, i) =>
        redis.command(["XREAD", "COUNT", String(options.count), "STREAMS", k, ids[i]!])
      ),
    ) as Reply[];
    if (replies.every((r) => r === null || r.length === 0)) {
      await new Promise((r) => setTimeout(r, Math.min(options.blockMs, CLUSTER_POLL_MS)));
    }
  } else {
    replies = [
      await redis.blocking([
        "XREAD",
        "COUNT",
        String(options.count),
        "BLOCK",
        String(options.blockMs),
        "STREAMS",
        ...keys,
        ...ids,
      ]) as Reply,
    ];
  }
  const out: FlowChange[] = [];
  for (const [key, entries] of replies.flatMap((r) => r ?? [])) {
    const { vip, bucket } = byKey.get(key)!;
    const cursor = bucketIds.get(vip);
    for (const [entryId, kv] of entries) {
      // A bucketed LB IP's change carries its position with this bucket advanced (cumulative
      // over the read, so the last change applied holds every bucket's position).
      let id = entryId;
      if (cursor) {
        cursor[bucket] = entryId;
        id = joinPositions(cursor);
      }
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < kv.length; i += 2) f[kv[i]!] = kv[i + 1]!;
      const op = f.op === "del" ? "del" : "add";
      const raw = f.flows ?? "", rawOp = f.op ?? "";
      let flows: StoredFlow[] | null = null;
      out.push({
        vip,
        id,
        node: f.node ?? "",
        op,
        ...(f.reason ? { reason: f.reason } : {}),
        // Parsed on first use: an agent skips its own additions without parsing them.
        get flows(): StoredFlow[] {
          return flows ??= parseStreamFlows(vip, id, rawOp, raw);
        },
      });
    }
  }
  return out;
}
