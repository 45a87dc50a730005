/**
 * The local-backend rule of hf_lb (docs/anycast.md "Flow redirection"), through
 * BPF_PROG_TEST_RUN: on an anycast node the frontend's only backend for new flows is the node
 * itself (hf_config src_addr). Such a flow is held and shared like any other (hf_flows_syn on the
 * SYN, hf_flows plus one new-flow event naming this node on the client's ACK), but its packets
 * are passed to the kernel untouched (`pass_local_backend`) instead of encapsulated to itself.
 * A flow another node owns (installed from the flow store) is encapsulated to that node; an ICMP
 * error quoting a local flow is passed too.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { encapsulated, hex, icmpErrorFrame, tcpFrame } from "../../lab/packets.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { BpfFlowTable, type Datapath, FLOW_F_PEER, XDP } from "../../node/bpf/mod.ts";
import { encapSourcePort } from "../../policy-as/host/flow_hash.ts";
import {
  CLIENT,
  drainEvents,
  ENCAP_PORT,
  type Flow,
  flowHash,
  LB_SRC,
  openFixtureLb,
  runCounted as run,
} from "./hostile_setup.ts";

/** An anycast LB IP whose one backend is this node. */
const ANYCAST_VIP = "10.0.100.20";
const SERVICE_ID = 20;
const LOCAL_BACKEND_ID = 40;
/** Another anycast node, the owner of flows learned from the store. */
const OTHER_NODE = "10.1.2.2";
const SYN = 0x02, ACK = 0x10, PSH_ACK = 0x18;

const flow = (sport: number): Flow => ({
  saddr: CLIENT,
  daddr: ANYCAST_VIP,
  sport,
  dport: 80,
  proto: 6,
});
const frame = (f: Flow, flags: number, payload?: Uint8Array) =>
  tcpFrame(f.saddr, f.daddr, { sport: f.sport, dport: f.dport, flags, payload });
/** `input` as this node sends it to OTHER_NODE, the flow's owner. */
const toOtherNode = (input: Uint8Array, hash: number) =>
  encapsulated(input, {
    outerSrc: LB_SRC,
    backend: OTHER_NODE,
    sport: encapSourcePort(hash),
    dport: ENCAP_PORT,
  });

/** The fixture datapath plus ANYCAST_VIP:80/TCP served by this node alone (Maglev M = 7). */
async function openAnycastLb(): Promise<Datapath> {
  const dp = await openFixtureLb();
  const lb = dp.lbMaps();
  await lb.updateBackend(LOCAL_BACKEND_ID, { address: LB_SRC, port: 80 });
  await lb.updateMaglev(SERVICE_ID, new Uint32Array(7).fill(LOCAL_BACKEND_ID));
  await lb.updateService({ address: ANYCAST_VIP, port: 80, protocol: "TCP" }, {
    serviceId: SERVICE_ID,
    backendCount: 1,
    flowKeyMode: "five-tuple",
    maglevSize: 7,
  });
  return dp;
}

rootTest("hf_lb: a flow whose backend is this node is passed to the kernel", async (t) => {
  using dp = await openAnycastLb();
  const flows = dp.flowTable();
  const pending = new BpfFlowTable(dp.object.map("hf_flows_syn"));
  const local = flow(41000);
  const { key } = flowHash(local);

  await t.step("SYN: passed untouched, held in hf_flows_syn naming this node", async () => {
    const input = frame(local, SYN);
    const r = run(dp, input);
    strictEqual(r.retval, XDP.PASS);
    strictEqual(hex(r.data), hex(input), "the frame is not rewritten");
    deepStrictEqual(r.moved, ["pass_local_backend+1"]);
    strictEqual(pending.get(key)?.backend, parseIpv4(LB_SRC));
    strictEqual(flows.get(key), undefined, "not shared before the client's ACK");
    deepStrictEqual(await drainEvents(dp), []);
  });

  await t.step("ACK: passed; the flow is shared with one event naming this node", async () => {
    const input = frame(local, ACK);
    const r = run(dp, input);
    strictEqual(r.retval, XDP.PASS);
    strictEqual(hex(r.data), hex(input));
    deepStrictEqual(r.moved, ["flow_shared+1", "pass_local_backend+1"]);
    strictEqual(flows.get(key)?.backend, parseIpv4(LB_SRC));
    strictEqual(pending.get(key), undefined);
    const events = await drainEvents(dp);
    strictEqual(events.length, 1);
    strictEqual(events[0]!.backend, parseIpv4(LB_SRC));
    strictEqual(events[0]!.serviceId, SERVICE_ID);
  });

  await t.step("later packets (flow map hit): passed, nothing else moves", () => {
    const input = frame(local, PSH_ACK, new Uint8Array(100).fill(7));
    const r = run(dp, input);
    strictEqual(r.retval, XDP.PASS);
    strictEqual(hex(r.data), hex(input));
    deepStrictEqual(r.moved, ["pass_local_backend+1"]);
  });

  await t.step("a flow another node owns (from the store) is encapsulated to it", () => {
    const moved = flow(41001);
    const { key: movedKey, hash } = flowHash(moved);
    flows.put(movedKey, {
      backend: parseIpv4(OTHER_NODE),
      flags: FLOW_F_PEER,
      lastSeenNs: flows.nowNs(),
    });
    const input = frame(moved, PSH_ACK, new Uint8Array(10).fill(1));
    const r = run(dp, input);
    strictEqual(r.retval, XDP.TX);
    const want = toOtherNode(input, hash);
    strictEqual(hex(r.data), hex(want));
    deepStrictEqual(r.moved, ["tx_hit+1"]);
  });

  await t.step("an ICMP error quoting a local flow is passed, not encapsulated", () => {
    const reply = tcpFrame(ANYCAST_VIP, CLIENT, { sport: 80, dport: 41000, flags: ACK })
      .subarray(14);
    const input = icmpErrorFrame("10.9.0.1", ANYCAST_VIP, { type: 3, code: 1, quote: reply });
    const r = run(dp, input);
    strictEqual(r.retval, XDP.PASS);
    strictEqual(hex(r.data), hex(input));
    deepStrictEqual(r.moved, ["pass_local_backend+1"]);
  });
});

