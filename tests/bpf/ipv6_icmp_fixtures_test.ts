/**
 * ICMPv6 through hf_lb (docs/contracts.md "IPv6"): errors (destination unreachable, packet too
 * big, time exceeded) quoting a v6 frontend's flow are encapsulated to the backend owning it —
 * flow map, else Maglev on the reversed quote — and malformed or foreign ones pass; a packet too
 * big once encapsulated is answered with Packet Too Big carrying the MTU left for its backend's
 * family (1500 − 48 over IPv6, 1500 − 28 over IPv4), checksum verified here.
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { createTopology } from "../../lab/netns.ts";
import { inNetns, testRun, type TestRunResult, XDP } from "../../node/bpf/mod.ts";
import { cat, eth, MAC } from "../../lab/packets.ts";
import type { FlowKey6 } from "../../node/bpf/structs6.ts";
import {
  ETH_P_IPV6,
  icmp6ErrorFrame,
  icmp6Message,
  ipv6,
  l4ChecksumOk6,
  tcpFrame6,
  udpFrame6,
} from "../../lab/packets6.ts";
import {
  CLIENT6,
  expectEncap6,
  type Fixture6,
  flowBackend6,
  openFixtureLb6,
  runFixture6,
  VIP6,
  VIP6_CLIENT_IP,
  VIP6_ONLY4,
  VIP6_ONLY6,
} from "./ipv6_setup.ts";

const ROUTER6 = "2001:db8:ff::1";
/** The backend's reply (VIP → client) as a router quotes it, from its IPv6 header on. */
const reply = (sport: number, vip = VIP6, o: { udp?: boolean; dport?: number } = {}) =>
  (o.udp
    ? udpFrame6(vip, CLIENT6, o.dport ?? 53, sport, new Uint8Array(32))
    : tcpFrame6(vip, CLIENT6, { sport: o.dport ?? 80, dport: sport, flags: 0x12 })).subarray(14);
/** The forward flow a quote of `reply(sport, vip)` answers. */
const forward = (sport: number, vip = VIP6, proto = 6, dport = 80): FlowKey6 => ({
  saddr: CLIENT6,
  daddr: vip,
  sport,
  dport,
  proto,
});
const ptb = (
  quote: Uint8Array,
  o: { quoteLen?: number; src?: string; dst?: string; hopLimit?: number } = {},
) =>
  icmp6ErrorFrame(o.src ?? ROUTER6, o.dst ?? VIP6, {
    type: 2,
    code: 0,
    mtu: 1280,
    quote,
    quoteLen: o.quoteLen,
  }, { hopLimit: o.hopLimit ?? 64 });

/** A packet too big quoting 1,232 bytes of a reply (what fits in 1280). */
const bigQuote = ptb(
  tcpFrame6(VIP6, CLIENT6, { sport: 80, dport: 40003, flags: 0x10, payload: new Uint8Array(1172) })
    .subarray(14),
  { quoteLen: 1232 },
);

