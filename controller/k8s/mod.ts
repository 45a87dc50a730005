/**
 * The Kubernetes controller (`main.ts controller`, entry `main.ts` here; Deployment
 * k8s/controller.yaml; docs/operators.md): informers on Services, EndpointSlices, AddressPools,
 * LoadBalancerConfigs and EgressNATs → one level-triggered pass (IPAM, the claimed Services into
 * `K8sSource` and the LB tables) → status and Events while it holds the Lease, the LB model and
 * the NAT pods' config published to Redis.
 *
 * The surface other folders use: {@linkcode startController} (the wiring without a command line:
 * benches and the kube tests run it in-process), the Lease election, and the object shape the
 * node agents' Kubernetes sources read ({@linkcode KubeObject}).
 *
 * @module
 */
export { keyOf, type KubeObject, type ObjectEvent } from "./objects.ts";
export {
  type LeaderElection,
  type LeaderElectionConfig,
  type LeaseApi,
  startLeaderElection,
} from "./leader.ts";
export { type RunningController, startController, type StartControllerOptions } from "./run.ts";
