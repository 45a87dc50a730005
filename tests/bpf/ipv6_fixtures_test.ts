/**
 * Fixture table for hf_lb's IPv6 path through BPF_PROG_TEST_RUN (docs/contracts.md "IPv6"):
 * flow map hit and miss (Maglev pick = `table[flowHash6 % M]` of the reference the WASM module is
 * held to), encapsulation over the backend's family (outer IPv4 or IPv6, headers built here
 * independently), new-flow events on hf_events6, what passes untouched (not a frontend, neighbor
 * discovery, extension headers) and what is dropped and counted (bad lengths, hostile input,
 * service states). IPv4 frames through the same program keep their behaviour
 * (lb_fixtures_test.ts is unchanged). Flow sharing as for IPv4 (synflood_fixtures_test.ts): a
 * SYN's flow is held in hf_flows_syn6, over the event budget a confirmed flow too; with
 * hf_events6 full (no reader) confirmed flows still enter hf_flows6, flagged FLOW_F_UNSHARED,
 * and a later packet sends the record.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import {
  type Datapath,
  FLOW_F_PEER,
  FLOW_F_UNSHARED,
  type FlowEvent6,
  Ipv6Maps,
  type Reason,
  testRun,
  XDP,
} from "../../node/bpf/mod.ts";
import { cat, eth, hex, MAC, tcpFrame } from "../../lab/packets.ts";
import {
  ETH_P_IPV6,
  icmp6Message,
  ipv6,
  tcp6,
  tcpFrame6,
  udp6,
  udpFrame6,
} from "../../lab/packets6.ts";
import {
  BACKENDS,
  CLIENT6,
  configure6,
  expectEncap6,
  type Fixture6,
  flowBackend6,
  flowOf,
  LB_SRC,
  LB_SRC6,
  maglevBackend,
  openFixtureLb6,
  runFixture6,
  SEED,
  VIP6,
  VIP6_CLIENT_IP,
  VIP6_DRAINING,
  VIP6_NO_BACKENDS,
  VIP6_NO_MAGLEV,
  VIP6_ONLY4,
  VIP6_ONLY6,
  VIP6_SLOT_ZERO,
  VIP6_UNKNOWN_ID,
} from "./ipv6_setup.ts";

const syn6 = (sport: number, dst = VIP6, o: { src?: string; flags?: number } = {}) =>
  tcpFrame6(o.src ?? CLIENT6, dst, { sport, dport: 80, flags: o.flags ?? 0x02 });
const payload = new TextEncoder().encode("hello holdfast over v6");
const withMacs = (f: Uint8Array, dst: readonly number[], src: readonly number[]) =>
  cat(eth(ETH_P_IPV6, dst, src), f.subarray(14));
/** Frame with an extension header `nh` (8 bytes) between the IPv6 header and TCP. */
const withExt = (nh: number) => {
  const seg = tcp6(CLIENT6, VIP6, { sport: 40100, dport: 80 });
  const ext = new Uint8Array(8);
  ext[0] = 6; // next header after the extension: TCP
  return cat(
    eth(ETH_P_IPV6),
    ipv6({ src: CLIENT6, dst: VIP6, nextHeader: nh, payloadLen: 8 + seg.length }),
    ext,
    seg,
  );
};
/** An ICMPv6 message (not an error) of `type` to `dst`, e.g. neighbor solicitation. */
const icmp6 = (type: number, dst: string, macDst: readonly number[] = MAC.lb) => {
  const m = icmp6Message(CLIENT6, dst, { type, code: 0, quote: new Uint8Array(16) });
  m[0] = type;
  return cat(
    eth(ETH_P_IPV6, macDst),
    ipv6({ src: CLIENT6, dst, nextHeader: 58, payloadLen: m.length, hopLimit: 255 }),
    m,
  );
};
const hit = (sport: number, dst = VIP6) =>
  tcpFrame6(CLIENT6, dst, { sport, dport: 80, flags: 0x10, payload });