const FIXTURES: Fixture6[] = [
  {
    description: "setup: the client's SYN makes a held flow (tx_new)",
    input: tcpFrame6(CLIENT6, VIP6, { sport: 40000, dport: 80 }),
    verdict: XDP.TX,
    output: null,
    reason: "tx_new",
  },
  {
    description: "an error about the held (unconfirmed) flow: to its backend",
    input: ptb(reply(40000)),
    verdict: XDP.TX,
    output: expectEncap6(ptb(reply(40000)), { key: forward(40000) }),
    reason: "tx_icmp_to_backend",
  },
  {
    description: "setup: the client's ACK shares the flow (tx_confirmed)",
    input: tcpFrame6(CLIENT6, VIP6, { sport: 40000, dport: 80, flags: 0x10 }),
    verdict: XDP.TX,
    output: null,
    reason: "tx_confirmed",
    also: ["flow_shared"],
  },
  {
    description: "packet too big about that flow: encapsulated to the flow map's backend",
    input: ptb(reply(40000)),
    verdict: XDP.TX,
    output: null, // checked in the step below, against the flow map
    reason: "tx_icmp_to_backend",
  },
  {
    description: "destination unreachable about a UDP flow not in the map: Maglev, no flow",
    input: icmp6ErrorFrame(ROUTER6, VIP6, {
      type: 1,
      code: 4,
      quote: reply(5353, VIP6, { udp: true }),
    }),
    verdict: XDP.TX,
    output: expectEncap6(
      icmp6ErrorFrame(ROUTER6, VIP6, { type: 1, code: 4, quote: reply(5353, VIP6, { udp: true }) }),
      { key: forward(5353, VIP6, 17, 53) },
    ),
    reason: "tx_icmp_to_backend",
  },
  {
    description: "time exceeded about a TCP flow not in the map: Maglev on the reversed quote",
    input: icmp6ErrorFrame(ROUTER6, VIP6, { type: 3, code: 0, quote: reply(40001) }),
    verdict: XDP.TX,
    output: expectEncap6(
      icmp6ErrorFrame(ROUTER6, VIP6, { type: 3, code: 0, quote: reply(40001) }),
      {
        key: forward(40001),
      },
    ),
    reason: "tx_icmp_to_backend",
  },
  {
    description: "client-ip service: the error follows the client's hash (port 0)",
    input: ptb(reply(40002, VIP6_CLIENT_IP), { dst: VIP6_CLIENT_IP }),
    verdict: XDP.TX,
    output: expectEncap6(ptb(reply(40002, VIP6_CLIENT_IP), { dst: VIP6_CLIENT_IP }), {
      key: { ...forward(40002, VIP6_CLIENT_IP), sport: 0 },
      clientIp: true,
    }),
    reason: "tx_icmp_to_backend",
  },
  {
    description: "a 1,232-byte quote (RFC 4443 maximum in 1280) is carried whole",
    input: bigQuote,
    verdict: XDP.TX,
    output: expectEncap6(bigQuote, { key: forward(40003) }),
    reason: "tx_icmp_to_backend",
  },
  // passed to the kernel
  {
    description: "error about a port that is no frontend: passed",
    input: ptb(reply(40004, VIP6, { dport: 8080 })),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_icmp",
  },
  {
    description: "quote not sent from the error's destination: passed",
    input: icmp6ErrorFrame(ROUTER6, VIP6, {
      type: 2,
      code: 0,
      mtu: 1280,
      quote: tcpFrame6("2001:db8:100::99", CLIENT6, { sport: 80, dport: 1 }).subarray(14),
    }),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_icmp",
  },
  {
    description: "parameter problem (4) is not routed: passed",
    input: icmp6ErrorFrame(ROUTER6, VIP6, { type: 4, code: 0, quote: reply(40005) }),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_icmp",
  },
  {
    description: "quote with an extension header: passed",
    input: (() => {
      const q = reply(40006).slice();
      q[6] = 44;
      return ptb(q);
    })(),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_icmp",
  },
  {
    description: "quote cut to 44 bytes (ports missing): passed as a bad quote",
    input: ptb(reply(40007), { quoteLen: 44 }),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_icmp_bad_quote",
  },
  {
    description: "quoted header not version 6: bad quote",
    input: (() => {
      const q = reply(40008).slice();
      q[0] = 0x45;
      return ptb(q);
    })(),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_icmp_bad_quote",
  },
  {
    description: "outer payload length beyond the frame: bad quote",
    input: (() => {
      const f = ptb(reply(40009));
      new DataView(f.buffer).setUint16(18, 400);
      return f;
    })(),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_icmp_bad_quote",
  },
  {
    description: "ICMPv6 header cut short: passed as truncated",
    input: cat(
      eth(ETH_P_IPV6),
      ipv6({ src: ROUTER6, dst: VIP6, nextHeader: 58, payloadLen: 4 }),
      new Uint8Array([2, 0, 0, 0]),
    ),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_truncated",
  },
  // hostile outer headers: dropped
  {
    description: "error from a multicast source: dropped",
    input: ptb(reply(40010), { src: "ff02::2" }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_martian",
  },
  {
    description: "error with hop limit 0: dropped",
    input: ptb(reply(40011), { hopLimit: 0 }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_ttl_zero",
  },
  {
    description: "error sent to a multicast MAC: dropped",
    input: cat(
      eth(ETH_P_IPV6, [0x33, 0x33, 0, 0, 0, 1], MAC.router),
      ptb(reply(40012)).subarray(14),
    ),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_l2_group_dst",
  },
];

rootTest("ICMPv6 errors to a v6 frontend go to the backend owning the flow", async (t) => {
  using dp = await openFixtureLb6();
  for (const f of FIXTURES) {
    await t.step(f.description, () => {
      const r = runFixture6(dp, f);
      if (f.description.startsWith("packet too big about that flow")) {
        const backend = flowBackend6(dp, forward(40000));
        strictEqual(typeof backend, "string", "the SYN made a flow");
        const input = typeof f.input === "function" ? f.input() : f.input;
        strictEqual(
          Array.from(r.data).join(),
          Array.from(expectEncap6(input, { key: forward(40000), backend: backend! })).join(),
          "encapsulated to the flow map's backend, as the flow's packets",
        );
      }
    });
  }
});

rootTest(
  "oversize IPv6: Packet Too Big back to the client with the MTU of the backend's family",
  async (t) => {
    // BPF_PROG_TEST_RUN checks the MTU of the context's ingress device: lo at 1500 in a namespace.
    await using topo = await createTopology({ hosts: [{ name: "mtu6" }] }, { sweep: false });
    await topo.exec("mtu6", ["ip", "link", "set", "lo", "mtu", "1500"]);
    using dp = await openFixtureLb6();
    const run = (frame: Uint8Array): TestRunResult => {
      const ctx = new Uint8Array(24);
      const v = new DataView(ctx.buffer);
      v.setUint32(4, frame.length, true);
      v.setUint32(12, 1, true); // lo
      return inNetns(topo.ns("mtu6"), () => testRun(dp.program, frame, { ctxIn: ctx }));
    };
    const sized = (ipLen: number, vip: string, sport = 45000, src = CLIENT6) =>
      tcpFrame6(src, vip, {
        sport,
        dport: 80,
        flags: 0x10,
        payload: new Uint8Array(ipLen - 60).fill(0xab),
      });
    const ptbFrame = (input: Uint8Array, vip: string, mtu: number) => {
      const msg = icmp6Message(vip, CLIENT6, { type: 2, code: 0, mtu, quote: input.subarray(14) });
      return cat(
        eth(ETH_P_IPV6, Array.from(input.subarray(6, 12)), Array.from(input.subarray(0, 6))),
        ipv6({ src: vip, dst: CLIENT6, nextHeader: 58, payloadLen: msg.length }),
        msg,
      );
    };
    const cases: Fixture6[] = [
      {
        description: "1500 bytes to IPv6 backends: PTB with MTU 1452 (1500 − 48), from the VIP",
        input: sized(1500, VIP6_ONLY6),
        verdict: XDP.TX,
        output: ptbFrame(sized(1500, VIP6_ONLY6), VIP6_ONLY6, 1452),
        reason: "tx_icmp_too_big",
      },
      {
        description: "1453 bytes to IPv6 backends: PTB with MTU 1452",
        input: sized(1453, VIP6_ONLY6),
        verdict: XDP.TX,
        output: ptbFrame(sized(1453, VIP6_ONLY6), VIP6_ONLY6, 1452),
        reason: "tx_icmp_too_big",
      },
      {
        description: "1452 bytes to IPv6 backends: fits once encapsulated (1500), sent",
        input: sized(1452, VIP6_ONLY6),
        verdict: XDP.TX,
        output: expectEncap6(sized(1452, VIP6_ONLY6)),
        reason: "tx_new",
        also: ["flow_shared"],
      },
      {
        description: "1473 bytes to IPv4 backends: PTB with MTU 1472 (1500 − 28)",
        input: sized(1473, VIP6_ONLY4),
        verdict: XDP.TX,
        output: ptbFrame(sized(1473, VIP6_ONLY4), VIP6_ONLY4, 1472),
        reason: "tx_icmp_too_big",
      },
      {
        description: "1472 bytes to IPv4 backends: fits, sent over outer IPv4",
        input: sized(1472, VIP6_ONLY4),
        verdict: XDP.TX,
        output: expectEncap6(sized(1472, VIP6_ONLY4)),
        reason: "tx_new",
        also: ["flow_shared"],
      },
      {
        description: "oversize UDP gets PTB too (IPv6 has no DF: never fragmented on the path)",
        input: udpFrame6(CLIENT6, VIP6, 5353, 53, new Uint8Array(1460)),
        verdict: XDP.TX,
        output: null,
        reason: "tx_icmp_too_big",
      },
      {
        description: "oversize from a multicast source: dropped, no ICMPv6 (RFC 4443 2.4 e)",
        input: sized(1500, VIP6_ONLY6, 45001, "ff02::1"),
        verdict: XDP.DROP,
        output: null,
        reason: "drop_martian",
      },
      {
        description: "an ICMPv6 error too big once encapsulated: dropped (no error about an error)",
        input: ptb(
          tcpFrame6(VIP6, CLIENT6, { sport: 80, dport: 1, payload: new Uint8Array(1400) }).subarray(
            14,
          ),
          { quoteLen: 1440 },
        ),
        verdict: XDP.DROP,
        output: null,
        reason: "drop_too_big",
      },
    ];
    for (const f of cases) {
      await t.step(f.description, () => {
        const r = runFixture6(dp, f, run);
        if (f.reason === "tx_icmp_too_big") {
          strictEqual(l4ChecksumOk6(r.data), true, "ICMPv6 checksum verifies");
          strictEqual(r.data.length, 14 + 40 + 8 + 48, "IPv6 header + 8 bytes quoted");
        }
      });
    }
  },
);
