/**
 * Fixture table for the node side (bpf/node_tc.c, docs/backends.md) through BPF_PROG_TEST_RUN:
 * hf_node_in decapsulates and translates LB IP:port → pod IP:target port (IPv4 and IPv6, TCP,
 * UDP, ICMP errors about the pod's replies) and records the flow; hf_node_out translates the pod's
 * replies of recorded flows back to LB IP:port and clamps the SYN/ACK's MSS; two frontends that
 * map to the same pod IP:target port keep their own replies apart; hostile or malformed input
 * for a served frontend is dropped and anything else passes untouched. Each expected frame is
 * built fresh (as the client or pod would have sent it), so every checksum is checked exactly.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import {
  NODE_REASONS,
  NODE_SIZES,
  NodeDatapath,
  type NodeReason,
  PROTO,
  TC_ACT,
  testRun,
} from "../../node/bpf/mod.ts";
import {
  cat,
  eth,
  hex,
  icmpErrorFrame,
  inetChecksum,
  ipv4,
  synOptions,
  tcpFrame,
  udpFrame,
} from "../../lab/packets.ts";
import {
  encapsulatedAny,
  ETH_P_IPV6,
  icmp6ErrorFrame,
  l4ChecksumOk6,
  tcpFrame6,
  udpFrame6,
} from "../../lab/packets6.ts";

const VIP = "10.0.100.1", VIP2 = "10.0.100.2", CLIENT = "10.0.0.1", POD = "10.2.0.5";
const OTHER_POD = "10.2.0.6", ROUTER = "10.9.0.1";
const VIP6 = "2001:db8:100::1", CLIENT6 = "2001:db8:a::1", POD6 = "2001:db8:2::5";
const ROUTER6 = "2001:db8:9::1";

const enc = (inner: Uint8Array, pod: string, dport = 6080) =>
  encapsulatedAny(inner, {
    outerSrc: pod.includes(":") ? "2001:db8:1::2" : "10.1.1.2",
    backend: pod,
    sport: 0xc123,
    dport,
    hash: 0x12345,
  });
/** What the pod must receive: the encapsulated frame's Ethernet header + `inner` as if sent so. */
const delivered = (encFrame: Uint8Array, inner: Uint8Array) =>
  cat(encFrame.subarray(0, 14), inner.subarray(14));
const withBytes = (frame: Uint8Array, at: number, bytes: number[]) => {
  const f = frame.slice();
  f.set(bytes, at);
  return f;
};

const syn = (dst: string, dport: number, sport = 40000) =>
  tcpFrame(CLIENT, dst, { sport, dport, options: synOptions(1460) });
const synAck = (src: string, sport: number, mss: number, dport = 40000) =>
  tcpFrame(src, CLIENT, { sport, dport, flags: 0x12, options: synOptions(mss) });
const syn6 = (dst: string, dport: number) =>
  tcpFrame6(CLIENT6, dst, { sport: 40000, dport, options: synOptions(1440) });
const synAck6 = (src: string, sport: number, mss: number) =>
  tcpFrame6(src, CLIENT6, { sport, dport: 40000, flags: 0x12, options: synOptions(mss) });
/** The ICMP frag-needed a router sends about a reply `quoted` (from its IP header on). */
const fragNeeded = (dst: string, quoted: Uint8Array) =>
  icmpErrorFrame(ROUTER, dst, { type: 3, code: 4, mtu: 1400, quote: quoted.subarray(14) });
const tooBig6 = (dst: string, quoted: Uint8Array) =>
  icmp6ErrorFrame(ROUTER6, dst, { type: 2, code: 0, mtu: 1400, quote: quoted.subarray(14) });

interface Fixture {
  readonly description: string;
  readonly program: "in" | "out";
  readonly input: Uint8Array;
  readonly verdict: number;
  readonly output: Uint8Array | "unchanged" | null;
  readonly reasons: readonly NodeReason[];
}

/** A UDP frame sent without a checksum (IPv4's 0: none computed). */
const udpNoCsum = (src: string, dst: string, sport: number, dport: number, payload: Uint8Array) =>
  withBytes(udpFrame(src, dst, sport, dport, payload), 14 + 20 + 6, [0, 0]);
/** A 2-byte payload whose datagram CLIENT:5001 → POD:5353 sums to a checksum of 0, sent as 0xffff
 * (RFC 768): the translation must not write 0, which would mean "no checksum". */
