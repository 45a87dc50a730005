/**
 * IPAM: load-balancer addresses for Services out of AddressPools, as plain logic the
 * controller's reconciler calls (docs/ipam.md). No Kubernetes access here.
 *
 * @module
 */
export {
  AddressAllocator,
  type IpamEvent,
  type IpamResult,
  type ObjectRef,
  type PoolStatus,
  type ServiceAllocation,
} from "./allocator.ts";
export type { AllocationReason } from "./_assign.ts";
export {
  type K8sAddressBlock,
  type K8sAddressPool,
  type Pool,
  type PoolReason,
  readPools,
} from "./pool.ts";
export {
  ADDRESS_ALLOCATED_CONDITION,
  ADDRESS_POOL_ANNOTATION,
  ALLOW_SHARED_IP_ANNOTATION,
  type ClaimOptions,
  DEFAULT_LOAD_BALANCER_CLASS,
  type IpamCondition,
  type IpamService,
  isClaimed,
  LOAD_BALANCER_IPS_ANNOTATION,
} from "./service.ts";
