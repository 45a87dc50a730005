/**
 * Hostile input to a frontend (docs/contracts.md "Hostile input"), each case found by the
 * independent packet fuzz of issue 13, through BPF_PROG_TEST_RUN: dropped and counted under its
 * own reason, never forwarded, never a flow entry; its well-formed neighbour still forwarded. The
 * MTU check: never an ICMP error to a source that cannot be one (RFC 1122 3.2.2), the IP length
 * (not the Ethernet trailer) measured, small device MTUs respected.
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { cat, eth, hex, inetChecksum, ipv4, MAC, tcpFrame, udpFrame } from "../../lab/packets.ts";
import { testRun } from "../../node/bpf/mod.ts";
import {
  checkFixture,
  CLIENT,
  expectEncap,
  type Fixture,
  LB_SRC,
  mtuDevice,
  openFixtureLb,
  VIP,
  XDP,
} from "./hostile_setup.ts";

const payload = new TextEncoder().encode("hello holdfast");
const syn = (src: string, sport: number, ip = {}) =>
  tcpFrame(src, VIP, { sport, dport: 80, flags: 0x02 }, ip);
const dropped = (description: string, input: Uint8Array, reason: Fixture["reason"]): Fixture => ({
  description,
  input,
  verdict: XDP.DROP,
  output: null,
  reason,
});
/** `frame` with its Ethernet addresses replaced. */
const withMacs = (frame: Uint8Array, dst: readonly number[], src: readonly number[]) =>
  cat(eth(0x0800, dst, src), frame.subarray(14));

const BROADCAST = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
const IPV4_MCAST = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01];
const IPV6_MCAST = [0x33, 0x33, 0x00, 0x00, 0x00, 0x01];

/** A UDP header 5353 → 53 whose length field says `len`, with no payload. */
function udpHeader(len: number): Uint8Array {
  const h = new Uint8Array(8);
  const v = new DataView(h.buffer);
  v.setUint16(0, 5353);
  v.setUint16(2, 53);
  v.setUint16(4, len);
  return h;
}

const MARTIANS = [
  "0.0.0.0",
  "0.1.2.3",
  "127.0.0.1",
  "224.0.0.1",
  "239.255.255.250",
  "240.0.0.1",
  "255.255.255.255",
  VIP,
  LB_SRC,
];

const FIXTURES: Fixture[] = [
  dropped(
    "UDP with IP total length 20: the UDP header lies in the Ethernet trailer",
    cat(eth(0x0800), ipv4({ src: CLIENT, dst: VIP, proto: 17, payloadLen: 0 }), udpHeader(0)),
    "drop_bad_length",
  ),
  dropped(
    "UDP length 7 (< 8) agreeing with IP total length 27, one trailer byte",
    cat(
      eth(0x0800),
      ipv4({ src: CLIENT, dst: VIP, proto: 17, payloadLen: 7 }),
      udpHeader(7),
    ),
    "drop_bad_length",
  ),
  ...MARTIANS.map((src, i) =>
    dropped(`martian source ${src}`, syn(src, 40100 + i), "drop_martian")
  ),
  dropped("TTL 0", syn(CLIENT, 40200, { ttl: 0 }), "drop_ttl_zero"),
  dropped(
    "IPv4 header checksum off by one",
    (() => {
      const f = syn(CLIENT, 40201);
      f[25] = f[25]! ^ 1;
      return f;
    })(),
    "drop_bad_csum",
  ),
  dropped(
    "IPv4 header checksum 0 (as if never computed)",
    (() => {
      const f = syn(CLIENT, 40202);
      f[24] = 0;
      f[25] = 0;
      return f;
    })(),
    "drop_bad_csum",
  ),
  dropped(
    "TCP SYN+FIN",
    tcpFrame(CLIENT, VIP, { sport: 40203, dport: 80, flags: 0x03 }),
    "drop_tcp_flags",
  ),
  dropped(
    "TCP SYN+RST",
    tcpFrame(CLIENT, VIP, { sport: 40204, dport: 80, flags: 0x06 }),
    "drop_tcp_flags",
  ),
  dropped(
    "to the broadcast MAC",
    withMacs(syn(CLIENT, 40205), BROADCAST, MAC.router),
    "drop_l2_group_dst",
  ),
  dropped(
    "to an IPv4 multicast MAC",
    withMacs(syn(CLIENT, 40206), IPV4_MCAST, MAC.router),
    "drop_l2_group_dst",
  ),
  dropped(
    "UDP to the broadcast MAC",
    withMacs(udpFrame(CLIENT, VIP, 5353, 53, payload), BROADCAST, MAC.router),
    "drop_l2_group_dst",
  ),
  dropped(
    "from the broadcast MAC",
    withMacs(syn(CLIENT, 40207), MAC.lb, BROADCAST),
    "drop_l2_group_src",
  ),
  dropped(
    "from an IPv6 multicast MAC",
    withMacs(syn(CLIENT, 40208), MAC.lb, IPV6_MCAST),
    "drop_l2_group_src",
  ),
];

