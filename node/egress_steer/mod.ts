/**
 * Client steering for the node agent (`main.ts node --egress-steer`): {@linkcode startEgressSteer}
 * loads the programs, reads every EgressNAT's config and owners from Redis, steers this node's
 * selected client pods and follows the owner changes. docs/egress.md "Steering client pods".
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import type { Registry } from "../../lib/metrics.ts";
import { RedisConnection, type RedisStoreOptions } from "../../lib/redis_connection.ts";
import { EgressSteer } from "./steer.ts";
import { SteerSource } from "./source.ts";

export { EgressSteer } from "./steer.ts";
export { SteerSource } from "./source.ts";
export { STEER_PORT, SteerDatapath } from "./datapath.ts";

/** Options of {@linkcode startEgressSteer}. */
export interface StartSteerOptions {
  readonly nodeName: string;
  readonly redis: RedisStoreOptions;
  /** Detach the programs at stop (default: leave them). */
  readonly cleanup: boolean;
  readonly netns?: string;
  readonly objectDir?: string;
  readonly log: Logger;
  readonly registry: Registry;
}

/** Starts steering (first state applied before it resolves); returns its stop function. */
export async function startEgressSteer(o: StartSteerOptions): Promise<() => Promise<void>> {
  const log = o.log.with({ component: "egress-steer" });
  const steer = new EgressSteer({
    nodeName: o.nodeName,
    log,
    registry: o.registry,
    ...(o.netns ? { netns: o.netns } : {}),
    ...(o.objectDir ? { objectDir: o.objectDir } : {}),
  });
  const redis = new RedisConnection({ ...o.redis, logComponent: "egress-steer-redis" });
  if (redis.cluster) {
    await redis.close();
    await steer.stop(true);
    throw new Error(
      "Cannot steer egress clients through a Redis Cluster (one XREAD spans every EgressNAT's " +
        "owner stream): not supported yet; give --redis one Redis endpoint",
    );
  }
  const source = new SteerSource({ redis, sink: steer, log });
  try {
    await source.start();
    await steer.settled();
  } catch (err) {
    await source.stop();
    await redis.close();
    await steer.stop(true);
    throw err;
  }
  log.info("egress steering started", { clients: steer.steered().size });
  return async () => {
    await source.stop();
    await redis.close();
    await steer.stop(o.cleanup);
  };
}
