/**
 * The node agent (`main.ts node`, entry `main.ts` here; DaemonSet k8s/node.yaml;
 * docs/backends.md): on every node with backend pods, `bpf/node_tc.c` on the uplink delivers
 * the LB nodes' encapsulated packets to the pod at its own address and target port, and gives
 * its replies the LB IP and port back (DSR). The LB model comes from Redis or a services file,
 * the pods from the Kubernetes API or a pods file; `reconcile.ts` makes the maps match.
 *
 * Other folders run it as a process; this is the surface they and the tests name: the command
 * line, the plan (model × pods → map entries), the pod sources and the map reconciler.
 *
 * @module
 */
export { type NodeArgs, readNodeArgs } from "./args.ts";
export { kubePodSource, localPodOf } from "./kube_pods.ts";
export { type LocalPod, type PlanConflict, planNode, type PodServing } from "./plan.ts";
export { filePodSource, parsePodsFile, PodsFileError, type PodSource } from "./pods.ts";
export { NodeBackends, type NodeMaps, type ReconcileResult } from "./reconcile.ts";
export { nodeUplinks, uplinksHolding } from "./uplink.ts";