/** Well-formed neighbours of the cases above: forwarded as before (each makes one flow). */
const NEIGHBOURS: { description: string; input: Uint8Array; sport: number; proto: number }[] = [
  {
    description: "UDP of IP length 28 (empty payload)",
    input: cat(
      eth(0x0800),
      ipv4({ src: CLIENT, dst: VIP, proto: 17, payloadLen: 8 }),
      (() => {
        const h = udpHeader(8);
        // UDP checksum over the pseudo header + header (no payload)
        const pseudo = cat(
          ipv4({ src: CLIENT, dst: VIP, proto: 17, payloadLen: 8 }).subarray(12, 20),
          new Uint8Array([0, 17, 0, 8]),
        );
        new DataView(h.buffer).setUint16(6, inetChecksum(cat(pseudo, h)) || 0xffff);
        return h;
      })(),
    ),
    sport: 5353,
    proto: 17,
  },
  { description: "TTL 1", input: syn(CLIENT, 40300, { ttl: 1 }), sport: 40300, proto: 6 },
  { description: "source 1.0.0.1", input: syn("1.0.0.1", 40301), sport: 40301, proto: 6 },
  {
    description: "source 223.255.255.254",
    input: syn("223.255.255.254", 40302),
    sport: 40302,
    proto: 6,
  },
  {
    description: "TCP FIN+ACK",
    input: tcpFrame(CLIENT, VIP, { sport: 40303, dport: 80, flags: 0x11 }),
    sport: 40303,
    proto: 6,
  },
];

rootTest("hostile input to a frontend: dropped, counted, no flow entry", async (t) => {
  using dp = await openFixtureLb();
  for (const f of FIXTURES) {
    await t.step(`${f.description}: dropped (${f.reason})`, () => {
      strictEqual([...dp.flowTable().entries()].length, 0, "flow map empty before");
      checkFixture(dp, f);
      strictEqual([...dp.flowTable().entries()].length, 0, "flow map still empty");
    });
  }
  for (const n of NEIGHBOURS) {
    await t.step(`well-formed neighbour, ${n.description}: encapsulated`, () => {
      const v = new DataView(n.input.buffer, n.input.byteOffset);
      const src = n.input.subarray(26, 30).join(".");
      const flow = {
        saddr: src,
        daddr: VIP,
        sport: n.sport,
        dport: v.getUint16(36),
        proto: n.proto,
      };
      strictEqual(v.getUint16(34), n.sport, "fixture's source port");
      const r = testRun(dp.program, n.input);
      strictEqual(r.retval, XDP.TX);
      strictEqual(hex(r.data), hex(expectEncap(n.input, flow)));
    });
  }
});

rootTest("MTU check: IP length not frame length, small MTUs, no ICMP to martians", async (t) => {
  using dp = await openFixtureLb();
  const sized = (ipLen: number, o: { src?: string; fragOff?: number; sport?: number } = {}) =>
    tcpFrame(o.src ?? CLIENT, VIP, {
      sport: o.sport ?? 45000,
      dport: 80,
      flags: 0x10,
      payload: new Uint8Array(ipLen - 40).fill(0xab),
    }, { fragOff: o.fragOff ?? 0x4000 });

  {
    await using dev = await mtuDevice(dp, 1500);
    for (const src of ["0.0.0.0", "255.255.255.255", "224.0.0.5", "127.0.0.1"]) {
      await t.step(`1500-byte DF packet from ${src}: dropped, no ICMP frag-needed sent`, () => {
        checkFixture(dp, dropped("", sized(1500, { src }), "drop_martian"), dev.run);
      });
    }
    await t.step("1500-byte DF packet to the broadcast MAC: dropped, no ICMP", () => {
      const f = withMacs(sized(1500), BROADCAST, MAC.router);
      checkFixture(dp, dropped("", f, "drop_l2_group_dst"), dev.run);
    });
    await t.step("IP 1472 + 60 bytes of Ethernet trailer: fits (1500), encapsulated", () => {
      const input = cat(sized(1472), new Uint8Array(60).fill(0xee));
      const r = dev.run(input);
      strictEqual(r.retval, XDP.TX, "the trailer is no part of the packet");
      const flow = { saddr: CLIENT, daddr: VIP, sport: 45000, dport: 80, proto: 6 };
      strictEqual(hex(r.data), hex(expectEncap(input, flow)));
    });
  }
  {
    // Below 576 + 28: frames under 590 bytes used to skip the check.
    await using dev = await mtuDevice(dp, 552);
    await t.step("device MTU 552, IP 540 with DF: ICMP frag-needed with next-hop MTU 524", () => {
      let out: Uint8Array = new Uint8Array(0);
      const f = {
        ...dropped("", sized(540, { sport: 45001 }), "tx_icmp_too_big"),
        verdict: XDP.TX,
      };
      checkFixture(dp, f, (frame) => {
        const r = dev.run(frame);
        out = r.data;
        return r;
      });
      strictEqual(out[14 + 20], 3, "ICMP type 3");
      strictEqual(out[14 + 21], 4, "code 4");
      strictEqual((out[14 + 26]! << 8) | out[14 + 27]!, 524, "next-hop MTU");
    });
    await t.step("device MTU 552, IP 540 without DF: dropped", () => {
      checkFixture(
        dp,
        dropped("", sized(540, { fragOff: 0, sport: 45002 }), "drop_too_big"),
        dev.run,
      );
    });
    await t.step("device MTU 552, IP 524: exactly fits once encapsulated, sent", () => {
      const input = sized(524, { sport: 45003 });
      const r = dev.run(input);
      strictEqual(r.retval, XDP.TX);
      const flow = { saddr: CLIENT, daddr: VIP, sport: 45003, dport: 80, proto: 6 };
      strictEqual(hex(r.data), hex(expectEncap(input, flow)));
    });
  }
});
