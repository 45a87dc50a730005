/**
 * Shared flow state: the node's flow map mirrored with Redis so that connections survive LB-node
 * and backend changes (docs/flows.md).
 *
 * - {@link FlowSyncAgent} — one per LB node: new flows → Redis, peers' flows → the flow map,
 *   restore before ready, activity refresh and idle expiry, bounded outage queue.
 * - {@link FlowTable} ({@link MemoryFlowTable}, {@link DualFlowTable} over {@link BpfFlowTable}
 *   and {@link BpfFlowTable6}) — the node's flow maps, IPv4 and IPv6 flows alike
 *   ({@link AnyFlowKey}: the family is the type of the addresses).
 * - {@link FlowStore} ({@link RedisFlowStore}) — the shared store (unit tests use
 *   `_memory_store.ts` directly).
 * - {@link ServingBackends} — which backends serve which frontend: flows from the store whose
 *   backend does not serve their frontend are not installed (`FlowSyncAgent.setServices`).
 * - {@link purgeBackendFlows}, {@link purgeRemovedBackends} — a backend went away from a
 *   frontend (e.g. a services-file reload): that frontend's flows to it are removed everywhere.
 * - {@link followedVips} — the LB IPs to follow: a config's frontends and `--vip` flags
 *   (`FlowSyncAgent.setVips` follows changes live).
 *
 * @module
 */

export { type FlowAgentState, FlowSyncAgent, type FlowSyncAgentOptions } from "./sync_agent.ts";
export {
  type AnyFlowEntry,
  type AnyFlowEvent,
  type AnyFlowKey,
  type AnyFlowValue,
  describeFlow,
  FLOW_F_PEER,
  type FlowBackend,
  type FlowEntry,
  type FlowEvent,
  type FlowKey,
  type FlowKey6,
  type FlowValue,
  formatFlowAddress,
  isFlowKey6,
  type KeyMode,
  makeFlowKey,
  readFlowEvent,
} from "../../bpf/flow.ts";
export { flowAddress, flowField, parseFlowField } from "./field.ts";
export { type FlowTable, MemoryFlowTable } from "./table.ts";
export { BpfFlowTable, BpfFlowTable6, DualFlowTable } from "../../bpf/flow_table.ts";
export * from "./store.ts";
export {
  connectRedisStore,
  type FlowStoreOptions,
  RedisFlowStore,
  type RedisStoreOptions,
} from "./redis_store.ts";
export { purgeBackendFlows, purgeRemovedBackends } from "./purge.ts";
export {
  formatFrontend,
  type Frontend,
  type Rejection,
  type ServicesView,
  ServingBackends,
} from "./frontends.ts";
export { vipKeys } from "./schema.ts";
export { followedVips, type FrontendsView } from "./config_vips.ts";
export { BoundedQueue } from "./queue.ts";
