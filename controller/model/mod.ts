/**
 * The LB model in Redis: the controller publishes one entry per service; agents follow it as
 * the Writer source `redis` (`node/lb/sources/redis_source.ts`). Keys, value format and
 * versioning: `schema.ts` and docs/contracts.md ("Model in Redis").
 *
 * The controller's side:
 * ```ts ignore
 * import { connectModelStore, startModelPublisher } from "./mod.ts";
 * const store = connectModelStore({ url: "redis://127.0.0.1:6379", password });
 * // cp: the controller's control plane, fed by K8sSource (its initializer registered)
 * const pub = startModelPublisher(cp, store, { logger, canWrite: () => leader.isLeader() });
 * await pub.synced(); // first full sync written
 * await pub.stop();
 * await store.close();
 * ```
 *
 * @module
 */
export { deriveAll, deriveEntry } from "./_derive.ts";
export {
  ModelPublisher,
  type ModelPublisherOptions,
  type PublishResult,
  type RunningModelPublisher,
  startModelPublisher,
  type StartModelPublisherOptions,
} from "./publisher.ts";
export { connectModelStore, RedisModelStore, type RedisStoreOptions } from "./redis_store.ts";
export {
  encodeEntry,
  type ModelEntry,
  type ModelKeys,
  modelKeys,
  type ModelPolicy,
  sha256Hex,
  STREAM_MAXLEN,
} from "./schema.ts";
export * from "./store.ts";
export { encodeSettings, type ModelSettings, parseSettings, selectsNode } from "./settings.ts";
