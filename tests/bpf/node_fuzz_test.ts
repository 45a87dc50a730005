/**
 * A packet fuzz of the node side (bpf/node_tc.c) through BPF_PROG_TEST_RUN: well-formed
 * encapsulated client packets (IPv4 and IPv6; TCP, UDP, ICMP errors) for a served frontend and
 * pod replies of recorded flows, mutated at random (bit flips in the headers, cut short, lengths),
 * each checked against what the node side may do whatever the input: a verdict of OK or SHOT; an
 * OK frame either untouched or exactly the translation — the outer headers gone, the inner
 * packet's destination the outer destination (the pod: never another address) and only the
 * address, port and checksum fields changed, an IPv4 header checksum valid after if and only if
 * it was before; a reply either untouched or given the LB IP and port of its flow with only the
 * source, checksum and MSS fields changed. Deterministic (xorshift seed), 20,000 runs each way.
 */

import { ok, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { BpfError, NodeDatapath, PROTO, TC_ACT, testRun } from "../../node/bpf/mod.ts";
import {
  hex,
  icmpErrorFrame,
  inetChecksum,
  synOptions,
  tcpFrame,
  udpFrame,
} from "../../lab/packets.ts";
import { encapsulatedAny, icmp6ErrorFrame, tcpFrame6, udpFrame6 } from "../../lab/packets6.ts";
import { ipv4Bytes } from "../../lib/ipv4.ts";
import { ipv6Bytes } from "../../lib/ipv6.ts";

const RUNS = 20_000;
const VIP = "10.0.100.1", CLIENT = "10.0.0.1", POD = "10.2.0.5";
const VIP6 = "2001:db8:100::1", CLIENT6 = "2001:db8:a::1", POD6 = "2001:db8:2::5";

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

const enc = (inner: Uint8Array, pod: string) =>
  encapsulatedAny(inner, {
    outerSrc: pod.includes(":") ? "2001:db8:1::2" : "10.1.1.2",
    backend: pod,
    sport: 0xc123,
    dport: 6080,
    hash: 7,
  });

/** A well-formed encapsulated packet for a served frontend. */
function inbound(r: () => number): Uint8Array {
  const sport = 1024 + (r() % 64);
  const payload = new Uint8Array(r() % 48);
  const v6 = r() % 2 === 1;
  const [client, vip, pod] = v6 ? [CLIENT6, VIP6, POD6] : [CLIENT, VIP, POD];
  const tcpF = v6 ? tcpFrame6 : tcpFrame;
  switch (r() % 4) {
    case 0:
      return enc(tcpF(client, vip, { sport, dport: 80, options: synOptions(1460) }), pod);
    case 1:
      return enc(tcpF(client, vip, { sport, dport: 80, flags: 0x18, payload }), pod);
    case 2:
      return enc((v6 ? udpFrame6 : udpFrame)(client, vip, sport, 53, payload), pod);
    default: {
      const quoted = tcpF(vip, client, { sport: 80, dport: sport }).subarray(14);
      return enc(
        v6
          ? icmp6ErrorFrame("2001:db8:ff::1", vip, { type: 2, code: 0, mtu: 1400, quote: quoted })
          : icmpErrorFrame("10.9.0.1", vip, { type: 3, code: 4, mtu: 1400, quote: quoted }),
        pod,
      );
    }
  }
}

/** A pod's reply of a flow recorded by `inbound` (or of none). */
function outbound(r: () => number): Uint8Array {
  const dport = 1024 + (r() % 64);
  const v6 = r() % 2 === 1;
  const [client, pod] = v6 ? [CLIENT6, POD6] : [CLIENT, POD];
  if (r() % 3 === 0) {
    return (v6 ? udpFrame6 : udpFrame)(pod, client, 5353, dport, new Uint8Array(r() % 32));
  }
  return (v6 ? tcpFrame6 : tcpFrame)(pod, client, {
    sport: 8080,
    dport,
    flags: r() % 2 ? 0x12 : 0x10,
    options: r() % 2 ? synOptions(1460) : undefined,
  });
}

function mutate(f: Uint8Array, r: () => number): Uint8Array {
  if (r() % 4 === 0) return f.slice(); // some unmutated, so translations happen
  let out = f.slice();
  switch (r() % 3) {
    case 0:
      for (let i = 1 + (r() % 3); i > 0; i--) {
        out[r() % Math.min(out.length, 120)]! ^= 1 << (r() % 8);
      }
      break;
    case 1:
      out = out.slice(0, 14 + (r() % (out.length - 13)));
      break;
    default: { // a length field of the outer or inner header
      const at = [16, 18, 38, 46, 44, 66][r() % 6]!;
      if (at + 2 <= out.length) {
        new DataView(out.buffer).setUint16(at, r() % 3 ? r() % 200 : r() & 0xffff);
      }
    }
  }
  return out;
}

/** Offsets where `a` and `b` (same length) differ. */
function diffs(a: Uint8Array, b: Uint8Array): number[] {
  const d: number[] = [];
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) d.push(i);
  return d;
}
const within = (d: number[], ranges: [number, number][]) =>
  d.every((i) => ranges.some(([lo, hi]) => i >= lo && i < hi));
/** testRun, or null when the kernel refuses the frame before the program runs (EINVAL: a frame
 * too short for the skb test harness). */
function tryRun(prog: Parameters<typeof testRun>[0], frame: Uint8Array) {
  try {
    return testRun(prog, frame);
  } catch (e) {
    if (e instanceof BpfError && e.errno === 22) return null;
    throw e;
  }
}
const ipv4CsumOk = (f: Uint8Array, at: number) => inetChecksum(f.subarray(at, at + 20)) === 0;