rootTest("hf_lb: a draining frontend takes no new TCP connection; known flows go on", async (t) => {
  using dp = await openAnycastLb();
  const lb = dp.lbMaps();
  const flows = dp.flowTable();
  const pending = new BpfFlowTable(dp.object.map("hf_flows_syn"));
  // A handshake under way when the drain starts: its SYN is held (hf_flows_syn).
  const started = flow(42000);
  strictEqual(run(dp, frame(started, SYN)).retval, XDP.PASS);
  strictEqual(pending.get(flowHash(started).key)?.backend, parseIpv4(LB_SRC));
  await lb.updateService({ address: ANYCAST_VIP, port: 80, protocol: "TCP" }, {
    serviceId: SERVICE_ID,
    backendCount: 1,
    flowKeyMode: "five-tuple",
    maglevSize: 7,
    draining: true,
  });
  const dumped = (await lb.dump()).services.find(([k]) => k.address === ANYCAST_VIP);
  strictEqual(dumped?.[1].draining, true, "the flag reads back");

  await t.step("a SYN that finds no flow is dropped (the client retries elsewhere)", async () => {
    const fresh = flow(42001);
    const r = run(dp, frame(fresh, SYN));
    strictEqual(r.retval, XDP.DROP);
    deepStrictEqual(r.moved, ["drop_no_backends+1"]);
    strictEqual(pending.get(flowHash(fresh).key), undefined, "nothing held");
    deepStrictEqual(await drainEvents(dp), []);
  });

  await t.step("the handshake under way completes: its ACK is passed and shared", async () => {
    const r = run(dp, frame(started, ACK));
    strictEqual(r.retval, XDP.PASS);
    deepStrictEqual(r.moved, ["flow_shared+1", "pass_local_backend+1"]);
    strictEqual(flows.get(flowHash(started).key)?.backend, parseIpv4(LB_SRC));
    strictEqual((await drainEvents(dp)).length, 1);
  });

  await t.step("an established flow's packets still pass", () => {
    const r = run(dp, frame(started, PSH_ACK, new Uint8Array(20).fill(3)));
    strictEqual(r.retval, XDP.PASS);
    deepStrictEqual(r.moved, ["pass_local_backend+1"]);
  });

  await t.step("a SYN of a flow another node owns follows it", () => {
    const moved = flow(42002);
    const { key, hash } = flowHash(moved);
    flows.put(key, { backend: parseIpv4(OTHER_NODE), flags: FLOW_F_PEER, lastSeenNs: 0 });
    const input = frame(moved, SYN);
    const r = run(dp, input);
    strictEqual(r.retval, XDP.TX);
    const want = toOtherNode(input, hash);
    strictEqual(hex(r.data), hex(want));
  });

  await t.step("a packet of an unknown flow that is no SYN still takes Maglev (passed)", () => {
    const r = run(dp, frame(flow(42003), ACK));
    strictEqual(r.retval, XDP.PASS);
    deepStrictEqual(r.moved, ["flow_shared+1", "pass_local_backend+1"]);
  });
});