const MANGLED_ZERO = (() => {
  for (let i = 0; i < 0x10000; i++) {
    const p = new Uint8Array([i >> 8, i & 0xff]);
    const f = udpFrame(CLIENT, POD, 5001, 5353, p).slice(14 + 20);
    f[6] = 0;
    f[7] = 0;
    const ph = [...CLIENT.split("."), ...POD.split(".")].map(Number);
    let sum = 17 + f.length;
    for (let k = 0; k < 8; k += 2) sum += (ph[k]! << 8) | ph[k + 1]!;
    if (inetChecksum(f, sum) === 0) return p;
  }
  throw new Error("no payload sums to a zero UDP checksum");
})();

const S = (dst: string, dport: number) => enc(syn(dst, dport), POD);
const FIXTURES: Fixture[] = [
  {
    description: "IPv4 SYN to LB IP:80 for the pod: decapsulated, to pod IP:8080, client kept",
    program: "in",
    input: S(VIP, 80),
    verdict: TC_ACT.OK,
    output: delivered(S(VIP, 80), syn(POD, 8080)),
    reasons: ["nat_in"],
  },
  {
    description: "the pod's SYN/ACK from :8080: source LB IP:80, MSS 1460 clamped to 1432",
    program: "out",
    input: synAck(POD, 8080, 1460),
    verdict: TC_ACT.OK,
    output: synAck(VIP, 80, 1432),
    reasons: ["nat_out", "mss_clamped"],
  },
  {
    description: "a second frontend LB IP2:8080 → the same pod IP:8080, another client port",
    program: "in",
    input: enc(syn(VIP2, 8080, 40001), POD),
    verdict: TC_ACT.OK,
    output: delivered(enc(syn(VIP2, 8080, 40001), POD), syn(POD, 8080, 40001)),
    reasons: ["nat_in"],
  },
  {
    description: "…whose replies leave from LB IP2:8080 (MSS already small: untouched)",
    program: "out",
    input: synAck(POD, 8080, 1400, 40001),
    verdict: TC_ACT.OK,
    output: synAck(VIP2, 8080, 1400, 40001),
    reasons: ["nat_out", "mss_ok"],
  },
  {
    description: "the pod's packet to a client port with no recorded flow: untouched",
    program: "out",
    input: synAck(POD, 8080, 1460, 40009),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: [],
  },
  {
    description: "UDP to LB IP:53 → pod IP:5353, UDP checksum fixed",
    program: "in",
    input: enc(udpFrame(CLIENT, VIP, 5000, 53, new Uint8Array([1, 2, 3])), POD),
    verdict: TC_ACT.OK,
    output: delivered(
      enc(udpFrame(CLIENT, VIP, 5000, 53, new Uint8Array([1, 2, 3])), POD),
      udpFrame(CLIENT, POD, 5000, 5353, new Uint8Array([1, 2, 3])),
    ),
    reasons: ["nat_in"],
  },
  {
    description: "the pod's UDP reply from :5353 leaves from LB IP:53",
    program: "out",
    input: udpFrame(POD, CLIENT, 5353, 5000, new Uint8Array([9])),
    verdict: TC_ACT.OK,
    output: udpFrame(VIP, CLIENT, 53, 5000, new Uint8Array([9])),
    reasons: ["nat_out"],
  },
  {
    description: "UDP without a checksum (0) to LB IP:53: translated, checksum left 0",
    program: "in",
    input: enc(udpNoCsum(CLIENT, VIP, 5002, 53, new Uint8Array([1, 2, 3])), POD),
    verdict: TC_ACT.OK,
    output: delivered(
      enc(udpNoCsum(CLIENT, VIP, 5002, 53, new Uint8Array([1, 2, 3])), POD),
      udpNoCsum(CLIENT, POD, 5002, 5353, new Uint8Array([1, 2, 3])),
    ),
    reasons: ["nat_in"],
  },
  {
    description: "the pod's UDP reply without a checksum: from LB IP:53, checksum left 0",
    program: "out",
    input: udpNoCsum(POD, CLIENT, 5353, 5002, new Uint8Array([9])),
    verdict: TC_ACT.OK,
    output: udpNoCsum(VIP, CLIENT, 53, 5002, new Uint8Array([9])),
    reasons: ["nat_out"],
  },
  {
    description: "UDP whose translated checksum sums to 0: written 0xffff, never 0",
    program: "in",
    input: enc(udpFrame(CLIENT, VIP, 5001, 53, MANGLED_ZERO), POD),
    verdict: TC_ACT.OK,
    output: delivered(
      enc(udpFrame(CLIENT, VIP, 5001, 53, MANGLED_ZERO), POD),
      udpFrame(CLIENT, POD, 5001, 5353, MANGLED_ZERO),
    ),
    reasons: ["nat_in"],
  },
  {
    description: "ICMP frag-needed about the pod's reply, to LB IP: dst and quote translated",
    program: "in",
    input: enc(fragNeeded(VIP, synAck(VIP, 80, 1432)), POD),
    verdict: TC_ACT.OK,
    output: delivered(
      enc(fragNeeded(VIP, synAck(VIP, 80, 1432)), POD),
      fragNeeded(POD, synAck(POD, 8080, 1432)),
    ),
    reasons: ["icmp_in"],
  },
  {
    description:
      "the pod's ICMP frag-needed about the client's packet: from LB IP, quote to LB IP:80",
    program: "out",
    input: icmpErrorFrame(POD, CLIENT, {
      type: 3,
      code: 4,
      mtu: 1400,
      quote: syn(POD, 8080).subarray(14),
    }),
    verdict: TC_ACT.OK,
    output: icmpErrorFrame(VIP, CLIENT, {
      type: 3,
      code: 4,
      mtu: 1400,
      quote: syn(VIP, 80).subarray(14),
    }),
    reasons: ["icmp_out"],
  },
  {
    description: "the pod's ICMP error quoting a flow not recorded: untouched",
    program: "out",
    input: icmpErrorFrame(POD, CLIENT, {
      type: 3,
      code: 3,
      quote: syn(POD, 8080, 40123).subarray(14),
    }),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: [],
  },
  {
    description: "LB IP:81, a port the pod does not serve: untouched",
    program: "in",
    input: S(VIP, 81),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: ["not_local"],
  },
  {
    description: "to another pod (not on this node's maps): untouched (its own decap may run)",
    program: "in",
    input: enc(syn(VIP, 80), OTHER_POD),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: ["not_local"],
  },
  {
    description: "UDP to another port than the encap port: untouched",
    program: "in",
    input: enc(syn(VIP, 80), POD, 6081),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: [],
  },
  {
    description: "plain TCP to the pod: untouched",
    program: "in",
    input: syn(POD, 8080),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: [],
  },
  {
    description: "ARP: untouched both ways",
    program: "in",
    input: cat(eth(0x0806), new Uint8Array(28)),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: [],
  },
  {
    description: "ICMP echo to LB IP, encapsulated: untouched",
    program: "in",
    input: enc(
      cat(
        eth(0x0800),
        ipv4({ src: CLIENT, dst: VIP, proto: 1, payloadLen: 8 }),
        new Uint8Array(8).fill(8, 0, 1),
      ),
      POD,
    ),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: ["not_local"],
  },
  {
    description: "IPv6 inside outer IPv4 to the IPv4 pod: untouched (no IPv6 frontend of it)",
    program: "in",
    input: enc(syn6(VIP6, 80), POD),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: ["not_local"],
  },
  {
    description: "hostile: inner length disagreeing with the outer: dropped",
    program: "in",
    input: withBytes(S(VIP, 80), 42 + 2, [0, 30]),
    verdict: TC_ACT.SHOT,
    output: null,
    reasons: ["bad_inner"],
  },
  {
    description: "hostile: inner header with options (ihl 6): dropped",
    program: "in",
    input: withBytes(S(VIP, 80), 42, [0x46]),
    verdict: TC_ACT.SHOT,
    output: null,
    reasons: ["bad_inner"],
  },
  {
    description: "hostile: inner fragment (MF): dropped",
    program: "in",
    input: withBytes(S(VIP, 80), 42 + 6, [0x20, 0]),
    verdict: TC_ACT.SHOT,
    output: null,
    reasons: ["bad_inner"],
  },
  {
    description: "hostile: frame cut inside the inner TCP header: dropped",
    program: "in",
    input: S(VIP, 80).slice(0, 14 + 28 + 20 + 10),
    verdict: TC_ACT.SHOT,
    output: null,
    reasons: ["bad_inner"],
  },
  {
    description: "truncated: frame cut inside the inner IP header: untouched",
    program: "in",
    input: S(VIP, 80).slice(0, 14 + 28 + 10),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: ["not_local"],
  },
  {
    description: "outer fragment to the encap port: untouched",
    program: "in",
    input: withBytes(S(VIP, 80), 14 + 6, [0x20, 0]),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: [],
  },
  {
    description: "hostile: ICMP error to LB IP quoting the pod's frontend, cut quote: dropped",
    program: "in",
    input: (() => {
      const f = fragNeeded(VIP, synAck(VIP, 80, 1432));
      const cut = cat(f.subarray(0, 14 + 20 + 8 + 24), new Uint8Array(0));
      new DataView(cut.buffer).setUint16(16, 20 + 8 + 24);
      return enc(cut, POD);
    })(),
    verdict: TC_ACT.SHOT,
    output: null,
    reasons: ["bad_inner"],
  },
  {
    description: "IPv6 SYN to [LB IP]:80 for the pod: 48 bytes stripped, to pod IP:8080",
    program: "in",
    input: enc(syn6(VIP6, 80), POD6),
    verdict: TC_ACT.OK,
    output: delivered(enc(syn6(VIP6, 80), POD6), syn6(POD6, 8080)),
    reasons: ["nat_in"],
  },
  {
    description: "the pod's IPv6 SYN/ACK: source [LB IP]:80, MSS 1440 clamped to 1392",
    program: "out",
    input: synAck6(POD6, 8080, 1440),
    verdict: TC_ACT.OK,
    output: synAck6(VIP6, 80, 1392),
    reasons: ["nat_out", "mss_clamped"],
  },
  {
    description: "IPv6 UDP to [LB IP]:53 → pod :5353",
    program: "in",
    input: enc(udpFrame6(CLIENT6, VIP6, 5000, 53, new Uint8Array([7])), POD6),
    verdict: TC_ACT.OK,
    output: delivered(
      enc(udpFrame6(CLIENT6, VIP6, 5000, 53, new Uint8Array([7])), POD6),
      udpFrame6(CLIENT6, POD6, 5000, 5353, new Uint8Array([7])),
    ),
    reasons: ["nat_in"],
  },
  {
    description: "ICMPv6 Packet Too Big about the pod's reply: dst and quote translated",
    program: "in",
    input: enc(tooBig6(VIP6, synAck6(VIP6, 80, 1392)), POD6),
    verdict: TC_ACT.OK,
    output: delivered(
      enc(tooBig6(VIP6, synAck6(VIP6, 80, 1392)), POD6),
      tooBig6(POD6, synAck6(POD6, 8080, 1392)),
    ),
    reasons: ["icmp_in"],
  },
  {
    description:
      "the pod's ICMPv6 Packet Too Big about the client's packet: from [LB IP], quote fixed",
    program: "out",
    input: icmp6ErrorFrame(POD6, CLIENT6, {
      type: 2,
      code: 0,
      mtu: 1400,
      quote: syn6(POD6, 8080).subarray(14),
    }),
    verdict: TC_ACT.OK,
    output: icmp6ErrorFrame(VIP6, CLIENT6, {
      type: 2,
      code: 0,
      mtu: 1400,
      quote: syn6(VIP6, 80).subarray(14),
    }),
    reasons: ["icmp_out"],
  },
  {
    description: "hostile: IPv6 inner length disagreeing with the outer: dropped",
    program: "in",
    input: withBytes(enc(syn6(VIP6, 80), POD6), 62 + 4, [0, 4]),
    verdict: TC_ACT.SHOT,
    output: null,
    reasons: ["bad_inner"],
  },
  {
    description: "IPv6 to [LB IP]:81 (not served): untouched",
    program: "in",
    input: enc(syn6(VIP6, 81), POD6),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: ["not_local"],
  },
  {
    description: "IPv4 inside outer IPv6 to the IPv6 pod: untouched",
    program: "in",
    input: enc(syn(VIP, 80), POD6),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reasons: ["not_local"],
  },
];