const FIXTURES: Fixture6[] = [
  {
    description: "TCP SYN to a v6 frontend, new flow: Maglev pick, encapsulated, held unshared",
    input: syn6(40000),
    verdict: XDP.TX,
    output: expectEncap6(syn6(40000)),
    reason: "tx_new",
  },
  {
    description: "the SYN again (retransmit): the held flow, still not shared",
    input: syn6(40000),
    verdict: XDP.TX,
    output: expectEncap6(syn6(40000)),
    reason: "tx_unconfirmed",
  },
  {
    description: "RST+ACK does not confirm: still held",
    input: syn6(40000, VIP6, { flags: 0x14 }),
    verdict: XDP.TX,
    output: expectEncap6(syn6(40000, VIP6, { flags: 0x14 })),
    reason: "tx_unconfirmed",
  },
  {
    description: "the client's ACK confirms: shared (hf_flows6 + hf_events6), same backend",
    input: hit(40000),
    verdict: XDP.TX,
    output: expectEncap6(hit(40000)),
    reason: "tx_confirmed",
    also: ["flow_shared"],
  },
  {
    description: "same 5-tuple again: flow map hit, same backend, outer port and label",
    input: hit(40000),
    verdict: XDP.TX,
    output: expectEncap6(hit(40000)),
    reason: "tx_hit",
  },
  {
    description:
      "a first packet that is an ACK (mid-stream, another LB node's flow): shared at once",
    input: hit(40100),
    verdict: XDP.TX,
    output: expectEncap6(hit(40100)),
    reason: "tx_new",
    also: ["flow_shared"],
  },
  ...[40001, 40002, 40003, 40004, 40005, 40006, 40007, 40008].map((sport): Fixture6 => ({
    description: `new flow sport ${sport}: backend = table[hash6 % 7] (${
      maglevBackend(flowOf(syn6(sport)))
    })`,
    input: syn6(sport),
    verdict: XDP.TX,
    output: expectEncap6(syn6(sport)),
    reason: "tx_new",
  })),
  {
    description: "v6 frontend with IPv6 backends only: outer IPv6 + UDP",
    input: syn6(40010, VIP6_ONLY6),
    verdict: XDP.TX,
    output: expectEncap6(syn6(40010, VIP6_ONLY6)),
    reason: "tx_new",
  },
  {
    description: "v6 frontend with IPv4 backends only: outer IPv4 + UDP around the IPv6 packet",
    input: syn6(40010, VIP6_ONLY4),
    verdict: XDP.TX,
    output: expectEncap6(syn6(40010, VIP6_ONLY4)),
    reason: "tx_new",
  },
  {
    description: "flow installed by the agent (peer, IPv6 backend) wins over Maglev",
    before: (dp) =>
      new Ipv6Maps(dp.object).putFlow(flowOf(syn6(41000)), {
        backend: "2001:db8:2::99",
        flags: FLOW_F_PEER,
        lastSeenNs: 0,
      }),
    input: syn6(41000),
    verdict: XDP.TX,
    output: expectEncap6(syn6(41000), { backend: "2001:db8:2::99" }),
    reason: "tx_hit",
  },
  {
    description: "flow installed by the agent with an IPv4 backend: outer IPv4",
    before: (dp) =>
      new Ipv6Maps(dp.object).putFlow(flowOf(syn6(41001)), {
        backend: "10.2.0.99",
        flags: FLOW_F_PEER,
        lastSeenNs: 0,
      }),
    input: syn6(41001),
    verdict: XDP.TX,
    output: expectEncap6(syn6(41001), { backend: "10.2.0.99" }),
    reason: "tx_hit",
  },
  ...[[41002, LB_SRC6, "IPv6"], [41003, LB_SRC, "IPv4"]].map(([sport, be, fam]): Fixture6 => ({
    description: `flow whose backend is this node (its ${fam} address): passed to its kernel`,
    before: (dp) =>
      new Ipv6Maps(dp.object).putFlow(flowOf(hit(sport as number)), {
        backend: be as string,
        flags: FLOW_F_PEER,
        lastSeenNs: 0,
      }),
    input: hit(sport as number),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_local_backend",
  })),
  {
    description: "draining v6 frontend: a SYN without a flow is dropped (the client retries)",
    input: syn6(41010, VIP6_DRAINING),
    verdict: XDP.DROP,
    output: "unchanged",
    reason: "drop_no_backends",
  },
  {
    description: "draining v6 frontend: a SYN of a stored flow follows it",
    before: (dp) =>
      new Ipv6Maps(dp.object).putFlow(flowOf(syn6(41011, VIP6_DRAINING)), {
        backend: "2001:db8:2::99",
        flags: FLOW_F_PEER,
        lastSeenNs: 0,
      }),
    input: syn6(41011, VIP6_DRAINING),
    verdict: XDP.TX,
    output: expectEncap6(syn6(41011, VIP6_DRAINING), { backend: "2001:db8:2::99" }),
    reason: "tx_hit",
  },
  {
    description: "draining v6 frontend: a packet of an unknown flow that is no SYN takes Maglev",
    input: hit(41012, VIP6_DRAINING),
    verdict: XDP.TX,
    output: expectEncap6(hit(41012, VIP6_DRAINING)),
    reason: "tx_new",
    also: ["flow_shared"],
  },
  {
    description: "UDP to a v6 frontend: encapsulated, shared at once (no handshake)",
    input: udpFrame6(CLIENT6, VIP6, 5353, 53, payload),
    verdict: XDP.TX,
    output: expectEncap6(udpFrame6(CLIENT6, VIP6, 5353, 53, payload)),
    reason: "tx_new",
    also: ["flow_shared"],
  },
  {
    description: "client-ip service: new client",
    input: syn6(42000, VIP6_CLIENT_IP),
    verdict: XDP.TX,
    output: expectEncap6(syn6(42000, VIP6_CLIENT_IP), { clientIp: true }),
    reason: "tx_new",
  },
  {
    description: "client-ip service: another source port of the same client, the same held flow",
    input: syn6(42001, VIP6_CLIENT_IP),
    verdict: XDP.TX,
    output: expectEncap6(syn6(42001, VIP6_CLIENT_IP), { clientIp: true }),
    reason: "tx_unconfirmed",
  },
  {
    description: "traffic class of the inner packet is copied to the outer header (both families)",
    input: tcpFrame6(CLIENT6, VIP6_ONLY6, { sport: 40011, dport: 80 }, { tc: 0xb8 }),
    verdict: XDP.TX,
    output: expectEncap6(tcpFrame6(CLIENT6, VIP6_ONLY6, { sport: 40011, dport: 80 }, { tc: 0xb8 })),
    reason: "tx_new",
  },
  {
    description: "traffic class copied to an outer IPv4 TOS",
    input: tcpFrame6(CLIENT6, VIP6_ONLY4, { sport: 40011, dport: 80 }, { tc: 0xb8 }),
    verdict: XDP.TX,
    output: expectEncap6(tcpFrame6(CLIENT6, VIP6_ONLY4, { sport: 40011, dport: 80 }, { tc: 0xb8 })),
    reason: "tx_new",
  },
  {
    description: "hop limit 1 is forwarded (only 0 is hostile)",
    input: tcpFrame6(CLIENT6, VIP6, { sport: 40012, dport: 80 }, { hopLimit: 1 }),
    verdict: XDP.TX,
    output: expectEncap6(tcpFrame6(CLIENT6, VIP6, { sport: 40012, dport: 80 }, { hopLimit: 1 })),
    reason: "tx_new",
  },
  {
    description: "Ethernet trailer: outer lengths count the IPv6 packet only (as for IPv4)",
    input: cat(syn6(40013), new Uint8Array(6)),
    verdict: XDP.TX,
    output: expectEncap6(cat(syn6(40013), new Uint8Array(6))),
    reason: "tx_new",
  },
  // not for us: untouched
  {
    description: "TCP to another v6 address: passed untouched",
    input: syn6(40000, "2001:db8:999::1"),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_frontend",
  },
  {
    description: "v6 frontend address, other port: passed untouched",
    input: tcpFrame6(CLIENT6, VIP6, { sport: 40000, dport: 8080 }),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_frontend",
  },
  {
    description: "v6 frontend address and port, wrong protocol (UDP 80): passed untouched",
    input: udpFrame6(CLIENT6, VIP6, 5000, 80, payload),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_frontend",
  },
  {
    description: "IPv4 address of a v6 frontend's bytes is not a frontend: v4 path, passed",
    input: tcpFrame("10.0.0.1", "10.9.9.9", { sport: 1, dport: 80 }),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_frontend",
  },
  ...[
    [135, "neighbor solicitation"],
    [136, "neighbor advertisement"],
    [
      133,
      "router solicitation",
    ],
    [134, "router advertisement"],
    [128, "echo request"],
  ].map(([type, name]): Fixture6 => ({
    description: `ICMPv6 ${name} (${type}) to the VIP: passed to the kernel`,
    input: icmp6(type as number, VIP6),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_icmp",
  })),
  {
    description: "neighbor solicitation to the solicited-node multicast group: passed",
    input: icmp6(135, "ff02::1:ff00:1", [0x33, 0x33, 0xff, 0, 0, 1]),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_icmp",
  },
  ...[[0, "hop-by-hop options"], [43, "routing"], [44, "fragment"], [60, "destination options"], [
    51,
    "authentication",
  ]].map(([nh, name]): Fixture6 => ({
    description: `extension header ${name} (${nh}) to the VIP: passed untouched, never parsed`,
    input: withExt(nh as number),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_ipv6_ext",
  })),
  {
    description: "no next header (59): passed",
    input: cat(eth(ETH_P_IPV6), ipv6({ src: CLIENT6, dst: VIP6, nextHeader: 59, payloadLen: 0 })),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_l4",
  },
  // truncated / malformed
  {
    description: "IPv6 header cut short (20 of 40 bytes): passed",
    input: syn6(40000).slice(0, 34),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_truncated",
  },
  {
    description: "ports cut off (IPv6 header only): passed",
    input: syn6(40000).slice(0, 54),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_truncated",
  },
  {
    description: "EtherType IPv6 but version 4 in the header: passed untouched",
    input: tcpFrame6(CLIENT6, VIP6, { sport: 40000, dport: 80 }, { version: 4 }),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_ipv4",
  },
  {
    description: "TCP header cut after the ports, to a frontend: dropped",
    input: syn6(40020).slice(0, 58),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  {
    description: "payload length beyond the frame: dropped",
    input: tcpFrame6(CLIENT6, VIP6, { sport: 40021, dport: 80 }, { payloadLen: 1400 }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  {
    description: "payload length shorter than the TCP header: dropped",
    input: tcpFrame6(CLIENT6, VIP6, { sport: 40022, dport: 80 }, { payloadLen: 12 }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  {
    description: "TCP data offset 4 (< 5): dropped",
    input: (() => {
      const f = syn6(40023);
      f[66] = 0x40;
      return f;
    })(),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  {
    description: "UDP length disagreeing with the payload length: dropped",
    input: cat(
      eth(ETH_P_IPV6),
      ipv6({ src: CLIENT6, dst: VIP6, nextHeader: 17, payloadLen: 8 + payload.length }),
      udp6(CLIENT6, VIP6, 5353, 53, payload, { lenOverride: 100 }),
    ),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  {
    description: "UDP payload length 4 (no 8-byte header inside the packet): dropped",
    input: cat(
      eth(ETH_P_IPV6),
      ipv6({ src: CLIENT6, dst: VIP6, nextHeader: 17, payloadLen: 4 }),
      udp6(CLIENT6, VIP6, 5353, 53, new Uint8Array(0)),
    ),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  // hostile input: dropped and counted, no flow
  ...[
    ["::", "unspecified"],
    ["::1", "loopback"],
    ["ff02::1", "multicast"],
    ["ff0e::1234", "global multicast"],
    ["::ffff:10.0.0.1", "IPv4-mapped"],
    [VIP6, "the VIP itself (land)"],
    [LB_SRC6, "this LB node"],
  ].map(([src, name]): Fixture6 => ({
    description: `source ${src} (${name}): dropped as martian`,
    input: syn6(40030, VIP6, { src }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_martian",
  })),
  {
    description: "hop limit 0: dropped",
    input: tcpFrame6(CLIENT6, VIP6, { sport: 40031, dport: 80 }, { hopLimit: 0 }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_ttl_zero",
  },
  {
    description: "SYN+FIN: dropped",
    input: syn6(40032, VIP6, { flags: 0x03 }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_tcp_flags",
  },
  {
    description: "SYN+RST: dropped",
    input: syn6(40033, VIP6, { flags: 0x06 }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_tcp_flags",
  },
  {
    description: "UDP checksum 0 (invalid over IPv6, RFC 8200 8.1): dropped",
    input: cat(
      eth(ETH_P_IPV6),
      ipv6({ src: CLIENT6, dst: VIP6, nextHeader: 17, payloadLen: 8 + payload.length }),
      udp6(CLIENT6, VIP6, 5354, 53, payload, { zeroCsum: true }),
    ),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_csum",
  },
  {
    description: "to a multicast MAC (33:33:00:00:00:01): dropped",
    input: withMacs(syn6(40034), [0x33, 0x33, 0, 0, 0, 1], MAC.router),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_l2_group_dst",
  },
  {
    description: "to the broadcast MAC: dropped",
    input: withMacs(syn6(40035), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff], MAC.router),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_l2_group_dst",
  },
  {
    description: "from a group source MAC: dropped",
    input: withMacs(syn6(40036), MAC.lb, [0x03, 0, 0, 0, 0, 1]),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_l2_group_src",
  },
  // service states
  {
    description: "service with 0 backends: new flow dropped",
    input: syn6(40040, VIP6_NO_BACKENDS),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_no_backends",
  },
  {
    description: "slot names a backend ID in neither backend map: dropped",
    input: syn6(40041, VIP6_UNKNOWN_ID),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_no_backend",
  },
  {
    description: "Maglev slot 0 (unset): dropped",
    input: syn6(40042, VIP6_SLOT_ZERO),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_maglev_slot_zero",
  },
  {
    description: "service without a Maglev table: dropped",
    input: syn6(40043, VIP6_NO_MAGLEV),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_no_maglev",
  },
  {
    description: "no IPv6 source configured, IPv6 backend: dropped, no flow",
    before: (dp) => configure6(dp, "::"),
    input: syn6(40044, VIP6_ONLY6),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_no_config",
    after: (dp) => configure6(dp, LB_SRC6),
  },
  {
    description: "no IPv6 source configured, IPv4 backend: still sent (outer IPv4)",
    before: (dp) => configure6(dp, "::"),
    input: syn6(40044, VIP6_ONLY4),
    verdict: XDP.TX,
    output: expectEncap6(syn6(40044, VIP6_ONLY4)),
    reason: "tx_new",
    after: (dp) => configure6(dp, LB_SRC6),
  },
  {
    description: "no IPv4 source configured, IPv4 backend: dropped",
    before: (dp) => dp.configure({ srcAddr: "0.0.0.0", encapPort: 6080, seed: SEED }),
    input: syn6(40045, VIP6_ONLY4),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_no_config",
    after: (dp) => dp.configure({ srcAddr: LB_SRC, encapPort: 6080, seed: SEED }),
  },
];

rootTest("hf_lb IPv6 fixtures through BPF_PROG_TEST_RUN", async (t) => {
  using dp = await openFixtureLb6();
  const events: FlowEvent6[] = [];
  const reader = new Ipv6Maps(dp.object).subscribe((e) => events.push(e));
  try {
    for (const f of FIXTURES) await t.step(f.description, () => void runFixture6(dp, f));

    await t.step("both backend families were picked by Maglev from the mixed table", () => {
      const picked = new Set(
        [40000, 40001, 40002, 40003, 40004, 40005, 40006, 40007, 40008].map((s) =>
          maglevBackend(flowOf(syn6(s))).includes(":") ? 6 : 4
        ),
      );
      strictEqual(picked.size, 2, "fixtures cover outer IPv4 and outer IPv6");
    });

    await t.step("a held flow whose backend left the service is picked again", () => {
      const v6 = new Ipv6Maps(dp.object);
      const frame = syn6(44000, VIP6_ONLY6);
      const key = flowOf(frame);
      const before = maglevBackend(key);
      const id = Number(Object.entries(BACKENDS).find(([, a]) => a === before)![0]);
      strictEqual(testRun(dp.program, frame).retval, XDP.TX, "SYN held");
      v6.updateBackend(id, "2001:db8:2::77", 80); // the slot's ID now names another address
      try {
        runFixture6(dp, {
          description: "ACK after the backend changed",
          input: hit(44000, VIP6_ONLY6),
          verdict: XDP.TX,
          output: expectEncap6(hit(44000, VIP6_ONLY6), { backend: "2001:db8:2::77" }),
          reason: "tx_new",
          also: ["flow_shared"],
        });
      } finally {
        v6.updateBackend(id, before, 80);
      }
    });

    await t.step("event budget spent: a confirmed flow stays held, counted flow_unshared", () => {
      dp.configure({ srcAddr: LB_SRC, encapPort: 6080, seed: SEED, eventBudget: 1 });
      try {
        const v6 = new Ipv6Maps(dp.object);
        let unshared = 0;
        for (let sport = 45000; sport < 45005; sport++) {
          const before = dp.reasons().flow_unshared;
          strictEqual(testRun(dp.program, hit(sport)).retval, XDP.TX, "forwarded all the same");
          if (dp.reasons().flow_unshared === before + 1n) {
            unshared++;
            strictEqual(v6.getFlow(flowOf(hit(sport))), undefined, "not in hf_flows6");
          }
        }
        strictEqual(
          unshared >= 3,
          true,
          `at most one flow shared per second: ${unshared} of 5 held`,
        );
      } finally {
        dp.configure({ srcAddr: LB_SRC, encapPort: 6080, seed: SEED });
      }
    });

    await t.step("one hf_events6 record per shared flow, with its key and backend", () => {
      reader.consume();
      strictEqual(BigInt(events.length), dp.reasons().flow_shared, "one event per shared flow");
      const first = events.find((e) => e.key.sport === 40000 && e.key.daddr === VIP6);
      strictEqual(first?.backend, maglevBackend(flowOf(syn6(40000))));
      strictEqual(first?.serviceId, 20);
      strictEqual(flowBackend6(dp, flowOf(syn6(40000))), first?.backend, "flow map agrees");
      const v4events: unknown[] = [];
      const sub = dp.subscribe((e) => v4events.push(e));
      sub.consume();
      strictEqual(v4events.length, 0, "hf_events (IPv4 layout) carries no IPv6 flow");
      return sub.close();
    });

    await t.step("counters per frontend: every v6 packet sent or dropped is counted", () => {
      const r = dp.reasons();
      const fe = [...dp.frontendStats().values()];
      strictEqual(
        fe.reduce((s, x) => s + x.packets, 0n),
        r.tx_hit + r.tx_new + r.tx_confirmed + r.tx_unconfirmed + r.pass_local_backend,
      );
      strictEqual(fe.reduce((s, x) => s + x.newFlows, 0n), r.tx_new);
      const be = [...dp.backendNewFlows().values()].reduce((s, x) => s + x, 0n);
      strictEqual(be, r.tx_new, "every Maglev pick counted on one backend");
    });

    await t.step("control surface: a deleted backend, flow and frontend take effect", () => {
      const v6 = new Ipv6Maps(dp.object);
      v6.deleteBackend(3);
      v6.deleteBackend(4);
      strictEqual(testRun(dp.program, syn6(43000, VIP6_ONLY6)).retval, XDP.DROP, "no backend");
      const key = flowOf(syn6(40000));
      strictEqual(v6.deleteFlow(key), true, "the flow existed");
      strictEqual(v6.getFlow(key), undefined);
      strictEqual(v6.deleteService({ address: VIP6, port: 80, protocol: "TCP" }), true);
      const r = testRun(dp.program, hit(40000));
      strictEqual(r.retval, XDP.PASS, "no longer a frontend: passed");
    });

    await t.step("an IPv4 SYN through the same program is still the IPv4 path", () => {
      const r = testRun(dp.program, tcpFrame("10.0.0.1", "10.0.100.1", { sport: 1, dport: 80 }));
      strictEqual(r.retval, XDP.PASS, "no IPv4 frontend configured here: passed");
      strictEqual(hex(r.data.subarray(12, 14)), "08 00");
    });
  } finally {
    await reader.close();
  }
});

/** hf_events6 made 1 MiB here (8 by default), of 80-byte records (72 + an 8-byte header): 13,107. */
const RING6_BYTES = 1 << 20;
const RING6_RECORDS = Math.floor(RING6_BYTES / 80);

/** The hf_events6 records waiting, read at once. */
async function drainEvents6(dp: Datapath): Promise<FlowEvent6[]> {
  const events: FlowEvent6[] = [];
  const reader = new Ipv6Maps(dp.object).subscribe((e) => events.push(e));
  reader.consume();
  await reader.close();
  return events;
}

rootTest("hf_events6 full (no reader): v6 flows still enter hf_flows6, shared later", async (t) => {
  using dp = await openFixtureLb6({ ringBytes: RING6_BYTES });
  dp.configure({ srcAddr: LB_SRC, encapPort: 6080, seed: SEED, eventBudget: 1_000_000 });
  const v6 = new Ipv6Maps(dp.object);
  const n = RING6_RECORDS + 200;
  const sport = (i: number) => 1024 + i;
  const flagged = () =>
    [...v6.flows()].filter((f) => (f.value.flags & FLOW_F_UNSHARED) !== 0).map((f) => f.key.sport);

  await t.step(`${n} confirmed flows, no reader: all in hf_flows6, the last 200 flagged`, () => {
    const before = dp.reasons();
    for (let i = 0; i < n; i++) {
      const r = testRun(dp.program, hit(sport(i)));
      if (r.retval !== XDP.TX) throw new Error(`ACK ${i}: verdict ${r.retval}`);
    }
    const after = dp.reasons();
    const delta = (name: Reason) => after[name] - before[name];
    deepStrictEqual(
      [delta("tx_new"), delta("flow_shared"), delta("event_lost"), delta("flow_unshared")],
      [BigInt(n), BigInt(RING6_RECORDS), 200n, 0n],
    );
    strictEqual([...v6.flows()].length, n, "hf_flows6 kept growing");
    deepStrictEqual(
      flagged().sort((a, b) => a - b),
      Array.from({ length: 200 }, (_, i) => sport(RING6_RECORDS + i)),
      "the flows past the ring's room carry FLOW_F_UNSHARED",
    );
  });

  const last = sport(n - 1);
  await t.step(
    "a flagged flow's packet: a hit; once read, exactly one record, flag cleared",
    async () => {
      const full = testRun(dp.program, hit(last));
      strictEqual(hex(full.data), hex(expectEncap6(hit(last))), "forwarded to its backend");
      strictEqual(v6.getFlow(flowOf(hit(last)))?.flags, FLOW_F_UNSHARED, "ring still full");
      strictEqual((await drainEvents6(dp)).length, RING6_RECORDS);
      const before = dp.reasons();
      runFixture6(dp, {
        description: "retry",
        input: hit(last),
        verdict: XDP.TX,
        output: expectEncap6(hit(last)),
        reason: "tx_hit",
        also: ["flow_shared"],
        newFlows: 0,
      });
      strictEqual(dp.reasons().flow_shared - before.flow_shared, 1n);
      strictEqual(v6.getFlow(flowOf(hit(last)))?.flags, 0, "flag cleared");
      const events = await drainEvents6(dp);
      strictEqual(events.length, 1);
      strictEqual(events[0]?.key.sport, last);
      strictEqual(events[0]?.backend, maglevBackend(flowOf(hit(last))));
      testRun(dp.program, hit(last));
      strictEqual((await drainEvents6(dp)).length, 0, "no second record");
    },
  );
});
