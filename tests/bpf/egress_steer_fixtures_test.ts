/**
 * Fixture table for client steering's programs (bpf/egress_steer_tc.c) through
 * BPF_PROG_TEST_RUN (tc): the node side encapsulates a steered client's packets to its
 * destinations for the owner and leaves everything else alone, drops them while no owner is
 * known, and clamps the MSS of SYN/ACKs coming back; the NAT pod side decapsulates only packets
 * for itself from its sources.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { TC_ACT, testRun } from "../../node/bpf/mod.ts";
import { STEER_PORT, STEER_REASONS, SteerDatapath } from "../../node/egress_steer/datapath.ts";
import { cat, hex, inetChecksum, ipv4, synOptions, tcpFrame } from "../../lab/packets.ts";

const CLIENT = "10.244.1.2", ORPHAN = "10.244.1.3", OTHER = "10.244.1.9";
const OWNER = "10.244.3.2", SERVER = "198.18.0.1";

/** What hf_steer_encap must make of `frame`: outer IPv4 (DF as the inner) + UDP (port sport). */
function steered(frame: Uint8Array, sport: number, dst = OWNER): Uint8Array {
  const inner = frame.subarray(14);
  const len = new DataView(inner.buffer, inner.byteOffset).getUint16(2);
  const df = new DataView(inner.buffer, inner.byteOffset).getUint16(6) & 0x4000;
  const ip = ipv4({
    src: ipText(inner, 12),
    dst,
    proto: 17,
    payloadLen: 8 + len,
    id: 0,
    fragOff: df,
    ttl: 64,
    tos: inner[1] ?? 0,
  });
  const u = new Uint8Array(8);
  const v = new DataView(u.buffer);
  v.setUint16(0, sport);
  v.setUint16(2, STEER_PORT);
  v.setUint16(4, 8 + len);
  return cat(frame.subarray(0, 14), ip, u, inner);
}

function ipText(b: Uint8Array, o: number): string {
  return `${b[o]}.${b[o + 1]}.${b[o + 2]}.${b[o + 3]}`;
}

/** True when the TCP checksum of an Ethernet+IPv4(20)+TCP frame verifies. */
function tcpChecksumOk(frame: Uint8Array): boolean {
  const ip = frame.subarray(14, 34);
  const seg = frame.subarray(34);
  const pseudo = cat(
    ip.subarray(12, 20),
    new Uint8Array([0, 6, seg.length >> 8, seg.length & 255]),
  );
  return inetChecksum(cat(pseudo, seg)) === 0;
}

const syn = (src = CLIENT, dst = SERVER) =>
  tcpFrame(src, dst, { sport: 40000, dport: 8080, options: synOptions(1460) });
const synAck = (mss: number, src = SERVER, dst = CLIENT) =>
  tcpFrame(src, dst, { sport: 8080, dport: 40000, flags: 0x12, options: synOptions(mss) });

