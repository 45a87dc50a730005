/**
 * Shared flow state: the node's flow map mirrored with Redis so that connections survive LB-node
 * and backend changes (docs/architecture.md, "Flow state (Redis)").
 *
 * - {@link FlowSyncAgent} — one per LB node: new flows → Redis, peers' flows → the flow map,
 *   restore before ready, activity refresh and idle expiry, bounded outage queue.
 * - {@link FlowTable} ({@link MemoryFlowTable}, {@link BpfFlowTable}) — the node's flow map.
 * - {@link FlowStore} ({@link MemoryFlowStore}, {@link RedisFlowStore}) — the shared store.
 * - {@link purgeBackendFlows}, {@link purgeRemovedBackends} — a backend went away (e.g. a
 *   services-file reload): its flows are removed everywhere.
 * - {@link followedVips} — the LB IPs to follow: a config's frontends and `--vip` flags
 *   (`FlowSyncAgent.setVips` follows changes live).
 * - `main.ts` — a flow-sync-only agent process and `parseAgentArgs`, which `node/agent.ts`
 *   (the full LB node behind `main.ts agent`) uses for its flow-sync options.
 *
 * @module
 */

export { FlowSyncAgent, type FlowSyncAgentOptions } from "./agent.ts";
export {
  describeFlow,
  FLOW_F_PEER,
  type FlowEntry,
  type FlowEvent,
  type FlowKey,
  type FlowValue,
  type KeyMode,
  makeFlowKey,
  readFlowEvent,
} from "../bpf/flow.ts";
export { flowField, parseFlowField } from "./field.ts";
export { type FlowTable, MemoryFlowTable } from "./table.ts";
export { BpfFlowTable } from "../bpf/flow_table.ts";
export {
  type FlowChange,
  type FlowStore,
  MemoryFlowStore,
  type StoredFlow,
  StoreUnavailableError,
} from "./store.ts";
export { connectRedisStore, RedisFlowStore, type RedisStoreOptions } from "./redis_store.ts";
export { purgeBackendFlows, purgeRemovedBackends, type ServicesView } from "./purge.ts";
export { vipKeys } from "./schema.ts";
export { followedVips, type FrontendsView } from "./config_vips.ts";
export { BoundedQueue } from "./queue.ts";
