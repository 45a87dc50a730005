/**
 * Shared by the hostile-input and ICMP-error fixtures (tests/bpf/hostile_fixtures_test.ts,
 * tests/bpf/icmp_fixtures_test.ts): an LB datapath with three frontends, the expected
 * encapsulation of a frame to the backend a flow hash picks, and a fixture runner that checks the
 * verdict, the output frame, that exactly one reason counter moved, and that no flow was made.
 *
 * @module
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { createTopology } from "../../lab/netns.ts";
import {
  Datapath,
  type FlowEvent,
  type FlowKey,
  inNetns,
  makeFlowKey,
  type Reason,
  REASONS,
  testRun,
  type TestRunResult,
  XDP,
} from "../../node/bpf/mod.ts";
import {
  encapSourcePort,
  flowHashClientIp,
  flowHashFiveTuple,
} from "../../policy-as/host/flow_hash.ts";
import { encapsulated, hex } from "../../lab/packets.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

export { XDP };

/** Flow hash seed of the fixtures' LB node. */
export const SEED = 0x1234;
/** The LB node's own address (hf_config src_addr). */
export const LB_SRC = "10.1.1.2";
/** Encapsulation port. */
export const ENCAP_PORT = 6080;
/** A well-behaved client. */
export const CLIENT = "10.0.0.1";
/** Frontend VIP: TCP 80 and UDP 53 five-tuple (table TABLE7). */
export const VIP = "10.0.100.1";
/** Frontend VIP: TCP 80 client-ip (table TABLE5). */
export const VIP_CLIENT_IP = "10.0.100.2";
/** Backend IDs → addresses. */
export const BACKENDS: Record<number, string> = { 1: "10.2.0.1", 2: "10.2.0.2", 3: "10.2.0.3" };
/** Maglev table of VIP's services. */
export const TABLE7 = new Uint32Array([1, 2, 3, 1, 2, 3, 1]);
/** Maglev table of VIP_CLIENT_IP's service. */
export const TABLE5 = new Uint32Array([1, 2, 3, 1, 2]);

/** An LB datapath (not pinned) with the fixtures' node settings, backends and frontends;
 * `maxFlows` sizes hf_flows, `ringBytes` the new-flow rings (defaults those of the datapath). */
export async function openFixtureLb(
  options: { maxFlows?: number; ringBytes?: number } = {},
): Promise<Datapath> {
  const dp = await Datapath.open({ pinDir: null, ...options });
  dp.configure({ srcAddr: LB_SRC, encapPort: ENCAP_PORT, seed: SEED });
  const lb = dp.lbMaps();
  for (const [id, address] of Object.entries(BACKENDS)) {
    await lb.updateBackend(Number(id), { address, port: 80 });
  }
  const svc = async (
    address: string,
    port: number,
    protocol: "TCP" | "UDP",
    serviceId: number,
    table: Uint32Array,
    mode: "five-tuple" | "client-ip",
  ) => {
    await lb.updateMaglev(serviceId, table);
    await lb.updateService({ address, port, protocol }, {
      serviceId,
      backendCount: 3,
      flowKeyMode: mode,
      maglevSize: table.length,
    });
  };
  await svc(VIP, 80, "TCP", 10, TABLE7, "five-tuple");
  await svc(VIP, 53, "UDP", 11, TABLE7, "five-tuple");
  await svc(VIP_CLIENT_IP, 80, "TCP", 12, TABLE5, "client-ip");
  return dp;
}

/** A forward flow (client → VIP), addresses as text. */
export interface Flow {
  readonly saddr: string;
  readonly daddr: string;
  readonly sport: number;
  readonly dport: number;
  readonly proto: number;
}

/** The flow hash of `f` in its service's mode, and the flow map key of that mode. */
export function flowHash(
  f: Flow,
  mode: "five-tuple" | "client-ip" = "five-tuple",
): { hash: number; key: FlowKey } {
  const saddr = parseIpv4(f.saddr);
  if (mode === "client-ip") {
    return { hash: flowHashClientIp(saddr, SEED), key: makeFlowKey({ ...f, sport: 0 }) };
  }
  const hash = flowHashFiveTuple({ ...f, saddr, daddr: parseIpv4(f.daddr) }, SEED);
  return { hash, key: makeFlowKey(f) };
}