// node_tc.o (in-place checksums, Linux 6.3+) and node_tc_compat.o (helpers) give the same bytes.
for (const compat of [false, true]) {
  rootTest(
    `node side fixtures through BPF_PROG_TEST_RUN (${compat ? "node_tc_compat.o" : "node_tc.o"})`,
    async (t) => {
      using dp = await NodeDatapath.open({ pinDir: null, compat });
      dp.configure({ encapPort: 6080, mssMax: 1432 });
      const T = PROTO.TCP, U = PROTO.UDP;
      dp.setFrontend({ pod: POD, vip: VIP, port: 80, proto: T, targetPort: 8080 });
      dp.setFrontend({ pod: POD, vip: VIP2, port: 8080, proto: T, targetPort: 8080 });
      dp.setFrontend({ pod: POD, vip: VIP, port: 53, proto: U, targetPort: 5353 });
      dp.setFrontend({ pod: POD6, vip: VIP6, port: 80, proto: T, targetPort: 8080 });
      dp.setFrontend({ pod: POD6, vip: VIP6, port: 53, proto: U, targetPort: 5353 });

      await t.step("struct sizes match the maps", () => {
        strictEqual(dp.maps.svc.info().keySize, NODE_SIZES.node_svc_key);
        strictEqual(dp.maps.svc6.info().keySize, NODE_SIZES.node_svc_key6);
        strictEqual(dp.maps.svc.info().valueSize, NODE_SIZES.node_svc_value);
        strictEqual(dp.maps.flows.info().keySize, NODE_SIZES.node_flow_key);
        strictEqual(dp.maps.flows.info().valueSize, NODE_SIZES.node_flow_value);
        strictEqual(dp.maps.flows6.info().keySize, NODE_SIZES.node_flow_key6);
        strictEqual(dp.maps.flows6.info().valueSize, NODE_SIZES.node_flow_value6);
      });

      for (const f of FIXTURES) {
        await t.step(f.description, () => {
          const before = dp.stats();
          const r = testRun(f.program === "in" ? dp.nodeIn : dp.nodeOut, f.input);
          const after = dp.stats();
          strictEqual(r.retval, f.verdict, "verdict");
          if (f.output === "unchanged") strictEqual(hex(r.data), hex(f.input), "frame untouched");
          else if (f.output !== null) strictEqual(hex(r.data), hex(f.output), "output frame");
          if (f.output !== null && f.output !== "unchanged" && r.data[12] === 0x86) {
            strictEqual(l4ChecksumOk6(r.data), true, "IPv6 L4 checksum verifies");
          }
          const moved = NODE_REASONS.filter((n) => after[n] !== before[n]);
          deepStrictEqual(moved, [...f.reasons], "reason counters");
        });
      }

      await t.step("the flows recorded are the clients' (one per client port and frontend)", () => {
        const seen = dp.flows().map((f) =>
          `${f.pod}:${f.podPort} ${f.client}:${f.clientPort}/${f.proto} → ${f.vip}:${f.port}`
        ).sort();
        deepStrictEqual(
          seen,
          [
            `${POD6}:5353 ${CLIENT6}:5000/17 → ${VIP6}:53`,
            `${POD6}:8080 ${CLIENT6}:40000/6 → ${VIP6}:80`,
            `${POD}:5353 ${CLIENT}:5000/17 → ${VIP}:53`,
            `${POD}:5353 ${CLIENT}:5001/17 → ${VIP}:53`,
            `${POD}:5353 ${CLIENT}:5002/17 → ${VIP}:53`,
            `${POD}:8080 ${CLIENT}:40000/6 → ${VIP}:80`,
            `${POD}:8080 ${CLIENT}:40001/6 → ${VIP2}:8080`,
          ].sort(),
        );
      });

      await t.step("a pod's state goes: frontends deleted, its flows pruned", () => {
        strictEqual(dp.deleteFrontend({ pod: POD6, vip: VIP6, port: 80, proto: T }), true);
        strictEqual(dp.deleteFrontend({ pod: POD6, vip: VIP6, port: 53, proto: U }), true);
        strictEqual(dp.pruneFlows(new Set([POD])), 2);
        deepStrictEqual(new Set(dp.flows().map((f) => f.pod)), new Set([POD]));
        const r = testRun(dp.nodeIn, enc(syn6(VIP6, 80), POD6));
        strictEqual(r.retval, TC_ACT.OK);
        strictEqual(r.data[12], ETH_P_IPV6 >> 8, "still encapsulated (untouched)");
        strictEqual(r.data.length, enc(syn6(VIP6, 80), POD6).length);
      });
    },
  );
}
