/**
 * The virtual cluster's flow store (lab/cluster.ts): one `redis-server` at 10.9.0.2:6379 in the
 * `ctl` namespace (the default), or with `redisCluster: true` a Redis Cluster there — three
 * masters with a replica each on 10.9.0.2:7000–7005 (lab/redis_cluster.ts) — that agents reach as
 * `redis+cluster://10.9.0.2:7000,…`, optionally with `--flow-buckets` so one LB IP's flows spread
 * over the masters. Reads the store the way the chaos checks need: an LB IP's stored flows over
 * its buckets, whatever master holds each.
 *
 * @module
 */
import type { Topology } from "./netns.ts";
import { type RedisServer, startRedis } from "./redis_server.ts";
import { type RedisCluster, startRedisCluster } from "./redis_cluster.ts";
import { bucketTags } from "../node/lb/flows/buckets.ts";
import { vipKeys } from "../node/lb/flows/schema.ts";

/** Where the cluster's flows live: one server, or a Redis Cluster. */
export class ClusterStore implements AsyncDisposable {
  private constructor(
    readonly server: RedisServer | null,
    readonly cluster: RedisCluster | null,
    /** Hash tags per LB IP the agents use (`--flow-buckets`; 1: one per LB IP). */
    readonly buckets: number,
  ) {}

  /** Starts the store inside `topo`'s `ctl` namespace. */
  static async start(
    topo: Topology,
    options: { redisCluster?: boolean; flowBuckets?: number } = {},
  ): Promise<ClusterStore> {
    const netns = topo.ns("ctl");
    if (!options.redisCluster) {
      if ((options.flowBuckets ?? 1) !== 1) throw new Error("flowBuckets needs redisCluster");
      return new ClusterStore(await startRedis({ netns, bind: "10.9.0.2", port: 6379 }), null, 1);
    }
    const cluster = await startRedisCluster({ netns, bind: "10.9.0.2" });
    return new ClusterStore(null, cluster, options.flowBuckets ?? 1);
  }

  /** The agents' `--redis` URL. */
  get url(): string {
    return this.server?.url ?? this.cluster!.url;
  }

  /** The server holding `vip`'s bucket `b` (its master in a Redis Cluster). */
  async masterOf(vip: string, b = 0): Promise<RedisServer> {
    if (this.server) return this.server;
    return await this.cluster!.masterOf(this.flowsKey(vip, b));
  }

  /** The flows hash of `vip`'s bucket `b`. */
  flowsKey(vip: string, b = 0): string {
    return vipKeys(bucketTags(vip, this.buckets)[b]!).flows;
  }

  /** How many flows of `vip` the store holds, over its buckets. */
  async storedFlows(vip: string): Promise<number> {
    let sum = 0;
    for (let b = 0; b < this.buckets; b++) {
      const m = await this.masterOf(vip, b);
      sum += Number((await m.cli("hlen", this.flowsKey(vip, b))).trim()) || 0;
    }
    return sum;
  }

  /** Of the flow `fields` of `vip`, those the store lacks (one HKEYS per bucket). */
  async missing(vip: string, fields: readonly string[]): Promise<string[]> {
    const stored = new Set<string>();
    for (let b = 0; b < this.buckets; b++) {
      const m = await this.masterOf(vip, b);
      for (const f of (await m.cli("hkeys", this.flowsKey(vip, b))).split("\n")) stored.add(f);
    }
    return fields.filter((f) => !stored.has(f));
  }

  /** Stops every server and removes their directories. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.server?.[Symbol.asyncDispose]();
    await this.cluster?.[Symbol.asyncDispose]();
  }
}