/** The frame hf_lb must send for `frame` of flow `f`: encapsulated to `backend`, or to the
 * backend `table[hash % M]` picks. */
export function expectEncap(
  frame: Uint8Array,
  f: Flow,
  opts: { table?: Uint32Array; mode?: "five-tuple" | "client-ip"; backend?: string } = {},
): Uint8Array {
  const { hash } = flowHash(f, opts.mode);
  const table = opts.table ?? TABLE7;
  const backend = opts.backend ?? BACKENDS[table[hash % table.length]!]!;
  return encapsulated(frame, {
    outerSrc: LB_SRC,
    backend,
    sport: encapSourcePort(hash),
    dport: ENCAP_PORT,
  });
}

/** One packet through hf_lb and what must come of it. */
export interface Fixture {
  readonly description: string;
  readonly input: Uint8Array;
  readonly verdict: number;
  /** Expected output frame; "unchanged" = the input; null = not checked (dropped frames). */
  readonly output: Uint8Array | "unchanged" | null;
  /** The one reason counter that must move by one. */
  readonly reason: Reason;
}

/** Runs `f` with `run`, asserting verdict, output, exactly one reason counter +1, and that the
 * flow map holds as many entries after as before (none made). */
export function checkFixture(
  dp: Datapath,
  f: Fixture,
  run: (frame: Uint8Array) => TestRunResult = (frame) => testRun(dp.program, frame),
): void {
  const flowsBefore = [...dp.flowTable().entries()].length;
  const before = dp.reasons();
  const r = run(f.input);
  const after = dp.reasons();
  strictEqual(r.retval, f.verdict, `verdict of "${f.description}"`);
  if (f.output === "unchanged") {
    strictEqual(hex(r.data), hex(f.input), "frame must pass untouched");
  } else if (f.output !== null) strictEqual(hex(r.data), hex(f.output), "output frame");
  const moved = REASONS.filter((n) => after[n] !== before[n]).map((n) =>
    `${n}+${after[n] - before[n]}`
  );
  deepStrictEqual(moved, [`${f.reason}+1`], "exactly one reason counter moves by one");
  strictEqual([...dp.flowTable().entries()].length, flowsBefore, "no flow entry is made");
}

/** A namespace whose `lo` has MTU `mtu`, standing in for the LB's NIC: BPF_PROG_TEST_RUN checks
 * the MTU of the context's ingress device (ifindex 1 = lo). `run` runs hf_lb there. */
export async function mtuDevice(dp: Datapath, mtu: number) {
  const topo = await createTopology({ hosts: [{ name: "mtu" }] }, { sweep: false }); // -P=bpf may not run `kill`
  await topo.exec("mtu", ["ip", "link", "set", "lo", "mtu", String(mtu)]);
  const run = (frame: Uint8Array): TestRunResult => {
    const ctx = new Uint8Array(24); // struct xdp_md: data, data_end, data_meta, ingress_ifindex, ...
    const v = new DataView(ctx.buffer);
    v.setUint32(4, frame.length, true);
    v.setUint32(12, 1, true); // lo
    return inNetns(topo.ns("mtu"), () => testRun(dp.program, frame, { ctxIn: ctx }));
  };
  return { run, [Symbol.asyncDispose]: () => topo[Symbol.asyncDispose]() };
}

/** Runs `input` through hf_lb and returns the result with the reason counters that moved
 * (`name+n`, in enum order). */
export function runCounted(dp: Datapath, input: Uint8Array): TestRunResult & { moved: string[] } {
  const before = dp.reasons();
  const r = testRun(dp.program, input);
  const after = dp.reasons();
  const moved = REASONS.filter((n) => after[n] !== before[n]).map((n) =>
    `${n}+${after[n] - before[n]}`
  );
  return { ...r, moved };
}

/** New-flow events waiting in `dp`'s ring buffer, read at once. */
export async function drainEvents(dp: Datapath): Promise<FlowEvent[]> {
  const events: FlowEvent[] = [];
  const reader = dp.subscribe((e) => events.push(e));
  reader.consume();
  await reader.close();
  return events;
}
