/**
 * Pod-aware anycast: the node agent of anycast mode (`main.ts anycast`, entry `main.ts` here;
 * DaemonSet k8s/anycast.yaml; docs/anycast.md). It holds each anycast service's LB address on
 * `lo` while a ready local pod serves it (bird, through `node/bgp/`, announces what is on `lo`)
 * and, with `--redirect`, hands a flow ECMP moved here to the node that owns it.
 *
 * The surface other folders use: the service and pod shapes (`model.ts`, the labs build them),
 * the state file's watcher (`watch_file.ts`, also the node agent's pods file), the BGP settings
 * read from Kubernetes (`kube_source.ts`) and the owners' liveness in Redis (`liveness.ts`).
 *
 * @module
 */
export { AnycastAgent, type AnycastAgentOptions } from "./agent.ts";
export { kubeBgpSettings } from "./kube_source.ts";
export {
  DEFAULT_LIVENESS,
  type LivenessStore,
  OwnerLiveness,
  type OwnerLivenessOptions,
  RedisLivenessStore,
} from "./liveness.ts";
export { type AnycastService, desiredAddresses, type Holding, type LocalPod } from "./model.ts";
export { type AnycastState, AnycastStateError, parseAnycastState } from "./state_file.ts";
export { watchFile, type WatchFileOptions } from "./watch_file.ts";
