/**
 * Holdfast's BPF layer: libbpf through Deno FFI (objects, programs, maps, XDP/tc attach in any
 * network namespace, pinning, batch ops, ring buffers, BPF_PROG_TEST_RUN) and the datapath the
 * agent drives.
 *
 * @example
 * ```ts ignore
 * import { Datapath } from "./mod.ts";
 * using dp = await Datapath.open();               // maps pinned in /sys/fs/bpf/holdfast, reused
 * dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 0 });
 * dp.attach("eth0");                              // XDP, native mode, atomic replace
 * const sub = dp.subscribe((ev) => console.log(ev.key, ev.backendAddr)); // new flows
 * dp.installFlows([{ key, backendAddr: "10.2.0.2" }]); // learned from peers, keeps local ones
 * const seen = dp.lookupFlow(key)?.lastSeenNs;    // activity, CLOCK_MONOTONIC ns
 * await sub.close();
 * ```
 *
 * @module
 */

export { BpfError, ERRNO, strerror } from "./errors.ts";
export {
  BPF_F_INNER_MAP,
  BpfMap,
  type CreateMapSpec,
  MAP_TYPE,
  type MapInfo,
  numPossibleCpus,
  UPDATE,
} from "./map.ts";
export { BpfObject, BpfProgram, type OpenObjectOptions } from "./object.ts";
export {
  attachTc,
  attachXdp,
  type TcAttachment,
  type TcDirection,
  type XdpAttachment,
  type XdpMode,
  xdpProgramId,
} from "./attach.ts";
export { ifIndex, inNetns } from "./netns.ts";
export { type RingBufferOptions, RingBufferReader } from "./ringbuf.ts";
export { TC_ACT, testRun, type TestRunOptions, type TestRunResult, XDP } from "./test_run.ts";
export { libbpfPath, monotonicNs } from "./_ffi.ts";
export {
  Datapath,
  type DatapathOptions,
  DecapDatapath,
  type DecapOptions,
  DEFAULT_OBJECT_DIR,
  DEFAULT_PIN_DIR,
  ensureBpffs,
} from "./datapath.ts";
export { BpfLBMaps, type LBMapsHandles } from "./lbmaps_bpf.ts";
export { type DatapathCounters, exportDatapathMetrics } from "./metrics.ts";
export * from "./structs.ts";
