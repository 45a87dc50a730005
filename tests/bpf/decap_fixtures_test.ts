/**
 * Fixture table for the backend side through BPF_PROG_TEST_RUN (tc): decap of encapsulated
 * frames for a local LB IP, everything else untouched; MSS clamping of SYNs from a local LB IP
 * with the TCP checksum still valid.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import {
  DECAP_REASONS,
  DecapDatapath,
  type DecapReason,
  TC_ACT,
  testRun,
} from "../../node/bpf/mod.ts";
import {
  cat,
  encapsulated,
  eth,
  hex,
  inetChecksum,
  ipv4,
  synOptions,
  tcpFrame,
  udpFrame,
} from "../../lab/packets.ts";

const VIP = "10.0.100.1";
const CLIENT = "10.0.0.1";
const BACKEND = "10.2.0.2";
const enc = (inner: Uint8Array, dport = 6080) =>
  encapsulated(inner, { outerSrc: "10.1.1.2", backend: BACKEND, sport: 0xc123, dport });

/** The frame after decap: the encapsulated frame's Ethernet header + the inner IPv4 packet. */
const decapped = (frame: Uint8Array) => cat(frame.subarray(0, 14), frame.subarray(42));

/** True when the TCP checksum of an Ethernet+IPv4(20)+TCP frame verifies. */
function tcpChecksumOk(frame: Uint8Array): boolean {
  const ip = frame.subarray(14, 34);
  const seg = frame.subarray(34);
  const pseudo = cat(
    ip.subarray(12, 20),
    new Uint8Array([0, 6, seg.length >> 8, seg.length & 0xff]),
  );
  return inetChecksum(cat(pseudo, seg)) === 0;
}

interface Fixture {
  readonly description: string;
  readonly program: "decap" | "mss";
  readonly input: Uint8Array;
  readonly verdict: number;
  readonly output: Uint8Array | "unchanged" | null;
  readonly reason: DecapReason | null;
}

const innerSyn = tcpFrame(CLIENT, VIP, { sport: 40000, dport: 80, options: synOptions(1460) });
const synAck = (mss: number, src = VIP) =>
  tcpFrame(src, CLIENT, { sport: 80, dport: 40000, flags: 0x12, options: synOptions(mss) });
/** The SYN/ACK as it must leave: MSS 1432, checksum recomputed. */
const clamped = synAck(1432);

const FIXTURES: Fixture[] = [
  {
    description: "encapsulated SYN to a local LB IP: outer 28 bytes stripped",
    program: "decap",
    input: enc(innerSyn),
    verdict: TC_ACT.OK,
    output: decapped(enc(innerSyn)),
    reason: "decap",
  },
  {
    description: "encapsulated to an LB IP not on this pod: untouched",
    program: "decap",
    input: enc(tcpFrame(CLIENT, "10.0.100.9", { sport: 1, dport: 80 })),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: "not_local",
  },
  {
    description: "UDP to another port: untouched",
    program: "decap",
    input: enc(innerSyn, 6081),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
  {
    description: "plain TCP to the LB IP (not encapsulated): untouched",
    program: "decap",
    input: innerSyn,
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
  {
    description: "ARP: untouched",
    program: "decap",
    input: cat(eth(0x0806), new Uint8Array(28)),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
  {
    description: "encap port, inner length disagreeing with the outer: dropped",
    program: "decap",
    input: (() => {
      const f = enc(innerSyn);
      new DataView(f.buffer).setUint16(42 + 2, 30);
      return f;
    })(),
    verdict: TC_ACT.SHOT,
    output: null,
    reason: "bad_inner",
  },
  {
    description: "encap port, inner is not IPv4: dropped",
    program: "decap",
    input: cat(
      eth(0x0800),
      ipv4({ src: "10.1.1.2", dst: BACKEND, proto: 17, payloadLen: 48 }),
      udpFrame("10.1.1.2", BACKEND, 0xc000, 6080, new Uint8Array(40)).subarray(34, 42),
      new Uint8Array(40).fill(0x60),
    ),
    verdict: TC_ACT.SHOT,
    output: null,
    reason: "bad_inner",
  },
  {
    description: "SYN/ACK from the LB IP with MSS 1460: clamped to 1432, checksum fixed",
    program: "mss",
    input: synAck(1460),
    verdict: TC_ACT.OK,
    output: clamped,
    reason: "mss_clamped",
  },
  {
    description: "SYN/ACK from the LB IP with MSS 1400: untouched",
    program: "mss",
    input: synAck(1400),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: "mss_ok",
  },
  {
    description: "SYN/ACK from another address: untouched",
    program: "mss",
    input: synAck(1460, "10.2.0.2"),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
  {
    description: "ACK from the LB IP (not a SYN): untouched",
    program: "mss",
    input: tcpFrame(VIP, CLIENT, { sport: 80, dport: 40000, flags: 0x10 }),
    verdict: TC_ACT.OK,
    output: "unchanged",
    reason: null,
  },
  {
    description: "MSS after NOPs and timestamps: found and clamped",
    program: "mss",
    input: tcpFrame(VIP, CLIENT, {
      sport: 80,
      dport: 40000,
      flags: 0x12,
      options: new Uint8Array([1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 2, 4, 0x05, 0xb4, 1, 3, 3, 7]),
    }),
    verdict: TC_ACT.OK,
    output: tcpFrame(VIP, CLIENT, {
      sport: 80,
      dport: 40000,
      flags: 0x12,
      options: new Uint8Array([1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 2, 4, 0x05, 0x98, 1, 3, 3, 7]),
    }),
    reason: "mss_clamped",
  },
];

rootTest("decap and MSS clamp fixtures through BPF_PROG_TEST_RUN", async (t) => {
  using dp = await DecapDatapath.open();
  dp.configure({ encapPort: 6080, mssMax: 1432 });
  dp.addLocalVip(VIP);
  for (const f of FIXTURES) {
    await t.step(f.description, () => {
      const before = dp.stats();
      const r = testRun(f.program === "decap" ? dp.decap : dp.mssClamp, f.input);
      const after = dp.stats();
      strictEqual(r.retval, f.verdict, "verdict");
      if (f.output === "unchanged") strictEqual(hex(r.data), hex(f.input), "frame untouched");
      else if (f.output !== null) strictEqual(hex(r.data), hex(f.output), "output frame");
      if (f.program === "mss") strictEqual(tcpChecksumOk(r.data), true, "TCP checksum verifies");
      const moved = DECAP_REASONS.filter((n) => after[n] !== before[n]);
      deepStrictEqual(moved, f.reason === null ? [] : [f.reason], "reason counters");
    });
  }
});
