/**
 * The backend side with IPv6 (docs/contracts.md "IPv6"): hf_decap strips outer IPv6 + UDP (48
 * bytes) as well as outer IPv4 + UDP (28), for an inner IPv4 or IPv6 packet to a local LB IP,
 * and the Ethernet type follows the inner family; hf_mss_clamp lowers the MSS of IPv6 SYNs from a
 * local LB IP to mss_max − 40 with the TCP checksum (IPv6 pseudo-header) still valid. IPv4
 * behaviour: tests/bpf/decap_fixtures_test.ts, unchanged.
 */

import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import {
  DECAP_REASONS,
  DecapDatapath,
  type DecapReason,
  TC_ACT,
  testRun,
} from "../../node/bpf/mod.ts";
import { encodeVip6Key } from "../../node/bpf/structs6.ts";
import { cat, eth, hex, synOptions, tcpFrame } from "../../lab/packets.ts";
import { encapsulatedAny, ETH_P_IPV6, ipv6, l4ChecksumOk6, tcpFrame6 } from "../../lab/packets6.ts";

const VIP6 = "2001:db8:100::1";
const VIP4 = "10.0.100.1";
const CLIENT6 = "2001:db8:a::1";
const enc = (inner: Uint8Array, backend: string, dport = 6080) =>
  encapsulatedAny(inner, {
    outerSrc: backend.includes(":") ? "2001:db8:1::2" : "10.1.1.2",
    backend,
    sport: 0xc123,
    dport,
    hash: 0x12345,
  });
/** After decap: the Ethernet addresses kept, the type of the inner family, the inner packet. */
const decapped = (frame: Uint8Array, overhead: number, type: number) =>
  cat(
    eth(type, Array.from(frame.subarray(0, 6)), Array.from(frame.subarray(6, 12))),
    frame.subarray(14 + overhead),
  );

const innerSyn6 = tcpFrame6(CLIENT6, VIP6, { sport: 40000, dport: 80, options: synOptions(1440) });
const innerSyn4 = tcpFrame("10.0.0.1", VIP4, {
  sport: 40000,
  dport: 80,
  options: synOptions(1460),
});
const synAck6 = (mss: number, src = VIP6, flags = 0x12) =>
  tcpFrame6(src, CLIENT6, { sport: 80, dport: 40000, flags, options: synOptions(mss) });

interface Fixture {
  readonly description: string;
  readonly program: "decap" | "mss";
  readonly input: Uint8Array;
  readonly verdict: number;
  readonly output: Uint8Array | "unchanged" | null;
  readonly reason: DecapReason | null;
}

const BACKEND6 = "2001:db8:2::3";
const BACKEND4 = "10.2.0.2";