rootTest("egress steering fixtures through BPF_PROG_TEST_RUN", async (t) => {
  using dp = SteerDatapath.open();
  dp.setOwner(5, OWNER, 7);
  dp.setDestination(5, "198.18.0.0/24", true);
  dp.setClient(CLIENT, 5);
  dp.setOwner(6, null);
  dp.setDestination(6, "198.18.0.0/24", true);
  dp.setClient(ORPHAN, 6);
  dp.setSelf(OWNER);
  dp.addSource("10.244.1.0/30");

  const run = (prog: "encap" | "decap" | "clamp", input: Uint8Array) => {
    const before = dp.stats();
    const r = testRun(dp[prog], input);
    const after = dp.stats();
    return { ...r, moved: STEER_REASONS.filter((n) => after[n] !== before[n]) };
  };

  let encapsulated: Uint8Array = new Uint8Array();
  await t.step("encap: a steered client's SYN to a destination goes to the owner", () => {
    const input = syn();
    const r = run("encap", input);
    strictEqual(r.retval, TC_ACT.OK);
    const sport = new DataView(r.data.buffer, r.data.byteOffset).getUint16(34);
    strictEqual(sport >= 0xc000, true, `source port ${sport} in 0xc000..0xffff`);
    strictEqual(hex(r.data), hex(steered(input, sport)), "outer IPv4 + UDP, inner intact");
    strictEqual(inetChecksum(r.data.subarray(14, 34)), 0, "outer IPv4 checksum verifies");
    deepStrictEqual(r.moved, ["encap"]);
    encapsulated = r.data;
  });
  for (
    const [what, input] of [
      ["not a destination", syn(CLIENT, "10.0.0.1")],
      ["not a steered client", syn(OTHER)],
      ["not IPv4 (ARP)", cat(new Uint8Array(12), new Uint8Array([8, 6]), new Uint8Array(28))],
    ] as const
  ) {
    await t.step(`encap: ${what}: untouched`, () => {
      const r = run("encap", input);
      strictEqual(r.retval, TC_ACT.OK);
      strictEqual(hex(r.data), hex(input));
      deepStrictEqual(r.moved, []);
    });
  }
  await t.step("encap: a client whose address has no owner yet: dropped", () => {
    const r = run("encap", syn(ORPHAN));
    strictEqual(r.retval, TC_ACT.SHOT);
    deepStrictEqual(r.moved, ["no_owner"]);
  });

  await t.step("decap: for this pod, from a source: outer 28 bytes stripped", () => {
    const r = run("decap", encapsulated);
    strictEqual(r.retval, TC_ACT.OK);
    strictEqual(hex(r.data), hex(syn()));
    deepStrictEqual(r.moved, ["decap"]);
  });
  await t.step("decap: inner source not among the pod's sources: dropped", () => {
    const r = run("decap", steered(syn("10.244.7.7"), 0xc001));
    strictEqual(r.retval, TC_ACT.SHOT);
    deepStrictEqual(r.moved, ["not_source"]);
  });
  await t.step("decap: inner length disagreeing with the outer: dropped", () => {
    const f = steered(syn(), 0xc001);
    new DataView(f.buffer).setUint16(42 + 2, 30);
    const r = run("decap", f);
    strictEqual(r.retval, TC_ACT.SHOT);
    deepStrictEqual(r.moved, ["bad_inner"]);
  });
  for (
    const [what, input] of [
      ["to another pod", steered(syn(), 0xc001, "10.244.2.2")],
      [
        "to another port",
        (() => {
          const f = steered(syn(), 0xc001);
          new DataView(f.buffer).setUint16(36, 6080);
          return f;
        })(),
      ],
      ["plain traffic", syn()],
    ] as const
  ) {
    await t.step(`decap: ${what}: untouched`, () => {
      const r = run("decap", input);
      strictEqual(r.retval, TC_ACT.OK);
      strictEqual(hex(r.data), hex(input));
      deepStrictEqual(r.moved, []);
    });
  }

  await t.step("clamp: SYN/ACK from a destination to a steered client: MSS 1432", () => {
    const r = run("clamp", synAck(1460));
    strictEqual(r.retval, TC_ACT.OK);
    strictEqual(hex(r.data), hex(synAck(1432)));
    strictEqual(tcpChecksumOk(r.data), true, "TCP checksum verifies");
    deepStrictEqual(r.moved, ["mss_clamped"]);
  });
  for (
    const [what, input] of [
      ["MSS already small", synAck(1400)],
      ["from a non-destination", synAck(1460, "10.0.0.1")],
      ["to a client not steered", synAck(1460, SERVER, OTHER)],
      ["an ACK", tcpFrame(SERVER, CLIENT, { sport: 8080, dport: 40000, flags: 0x10 })],
    ] as const
  ) {
    await t.step(`clamp: ${what}: untouched`, () => {
      const r = run("clamp", input);
      strictEqual(r.retval, TC_ACT.OK);
      strictEqual(hex(r.data), hex(input));
      deepStrictEqual(r.moved, []);
    });
  }
});