rootTest("node side fuzz: translated exactly or left alone, never mis-forwarded", async (t) => {
  using dp = await NodeDatapath.open({ pinDir: null });
  dp.configure({ encapPort: 6080, mssMax: 1432 });
  for (const [pod, vip] of [[POD, VIP], [POD6, VIP6]]) {
    dp.setFrontend({ pod: pod!, vip: vip!, port: 80, proto: PROTO.TCP, targetPort: 8080 });
    dp.setFrontend({ pod: pod!, vip: vip!, port: 53, proto: PROTO.UDP, targetPort: 5353 });
  }
  const state = { s: 0x9e3779b9 };
  const r = () => xorshift(state);

  await t.step(`hf_node_in: ${RUNS} mutated encapsulated packets`, () => {
    let translated = 0;
    for (let run = 0; run < RUNS; run++) {
      const input = mutate(inbound(r), r);
      const res = tryRun(dp.nodeIn, input);
      if (res === null) continue;
      const why = `run ${run}: ${hex(input)}`;
      ok(res.retval === TC_ACT.OK || res.retval === TC_ACT.SHOT, `verdict ${res.retval}, ${why}`);
      if (res.retval !== TC_ACT.OK || hex(res.data) === hex(input)) continue;
      translated++;
      const v6 = input[12] === 0x86;
      const overhead = v6 ? 48 : 28;
      strictEqual(res.data.length, input.length - overhead, why);
      strictEqual(hex(res.data.subarray(0, 14)), hex(input.subarray(0, 14)), `MACs kept, ${why}`);
      const inner = input.subarray(14 + overhead), out = res.data.subarray(14);
      const d = diffs(inner, out);
      if (!v6) {
        // The new destination is the outer one: the pod.
        strictEqual(hex(out.subarray(16, 20)), hex(input.subarray(14 + 16, 14 + 20)), why);
        strictEqual(hex(out.subarray(16, 20)), hex(ipv4Bytes(POD)), why);
        const l4 = inner[9] === 1
          ? [[22, 24], [38, 44], [48, 50]] // ICMP csum; quoted csum and source; quoted sport
          : [[22, 24], inner[9] === 6 ? [36, 38] : [26, 28]]; // dport; L4 csum
        ok(within(d, [[10, 12], [16, 20], ...(l4 as [number, number][])]), `changed ${d}: ${why}`);
        strictEqual(ipv4CsumOk(out, 0), ipv4CsumOk(inner, 0), `IP checksum kept valid, ${why}`);
      } else {
        strictEqual(hex(out.subarray(24, 40)), hex(input.subarray(14 + 24, 14 + 40)), why);
        strictEqual(hex(out.subarray(24, 40)), hex(ipv6Bytes(POD6)), why);
        const l4: [number, number][] = inner[6] === 58
          ? [[42, 44], [48 + 8, 48 + 24], [88, 90]] // ICMPv6 csum; quoted src; quoted sport
          : [[42, 44], inner[6] === 6 ? [56, 58] : [46, 48]];
        ok(within(d, [[24, 40], ...l4]), `changed ${d}: ${why}`);
      }
    }
    ok(translated > RUNS / 10, `translations exercised: ${translated}`);
  });

  await t.step(`hf_node_out: ${RUNS} mutated replies`, () => {
    let translated = 0;
    for (let run = 0; run < RUNS; run++) {
      // Record the flow the reply may belong to, then mutate the reply.
      const reply = outbound(r);
      const v6 = reply[12] === 0x86;
      const l4 = v6 ? 54 : 34;
      const v = new DataView(reply.buffer);
      const [sport, dport, proto] = [v.getUint16(l4), v.getUint16(l4 + 2), reply[v6 ? 20 : 23]!];
      const [client, vip, pod] = v6 ? [CLIENT6, VIP6, POD6] : [CLIENT, VIP, POD];
      const fwd = proto === 6
        ? (v6 ? tcpFrame6 : tcpFrame)(client, vip, { sport: dport, dport: 80, flags: 0x10 })
        : (v6 ? udpFrame6 : udpFrame)(client, vip, dport, 53, new Uint8Array(4));
      strictEqual(testRun(dp.nodeIn, enc(fwd, pod)).retval, TC_ACT.OK);
      const input = mutate(reply, r);
      const res = tryRun(dp.nodeOut, input);
      if (res === null) continue;
      const why = `run ${run} (sport ${sport}): ${hex(input)}`;
      ok(res.retval === TC_ACT.OK || res.retval === TC_ACT.SHOT, `verdict ${res.retval}, ${why}`);
      if (res.retval !== TC_ACT.OK || hex(res.data) === hex(input)) continue;
      translated++;
      strictEqual(res.data.length, input.length, why);
      const d = diffs(input, res.data);
      if (!v6) {
        strictEqual(
          hex(res.data.subarray(26, 30)),
          hex(ipv4Bytes(VIP)),
          `source is the LB IP, ${why}`,
        );
        ok(within(d, [[24, 30], [34, 36], [50, 52], [40, 42], [54, 94]]), `changed ${d}: ${why}`);
        strictEqual(ipv4CsumOk(res.data, 14), ipv4CsumOk(input, 14), `IP checksum, ${why}`);
      } else {
        strictEqual(
          hex(res.data.subarray(22, 38)),
          hex(ipv6Bytes(VIP6)),
          `source is the LB IP, ${why}`,
        );
        ok(within(d, [[22, 38], [54, 56], [70, 72], [60, 62], [74, 114]]), `changed ${d}: ${why}`);
      }
    }
    ok(translated > RUNS / 10, `translations exercised: ${translated}`);
  });
});
