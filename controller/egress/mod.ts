/**
 * The egress NAT's shared parts (docs/egress.md): what both the Kubernetes controller
 * (`controller/k8s/egress.ts`) and the NAT pods' agents (`node/egress/`) — and the node agents
 * that steer client pods (`node/egress_steer/`) — read and write. No process of its own.
 *
 * - `config.ts` the NAT config document and its checks; `bgp_config.ts` its `bgp` section;
 * - `redis_config.ts` that config published in Redis by the controller, followed by NAT pods;
 * - `clients.ts` the client pods an EgressNAT's selectors pick;
 * - `lease.ts` the Redis lease of a floating address with its fencing epoch;
 * - `owners.ts` who owns each floating address, published for the steering node agents.
 *
 * @module
 */
export {
  type EgressBgp,
  type EgressBgpProblem,
  egressBirdSettings,
  parseEgressBgp,
} from "./bgp_config.ts";
export { decodeEgressClients, type EgressClient, encodeEgressClients } from "./clients.ts";
export {
  type EgressConfig,
  EgressConfigError,
  type EgressPeer,
  type EgressSource,
  type FloatingAddress,
  parseEgressConfig,
  readEgressConfig,
  selfPeer,
} from "./config.ts";
export {
  type AcquireResult,
  LEASE_SCRIPTS,
  LEASE_VERSION,
  type LeaseState,
  type LeaseStore,
  MemoryLeaseStore,
  RedisLeaseStore,
  type RenewResult,
} from "./lease.ts";
export {
  decodeOwnerChange,
  decodeOwnerRecord,
  loadOwnerScript,
  type OwnerChange,
  type OwnerRecord,
  OWNERS_SCRIPTS,
  OWNERS_VERSION,
  ownersKeys,
  publishOwnerChange,
  readOwnersSnapshot,
} from "./owners.ts";
export {
  deleteEgressConfig,
  EGRESS_CONFIG_VERSION,
  egressConfigKey,
  egressConfigRev,
  publishEgressConfig,
  publishEgressConfigArgs,
  readStoredEgressConfig,
  type StoredEgressConfig,
} from "./redis_config.ts";
