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
 * const sub = dp.subscribe((ev) => console.log(describeFlow(ev.key), ev.backend)); // new flows
 * const flows = dp.flowTable();                   // the flow map, host-order u32 (flow.ts)
 * flows.put(key, { backend: 0x0a020002, flags: FLOW_F_PEER, lastSeenNs: flows.nowNs() });
 * const seen = flows.get(key)?.lastSeenNs;        // activity, CLOCK_MONOTONIC ns
 * await sub.close();
 * ```
 *
 * @module
 */

export { BpfError, ERRNO, strerror } from "./errors.ts";
export {
  BPF_F_INNER_MAP,
  BPF_F_MMAPABLE,
  BpfMap,
  type CreateMapSpec,
  MAP_TYPE,
  type MapInfo,
  numPossibleCpus,
  UPDATE,
} from "./map.ts";
export { isMmapable, readU32Values, writeU32Values } from "./map_mmap.ts";
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
  DEFAULT_OBJECT_DIR,
  DEFAULT_PIN_DIR,
  ensureBpffs,
  loadSizes,
} from "./datapath.ts";
export { DecapDatapath, type DecapOptions } from "./decap_datapath.ts";
export {
  NODE_PIN_DIR,
  NODE_TC_FILTER,
  NodeDatapath,
  type NodeDatapathOptions,
} from "./node_datapath.ts";
export * from "./node_structs.ts";
export * from "./flow.ts";
export { BpfFlowTable, type FlowTable } from "./flow_table.ts";
export * from "./consts.ts";
export { BpfLBMaps, type LBMapsHandles } from "./lbmaps_bpf.ts";
export { type DatapathCounters, exportDatapathMetrics } from "./metrics.ts";
export * from "./structs.ts";
export * from "./structs6.ts";
export { addLocalVip6, type Frontend6, Ipv6Maps, removeLocalVip6 } from "./ipv6_maps.ts";
