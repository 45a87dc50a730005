/**
 * A packet fuzz of hf_lb's IPv6 path through BPF_PROG_TEST_RUN: well-formed TCP, UDP and ICMPv6
 * frames to the fixtures' v6 frontends, mutated at random (byte flips in the headers, cut short,
 * lengths, next header, martian sources, group MACs), each checked against what the contract
 * allows whatever the input: a verdict of PASS (frame untouched), DROP or TX; a TX is exactly
 * the input behind outer headers whose lengths agree with the inner IPv6 packet — which itself
 * lies inside the frame, has a hop limit and a single-host source — and a flow is only ever made
 * for such a packet. Deterministic (xorshift seed), 30,000 runs.
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { Ipv6Maps, testRun, XDP } from "../../node/bpf/mod.ts";
import { hex } from "../../lab/packets.ts";
import { ipv6Bytes } from "../../lib/ipv6.ts";
import { icmp6ErrorFrame, tcpFrame6, udpFrame6 } from "../../lab/packets6.ts";
import {
  CLIENT6,
  openFixtureLb6,
  VIP6,
  VIP6_CLIENT_IP,
  VIP6_ONLY4,
  VIP6_ONLY6,
} from "./ipv6_setup.ts";

const RUNS = 30_000;
const MARTIANS = ["::", "::1", "ff02::1", "::ffff:10.0.0.1"];

function xorshift(state: { s: number }): number {
  let x = state.s;
  x ^= x << 13;
  x >>>= 0;
  x ^= x >>> 17;
  x ^= x << 5;
  x >>>= 0;
  state.s = x;
  return x;
}

/** A well-formed frame to one of the frontends (or an ICMPv6 error about one's flow). */
function base(r: () => number): Uint8Array {
  const vip = [VIP6, VIP6_CLIENT_IP, VIP6_ONLY4, VIP6_ONLY6][r() % 4]!;
  const sport = 1024 + (r() % 2000);
  const payload = new Uint8Array(r() % 64);
  switch (r() % 4) {
    case 0:
      return tcpFrame6(CLIENT6, vip, {
        sport,
        dport: 80,
        flags: [0x02, 0x10, 0x18, 0x11][r() % 4],
      });
    case 1:
      return tcpFrame6(CLIENT6, vip, { sport, dport: 80, flags: 0x10, payload });
    case 2:
      return udpFrame6(CLIENT6, VIP6, sport, 53, payload);
    default:
      return icmp6ErrorFrame("2001:db8:ff::1", VIP6, {
        type: 1 + (r() % 3),
        code: 0,
        quote: tcpFrame6(VIP6, CLIENT6, { sport: 80, dport: sport }).subarray(14),
      });
  }
}

/** A random mutation of `f` (a copy). */
function mutate(f: Uint8Array, r: () => number): Uint8Array {
  let out = f.slice();
  const v = new DataView(out.buffer);
  switch (r() % 8) {
    case 0: // flip bytes in the headers
      for (let i = 1 + (r() % 4); i > 0; i--) {
        out[r() % Math.min(out.length, 90)]! ^= 1 << (r() % 8);
      }
      break;
    case 1: // cut short
      out = out.slice(0, 14 + (r() % (out.length - 13)));
      break;
    case 2: // payload length
      v.setUint16(18, r() % 3 ? r() % 200 : r() & 0xffff);
      break;
    case 3: // next header
      out[20] = [0, 6, 17, 44, 58, 59, 60, r() & 0xff][r() % 8]!;
      break;
    case 4: // martian source
      out.set(ipv6Bytes(MARTIANS[r() % MARTIANS.length]!), 22);
      break;
    case 5: // hop limit
      out[21] = r() % 2;
      break;
    case 6: // group MAC
      out[r() % 2 ? 0 : 6]! |= 1;
      break;
    default: // L4 length / data offset
      if (out.length > 60) out[58 + (r() % 8)] = r() & 0xff;
  }
  return out;
}

/** Checks a TX output against its input; returns the inner packet's source bytes. */
function checkTx(input: Uint8Array, out: Uint8Array, what: string): void {
  const o = new DataView(out.buffer, out.byteOffset);
  const outer6 = o.getUint16(12) === 0x86dd;
  const overhead = outer6 ? 48 : 28;
  strictEqual(hex(out.subarray(14 + overhead)), hex(input.subarray(14)), `inner bytes of ${what}`);
  const inner = input.subarray(14);
  const iv = new DataView(inner.buffer, inner.byteOffset);
  const innerLen = 40 + iv.getUint16(4);
  strictEqual(inner[0]! >> 4, 6, `inner is IPv6: ${what}`);
  strictEqual(innerLen <= inner.length, true, `inner packet inside the frame: ${what}`);
  strictEqual(inner[7]! > 0, true, `hop limit > 0: ${what}`);
  strictEqual(inner[8] !== 0xff, true, `source not multicast: ${what}`);
  const udpLen = o.getUint16(14 + (outer6 ? 40 : 20) + 4);
  strictEqual(udpLen, 8 + innerLen, `outer UDP length: ${what}`);
  if (outer6) strictEqual(o.getUint16(18), 8 + innerLen, `outer payload length: ${what}`);
  else strictEqual(o.getUint16(16), 28 + innerLen, `outer total length: ${what}`);
}

rootTest(`IPv6 fuzz: ${RUNS} mutated frames keep the contract`, async () => {
  using dp = await openFixtureLb6();
  const v6 = new Ipv6Maps(dp.object);
  const st = { s: 0x6d2b79f5 };
  const r = () => xorshift(st);
  const verdicts = { pass: 0, drop: 0, tx: 0 };
  for (let i = 0; i < RUNS; i++) {
    const input = mutate(base(r), r);
    const what = `run ${i}: ${hex(input.subarray(0, 70))}`;
    const flowsBefore = i % 1000 === 0 ? [...v6.flows()].length : -1;
    const res = testRun(dp.program, input);
    if (res.retval === XDP.PASS) {
      verdicts.pass++;
      strictEqual(hex(res.data), hex(input), `PASS leaves the frame untouched: ${what}`);
    } else if (res.retval === XDP.DROP) {
      verdicts.drop++;
      if (flowsBefore >= 0) strictEqual([...v6.flows()].length, flowsBefore, `no flow: ${what}`);
    } else {
      strictEqual(res.retval, XDP.TX, `verdict: ${what}`);
      verdicts.tx++;
      checkTx(input, res.data, what);
    }
  }
  for (const { key } of v6.flows()) {
    strictEqual(MARTIANS.includes(key.saddr), false, `a flow from a martian: ${key.saddr}`);
  }
  console.log(JSON.stringify({ level: "info", msg: "ipv6 fuzz", runs: RUNS, ...verdicts }));
  strictEqual(verdicts.tx > RUNS / 10 && verdicts.drop > 0 && verdicts.pass > 0, true);
});