const FIXTURES: Fixture[] = [
  {
    description: "outer IPv6 + UDP, inner IPv6 to a local LB IP: 48 bytes stripped",
    program: "decap",
    input: enc(innerSyn6, BACKEND6),
    verdict: TC_ACT.OK,
    output: decapped(enc(innerSyn6, BACKEND6), 48, ETH_P_IPV6),
    reason: "decap",
  },
  {
    description: "outer IPv4 + UDP, inner IPv6 (v6 client, v4 backend): 28 stripped, type IPv6",
    program: "decap",
    input: enc(innerSyn6, BACKEND4),
    verdict: TC_ACT.OK,
    output: decapped(enc(innerSyn6, BACKEND4), 28, ETH_P_IPV6),
    reason: "decap",
  },
  {
    description: "outer IPv6 + UDP, inner IPv4: 48 stripped, type IPv4",
    program: "decap",
    input: enc(innerSyn4, BACKEND6),
    verdict: TC_ACT.OK,
    output: decapped(enc(innerSyn4, BACKEND6), 48, 0x0800),
    reason: "decap",
  },
  {
    description: "outer IPv6, inner IPv6 to an LB IP not on this pod: untouched",
    program: "decap",
    input: enc(tcpFrame6(CLIENT6, "2001:db8:100::9", { sport: 1, dport: 80 }), BACKEND6),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: "not_local",
  },
  {
    description: "outer IPv6 UDP to another port: untouched",
    program: "decap",
    input: enc(innerSyn6, BACKEND6, 6081),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
  {
    description: "plain IPv6 TCP to the LB IP (not encapsulated): untouched",
    program: "decap",
    input: innerSyn6,
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
  {
    description: "outer IPv6 with an extension header before UDP: untouched",
    program: "decap",
    input: (() => {
      const f = enc(innerSyn6, BACKEND6).slice();
      f[20] = 0; // next header: hop-by-hop
      return f;
    })(),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
  {
    description: "outer IPv6, inner payload length disagreeing with the outer: dropped",
    program: "decap",
    input: (() => {
      const f = enc(innerSyn6, BACKEND6).slice();
      new DataView(f.buffer).setUint16(14 + 48 + 4, 12);
      return f;
    })(),
    verdict: TC_ACT.SHOT,
    output: null,
    reason: "bad_inner",
  },
  {
    description: "outer IPv6, inner neither IPv4 nor IPv6: dropped",
    program: "decap",
    input: (() => {
      const f = enc(innerSyn6, BACKEND6).slice();
      f[14 + 48] = 0x50;
      return f;
    })(),
    verdict: TC_ACT.SHOT,
    output: null,
    reason: "bad_inner",
  },
  {
    description: "IPv6 SYN/ACK from the LB IP with MSS 1440: clamped to 1392, checksum fixed",
    program: "mss",
    input: synAck6(1440),
    verdict: TC_ACT.OK,
    output: synAck6(1392),
    reason: "mss_clamped",
  },
  {
    description: "IPv6 SYN/ACK from the LB IP with MSS 1380: untouched",
    program: "mss",
    input: synAck6(1380),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: "mss_ok",
  },
  {
    description: "IPv6 SYN/ACK from another address: untouched",
    program: "mss",
    input: synAck6(1440, "2001:db8:2::3"),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
  {
    description: "IPv6 ACK from the LB IP (not a SYN): untouched",
    program: "mss",
    input: synAck6(1440, VIP6, 0x10),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
  {
    description: "IPv6 SYN with an extension header: untouched (not parsed)",
    program: "mss",
    input: (() => {
      const seg = synAck6(1440).subarray(54);
      const ext = new Uint8Array(8);
      ext[0] = 6;
      return cat(
        eth(ETH_P_IPV6),
        ipv6({ src: VIP6, dst: CLIENT6, nextHeader: 60, payloadLen: 8 + seg.length }),
        ext,
        seg,
      );
    })(),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
];

rootTest("IPv6 decap and MSS clamp fixtures through BPF_PROG_TEST_RUN", async (t) => {
  using dp = await DecapDatapath.open();
  dp.configure({ encapPort: 6080, mssMax: 1432 });
  dp.addLocalVip(VIP4);
  dp.addLocalVip(VIP6); // either family (hf_local_vips6 here): anycast --redirect relies on it
  for (const f of FIXTURES) {
    await t.step(f.description, () => {
      const before = dp.stats();
      const r = testRun(f.program === "decap" ? dp.decap : dp.mssClamp, f.input);
      const after = dp.stats();
      strictEqual(r.retval, f.verdict, "verdict");
      if (f.output === "unchanged") strictEqual(hex(r.data), hex(f.input), "frame untouched");
      else if (f.output !== null) strictEqual(hex(r.data), hex(f.output), "output frame");
      if (f.program === "mss" && f.input[20] === 6) {
        strictEqual(l4ChecksumOk6(r.data), true, "TCP checksum verifies");
      }
      const moved = DECAP_REASONS.filter((n) => after[n] !== before[n]);
      deepStrictEqual(moved, f.reason === null ? [] : [f.reason], "reason counters");
    });
  }
  await t.step("addLocalVip/removeLocalVip take either family; other text is named", () => {
    strictEqual(dp.object.map("hf_local_vips6").lookup(encodeVip6Key(VIP6)) !== null, true);
    strictEqual(dp.removeLocalVip(VIP6), true);
    strictEqual(dp.object.map("hf_local_vips6").lookup(encodeVip6Key(VIP6)), null);
    throws(() => dp.addLocalVip("web.example"), /"web\.example"/);
  });
});
