/**
 * ICMP errors to the owning backend (docs/contracts.md "ICMP errors to the owning backend")
 * through BPF_PROG_TEST_RUN: a router's fragmentation-needed or time-exceeded about a backend's
 * DSR reply (VIP → client) reaches the LB; the quote read backwards names the forward flow, whose
 * backend (flow map, else Maglev) gets the whole ICMP message encapsulated like the flow's own
 * packets, and no flow is made. Malformed quotes and anything not about a frontend pass as before;
 * the backend's decap delivers the ICMP message.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { DecapDatapath, FLOW_F_PEER, TC_ACT, testRun } from "../../node/bpf/mod.ts";
import {
  cat,
  eth,
  hex,
  icmpErrorFrame,
  inetChecksum,
  ipv4,
  MAC,
  tcpFrame,
  udpFrame,
} from "../../lab/packets.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import {
  checkFixture,
  CLIENT,
  expectEncap,
  type Fixture,
  type Flow,
  flowHash,
  openFixtureLb,
  TABLE5,
  VIP,
  VIP_CLIENT_IP,
  XDP,
} from "./hostile_setup.ts";

const ROUTER = "10.9.0.1";
const PEER_BACKEND = "10.2.0.77";
const bulk = new Uint8Array(1400).fill(0x5a);

/** A backend's DSR reply VIP:80 → client:sport (the packet a router complains about). */
const reply = (sport: number, vip = VIP, vport = 80) =>
  tcpFrame(vip, CLIENT, { sport: vport, dport: sport, flags: 0x10, payload: bulk }).subarray(14);
/** The forward flow a reply answers. */
const forward = (sport: number, vip = VIP, dport = 80, proto = 6): Flow => ({
  saddr: CLIENT,
  daddr: vip,
  sport,
  dport,
  proto,
});
/** Router → the quote's source (the VIP) fragmentation needed (next-hop MTU 1280). */
const fragNeeded = (quote: Uint8Array, quoteLen?: number) =>
  icmpErrorFrame(ROUTER, quote.subarray(12, 16).join("."), {
    type: 3,
    code: 4,
    mtu: 1280,
    quote,
    quoteLen,
  });

const passed = (description: string, input: Uint8Array, reason: Fixture["reason"]): Fixture => ({
  description,
  input,
  verdict: XDP.PASS,
  output: "unchanged",
  reason,
});
const sent = (description: string, input: Uint8Array, output: Uint8Array): Fixture => ({
  description,
  input,
  verdict: XDP.TX,
  output,
  reason: "tx_icmp_to_backend",
});

/** `frame` with byte `at` set to `value` (IP checksums left as they are). */
function poke(frame: Uint8Array, at: number, value: number): Uint8Array {
  const f = frame.slice();
  f[at] = value;
  return f;
}

/** Offset of the quoted IPv4 header in an ICMP error frame. */
const Q = 14 + 20 + 8;

