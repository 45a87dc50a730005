import { strictEqual } from "node:assert/strict";
import {
  encapSourcePort,
  flowHashClientIp,
  flowHashFiveTuple,
  jhash1Word,
  jhash3Words,
} from "./flow_hash.ts";
import { loadVectors } from "./vectors.ts";
import { formatIpv4, parseIpv4 } from "../../lib/ipv4.ts";

Deno.test("flow hash reference reproduces every golden vector (both modes)", async () => {
  const { flowHash } = await loadVectors();
  if (flowHash.length < 50) throw new Error(`only ${flowHash.length} flow-hash vectors`);
  for (const v of flowHash) {
    const saddr = parseIpv4(v.saddr);
    const t = { saddr, daddr: parseIpv4(v.daddr), sport: v.sport, dport: v.dport, proto: v.proto };
    strictEqual(flowHashFiveTuple(t, v.seed), v.five_tuple, `five-tuple ${JSON.stringify(v)}`);
    strictEqual(flowHashClientIp(saddr, v.seed), v.client_ip, `client-ip ${JSON.stringify(v)}`);
  }
});

Deno.test("flow hash follows the contract's composition of jhash words", () => {
  const t = { saddr: 0x0a000001, daddr: 0x0a006401, sport: 40000, dport: 80, proto: 6 };
  strictEqual(
    flowHashFiveTuple(t, 7),
    jhash3Words(0x0a000001, 0x0a006401, (40000 * 65536 + 80) >>> 0, 7 ^ 6),
    "five-tuple",
  );
  strictEqual(flowHashClientIp(0x0a000001, 7), jhash1Word(0x0a000001, 7), "client-ip");
});

Deno.test("encap source port stays in 49152..65535", () => {
  for (const h of [0, 1, 0x3fff, 0x4000, 0xffffffff, 123456789]) {
    const p = encapSourcePort(h);
    if (p < 49152 || p > 65535) throw new Error(`port ${p} for hash ${h}`);
    strictEqual(p & 0x3fff, h & 0x3fff, "low bits");
  }
});

Deno.test("IPv4 text round-trips and bad text is refused with the text quoted", () => {
  strictEqual(parseIpv4("10.0.0.1"), 0x0a000001, "10.0.0.1");
  strictEqual(formatIpv4(0xffffffff), "255.255.255.255", "broadcast");
  for (const bad of ["10.0.0", "10.0.0.256", "a.b.c.d", "1.2.3.4.5"]) {
    let msg = "";
    try {
      parseIpv4(bad);
    } catch (e) {
      msg = (e as Error).message;
    }
    if (!msg.includes(`"${bad}"`)) throw new Error(`"${bad}" not refused clearly: ${msg}`);
  }
});

Deno.test("IPv6 flow hash reproduces every golden vector and Linux jhash2", async () => {
  const { flowHash6ClientIp, flowHash6FiveTuple } = await import("./flow_hash.ts");
  const { loadFlowHash6Vectors } = await import("./vectors.ts");
  const { ipv6Words } = await import("../../lib/ipv6.ts");
  const vectors = await loadFlowHash6Vectors();
  if (vectors.length < 50) throw new Error(`only ${vectors.length} IPv6 flow-hash vectors`);
  for (const v of vectors) {
    const saddr = ipv6Words(v.saddr);
    const t = { saddr, daddr: ipv6Words(v.daddr), sport: v.sport, dport: v.dport, proto: v.proto };
    strictEqual(flowHash6FiveTuple(t, v.seed), v.five_tuple, `five-tuple ${JSON.stringify(v)}`);
    strictEqual(flowHash6ClientIp(saddr, v.seed), v.client_ip, `client-ip ${JSON.stringify(v)}`);
  }
  // The kernel's jhash2 (include/linux/jhash.h) compiled as C gave these for this input.
  const t = {
    saddr: ipv6Words("2001:db8::1"),
    daddr: ipv6Words("2001:db8:100::1"),
    sport: 40000,
    dport: 80,
    proto: 6,
  };
  strictEqual(flowHash6FiveTuple(t, 0x1234), 2334014346, "jhash2 of 10 words");
  strictEqual(flowHash6ClientIp(t.saddr, 0x1234), 113025496, "jhash2 of 4 words");
});