const FIXTURES: Fixture[] = [
  sent(
    "frag-needed, flow map miss: to Maglev's pick for the forward flow, no flow made",
    fragNeeded(reply(40000)),
    expectEncap(fragNeeded(reply(40000)), forward(40000)),
  ),
  sent(
    "frag-needed quoting 548 bytes (as Linux routers do): the whole message encapsulated",
    fragNeeded(reply(40001), 548),
    expectEncap(fragNeeded(reply(40001), 548), forward(40001)),
  ),
  sent(
    "time exceeded (type 11): to Maglev's pick",
    icmpErrorFrame(ROUTER, VIP, { type: 11, code: 0, quote: reply(40002) }),
    expectEncap(
      icmpErrorFrame(ROUTER, VIP, { type: 11, code: 0, quote: reply(40002) }),
      forward(40002),
    ),
  ),
  sent(
    "host unreachable (type 3 code 1): to Maglev's pick",
    icmpErrorFrame(ROUTER, VIP, { type: 3, code: 1, quote: reply(40003) }),
    expectEncap(
      icmpErrorFrame(ROUTER, VIP, { type: 3, code: 1, quote: reply(40003) }),
      forward(40003),
    ),
  ),
  (() => {
    const quote = udpFrame(VIP, CLIENT, 53, 5353, bulk).subarray(14);
    return sent(
      "frag-needed about a UDP service's reply: to its pick",
      fragNeeded(quote),
      expectEncap(fragNeeded(quote), forward(5353, VIP, 53, 17)),
    );
  })(),
  sent(
    "client-ip service: keyed and hashed by the client address alone",
    fragNeeded(reply(41234, VIP_CLIENT_IP)),
    expectEncap(fragNeeded(reply(41234, VIP_CLIENT_IP)), forward(41234, VIP_CLIENT_IP), {
      table: TABLE5,
      mode: "client-ip",
    }),
  ),
  // malformed quotes: passed (the kernel discards them), counted apart
  passed(
    "quote cut after the quoted IP header + 2 bytes",
    fragNeeded(reply(40010)).subarray(0, Q + 22),
    "pass_icmp_bad_quote",
  ),
  passed(
    "quote shorter than IP header + 8 in the IP length (trailer holds the rest)",
    (() => {
      const f = fragNeeded(reply(40011)).slice();
      const v = new DataView(f.buffer);
      v.setUint16(14 + 2, 20 + 8 + 24); // outer tot_len: the quote ends after 24 bytes
      v.setUint16(14 + 10, 0);
      v.setUint16(14 + 10, inetChecksum(f.subarray(14, 34)));
      return f;
    })(),
    "pass_icmp_bad_quote",
  ),
  passed(
    "outer IP total length beyond the frame",
    (() => {
      const f = fragNeeded(reply(40012)).slice();
      const v = new DataView(f.buffer);
      v.setUint16(14 + 2, 1000);
      v.setUint16(14 + 10, 0);
      v.setUint16(14 + 10, inetChecksum(f.subarray(14, 34)));
      return f;
    })(),
    "pass_icmp_bad_quote",
  ),
  passed(
    "quoted header with options (IHL 6)",
    poke(fragNeeded(reply(40013)), Q, 0x46),
    "pass_icmp_bad_quote",
  ),
  passed(
    "quoted header of version 6",
    poke(fragNeeded(reply(40014)), Q, 0x65),
    "pass_icmp_bad_quote",
  ),
  passed(
    "quoted packet a later fragment (ports are payload)",
    poke(fragNeeded(reply(40015)), Q + 7, 0xb9),
    "pass_icmp_bad_quote",
  ),
  // not about a frontend's flow: passed as before
  passed(
    "quoted protocol ICMP (an echo reply from the VIP)",
    fragNeeded(
      cat(
        ipv4({ src: VIP, dst: CLIENT, proto: 1, payloadLen: 8 }),
        new Uint8Array([0, 0, 0xff, 0xff, 0, 0, 0, 0]),
      ),
    ),
    "pass_icmp",
  ),
  passed("quoted protocol GRE", poke(fragNeeded(reply(40016)), Q + 9, 47), "pass_icmp"),
  passed(
    "error sent to another address than the quote's source (the VIP)",
    icmpErrorFrame(ROUTER, "10.0.100.9", { type: 3, code: 4, mtu: 1280, quote: reply(40017) }),
    "pass_icmp",
  ),
  passed(
    "quote from the VIP but a port with no service",
    fragNeeded(reply(40018, VIP, 8080)),
    "pass_icmp",
  ),
  passed(
    "frag-needed to the LB node's own address about its own connection",
    fragNeeded(
      tcpFrame("10.1.1.2", ROUTER, { sport: 179, dport: 50000, payload: bulk }).subarray(14),
    ),
    "pass_icmp",
  ),
  passed(
    "ICMP echo request to the VIP (unchanged behaviour)",
    cat(
      eth(0x0800),
      ipv4({ src: CLIENT, dst: VIP, proto: 1, payloadLen: 8 }),
      new Uint8Array([8, 0, 0xf7, 0xff, 0, 0, 0, 0]),
    ),
    "pass_icmp",
  ),
  passed(
    "ICMP header cut to 4 bytes",
    cat(
      eth(0x0800),
      ipv4({ src: ROUTER, dst: VIP, proto: 1, payloadLen: 4, fragOff: 0 }),
      new Uint8Array([3, 4, 0, 0]),
    ),
    "pass_truncated",
  ),
  // hostile ICMP about a frontend: dropped like hostile data
  {
    description: "frag-needed from a loopback source",
    input: icmpErrorFrame("127.0.0.1", VIP, { type: 3, code: 4, mtu: 1280, quote: reply(40020) }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_martian",
  },
  {
    description: "frag-needed with a bad outer IP checksum",
    input: poke(fragNeeded(reply(40021)), 25, fragNeeded(reply(40021))[25]! ^ 0x10),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_csum",
  },
  {
    description: "frag-needed to the broadcast MAC",
    input: cat(
      eth(0x0800, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff], MAC.router),
      fragNeeded(reply(40022)).subarray(14),
    ),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_l2_group_dst",
  },
];

rootTest("ICMP errors to a frontend's flow: encapsulated to the owning backend", async (t) => {
  using dp = await openFixtureLb();
  for (const f of FIXTURES) {
    await t.step(f.description, () => {
      checkFixture(dp, f);
      strictEqual([...dp.flowTable().entries()].length, 0, "flow map stays empty");
    });
  }

  await t.step("frag-needed, flow map hit: to the flow's backend, not Maglev's pick", () => {
    const { key } = flowHash(forward(40100));
    const value = { backend: parseIpv4(PEER_BACKEND), flags: FLOW_F_PEER, lastSeenNs: 7 };
    dp.flowTable().put(key, value);
    const input = fragNeeded(reply(40100));
    checkFixture(
      dp,
      sent("", input, expectEncap(input, forward(40100), { backend: PEER_BACKEND })),
    );
    deepStrictEqual(dp.flowTable().get(key), value, "the flow entry is not touched");
    dp.flowTable().delete(key);
  });

  await t.step("client-ip flow map hit: any client port finds the client's backend", () => {
    const { key } = flowHash(forward(0, VIP_CLIENT_IP), "client-ip");
    dp.flowTable().put(key, { backend: parseIpv4(PEER_BACKEND), flags: 0, lastSeenNs: 7 });
    const input = fragNeeded(reply(42000, VIP_CLIENT_IP));
    const output = expectEncap(input, forward(42000, VIP_CLIENT_IP), {
      mode: "client-ip",
      backend: PEER_BACKEND,
    });
    checkFixture(dp, sent("", input, output));
    dp.flowTable().delete(key);
  });

  await t.step("the backend's decap delivers the ICMP message as the router sent it", async () => {
    using decap = await DecapDatapath.open();
    decap.configure({ encapPort: 6080, mssMax: 1432 });
    decap.addLocalVip(VIP);
    const input = fragNeeded(reply(40101), 548);
    const encapsulated = testRun(dp.program, input).data;
    const r = testRun(decap.decap, encapsulated);
    strictEqual(r.retval, TC_ACT.OK);
    strictEqual(hex(r.data.subarray(14)), hex(input.subarray(14)), "the router's ICMP, intact");
    strictEqual(decap.stats().decap, 1n);
  });

  await t.step("no new-flow event for any ICMP message", () => {
    const events: unknown[] = [];
    const reader = dp.subscribe((e) => events.push(e));
    reader.consume();
    deepStrictEqual(events, []);
    return reader.close();
  });
});
